//! The writer floor: what the schema's catalog check found, which addresses this process
//! set up, and what a refusal to set the schema up means.
//!
//! The set-up runs once per database address per process before the first write
//! ([`Protocol::ensure`](super::protocol::Protocol::ensure), which this crate's
//! [`Connection`](super::Connection) drives through
//! [`ensure_schema`](super::writer::ensure_schema)), or whenever a host asks
//! ([`Protocol::setup`](super::protocol::Protocol::setup),
//! [`setup_schema`](super::writer::setup_schema), `writerlock pg setup`). It takes the writer
//! lock, lifts the statement limit for its own transaction with
//! `SET LOCAL statement_timeout = 0`, runs the host's DDL if any, creates minimal `ledgers`
//! and `row_changes` tables only where they are missing, then the `writer_floor` table, the
//! trigger function and the `ledger_writer_floor` trigger, and stores the floor with
//! `INSERT ... ON CONFLICT ... GREATEST(...)`: code can raise the floor, never lower it. The
//! statements are in [`sql`](super::sql).
//!
//! Every refusal also counts itself in the sequence [`REFUSALS_SEQUENCE`] after it takes
//! its refusal lock (a sequence keeps counting through the refused transaction's rollback),
//! so a writer that saw no refused writer at a count knows there is still none while the
//! count stays, and skips the scan of `pg_locks`, which costs each write hundreds of
//! microseconds under the writer lock.

use std::sync::Mutex;

use postgres::error::SqlState;

use super::error::Error;
pub use super::sql::{
    refusal_lock_key, refusal_lock_sql, refusal_lock_sql_if_direct, FLOOR_CHECK_BODY, FLOOR_NAME,
    FLOOR_TABLE_SQL, REFUSALS_SEQUENCE, REFUSED_LOCK_CLASS, REFUSED_LOCK_SUBID, SCHEMA_CHECK_SQL,
    SCHEMA_SQL, SETUP_LIMIT_SQL, STORED_FLOOR_SQL, STORE_FLOOR_SQL, TRIGGER_NAME,
};
use super::value::Value;

/// What the schema check ([`SCHEMA_CHECK_SQL`]) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaCheck {
    /// Every object of the floor's schema is there and current: no DDL is needed.
    pub current: bool,
    /// The transaction is read-only: nothing can be stored here.
    pub read_only: bool,
}

impl SchemaCheck {
    /// Reads the row of [`SCHEMA_CHECK_SQL`] (booleans, or their text form from a driver that
    /// returns text); a missing or doubtful answer counts as not current and not read-only,
    /// so the full set-up runs.
    pub fn read(rows: &[Vec<Value>]) -> SchemaCheck {
        let row = rows.first();
        let cell = |n: usize| row.and_then(|r| r.get(n)).and_then(Value::read_bool);
        SchemaCheck {
            current: cell(0).unwrap_or(false),
            read_only: cell(1).unwrap_or(false),
        }
    }

    /// Whether the set-up runs the schema's DDL ([`SCHEMA_SQL`]): only when something is
    /// missing or not current.
    pub fn needs_ddl(&self) -> bool {
        !self.current
    }

    /// Whether the set-up stores the floor ([`STORE_FLOOR_SQL`]): always, except on a
    /// read-only server whose schema is current, where nothing can be stored and the write
    /// itself says what fails. Such a set-up is not recorded as done, so the next write
    /// tries again (after a failover, say).
    pub fn stores_floor(&self) -> bool {
        !(self.current && self.read_only)
    }
}

/// Addresses set up by this process. A `Vec` (a handful of addresses at
/// most) rather than a hash set, whose table pointer points inside its
/// allocation: valgrind would report what it holds at exit as "possibly
/// lost" in every C program that used Postgres.
static SET_UP: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn set_up() -> std::sync::MutexGuard<'static, Vec<String>> {
    SET_UP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether this process already set up the schema at `address` (an [`Address`]'s display
/// form, `postgresql://user@host:port/dbname`).
///
/// [`Address`]: super::Address
pub fn is_set_up(address: &str) -> bool {
    set_up().iter().any(|a| a == address)
}

/// Records that this process set up the schema at `address`, for a host that ran the setup
/// through [`Protocol::setup`](super::protocol::Protocol::setup) on a connection of its own.
pub fn mark_set_up(address: &str) {
    let mut set_up = set_up();
    if !set_up.iter().any(|a| a == address) {
        set_up.push(address.to_string());
    }
}

/// The error of the schema's DDL in the per-process set-up: a role without the owner's
/// rights (SQLSTATE `42501`) is told that the schema is missing or older than this code and
/// that setting it up is the owner's step; other errors are as the server gave them.
pub fn owner_step(err: Error) -> Error {
    match err {
        Error::Database {
            code,
            message,
            detail,
            hint,
        } if code == SqlState::INSUFFICIENT_PRIVILEGE => Error::Database {
            code,
            message: format!(
                "{message}: the writer floor's schema in this database is missing or older \
                 than this code, and only the owner of its tables can set it up; run \
                 `writerlock pg setup` (or setup_schema) once as that owner, then this role \
                 needs only SELECT, INSERT, UPDATE, DELETE on ledgers, row_changes and \
                 writer_floor and USAGE on the sequence writer_refusals"
            ),
            detail,
            hint,
        },
        other => other,
    }
}

/// Reads the stored floor from the rows of [`STORED_FLOOR_SQL`] (`None` when there is no
/// row).
pub fn read_stored_floor(rows: &[Vec<Value>]) -> Option<i64> {
    rows.first()
        .and_then(|r| r.first())
        .and_then(Value::read_i64)
}
