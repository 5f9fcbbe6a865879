//! The Postgres writer session of the shared ledger database.
//!
//! Writers take turns through one writer lock, and every connection asks the server to end a
//! session that stalls, so a client that dies or gives up while it holds or waits for the
//! lock cannot stop writes for everyone. The database also stores the oldest writer version
//! it allows (the writer floor) and refuses ledger writes from older code.
//!
//! - [`Settings`]: the startup settings every connection sends (`lock_timeout=10s`,
//!   `idle_in_transaction_session_timeout=15s`, `statement_timeout=60s`,
//!   `agentihooks.ledger_writer_version=1`, keepalives), with setters.
//! - [`Connection`]: a session with those settings, checked after connecting; statements
//!   with `?` or `$n` placeholders and [`Value`] parameters return [`Rows`].
//! - [`Pool`]: `take` and `give`.
//! - [`protocol`]: the writer session without I/O, the only implementation of the writer
//!   lock, the floor check and the schema setup; hosts with a connection of their own
//!   (psycopg, PDO, libpq) drive it, and so does [`Connection`].
//! - [`Connection::begin_write`] / [`Connection::write`] ([`writer`]): the protocol driven
//!   on a [`Connection`], the writer lock with its waits, then the floor check.
//! - [`setup_schema`]: the floor table, trigger and stored floor.
//! - [`new_alerts`] ([`alerts`]): the ledger alert for refused writers.
//! - [`admin`]: the holder, idle-holder, unrecorded-bump, stored-floor and refused-writer
//!   queries.
//! - [`sql`]: every statement of the writer session, one set of constants below
//!   [`floor`], [`alerts`], [`admin`] and [`protocol`].
//!
//! ```no_run
//! use writerlock::pg::{Connection, Settings, Value};
//!
//! # fn main() -> Result<(), writerlock::pg::Error> {
//! let mut conn = Connection::connect("postgresql://ledger@db:5432/ledger", &Settings::new())?;
//! let mut write = conn.write()?;
//! write.execute(
//!     "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?",
//!     &[Value::from("main")],
//! )?;
//! let alerts = write.alerts(&[]);
//! write.commit()?;
//! # let _ = alerts;
//! # Ok(())
//! # }
//! ```

pub mod address;
pub mod admin;
pub mod alerts;
pub mod connection;
pub mod environment;
pub mod error;
pub mod floor;
pub mod many;
pub mod placeholder;
pub mod pool;
pub mod prepared;
pub mod protocol;
pub mod settings;
mod socket;
pub mod sql;
pub mod tls;
pub mod value;
pub mod words;
pub mod writer;

pub use address::Address;
pub use admin::{refused_writers, stored_floor};
pub use alerts::{alert_text, new_alerts, Alert, RefusedWriter, KEPT_CLOSED_ALERTS, UNSEEN_CLIENT};
pub use connection::{Connection, MAX_PARAMETERS};
pub use error::{refusal_message, write_ended_message, Error, ErrorKind, REFUSED_SQLSTATE};
pub use floor::{refusal_lock_key, FLOOR_NAME, REFUSED_LOCK_CLASS, REFUSED_LOCK_SUBID};
pub use placeholder::translate;
pub use pool::{Pool, CHECK_IDLE_AFTER, DEFAULT_POOL_SIZE};
pub use postgres::error::SqlState;
pub use protocol::{
    Protocol, Reply, ServerError, Statement, StatementKind, Step, TxState, WriteStart,
};
pub use settings::{
    check_limit, verify_checks, SettingCheck, SettingStatus, Settings, IDLE_IN_TRANSACTION,
    LOCK_TRIES, LOCK_WAIT, MAX_LIMIT, MIN_LIMIT, REQUIRED, SESSION, STATEMENT_TIMEOUT, VERSION,
    VERSION_SETTING, WRITER_LOCK,
};
pub use value::{Column, Row, Rows, Value};
pub use writer::{ensure_schema, setup_schema, Write};
