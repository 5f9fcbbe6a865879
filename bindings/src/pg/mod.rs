//! The Postgres writer session: `wl_pg_settings`, `wl_pg_conn`,
//! `wl_pg_pool` and `wl_pg_write`; and, for a program with a connection of
//! its own (libpq), `wl_pg_protocol` with `wl_pg_text_rows`.
//!
//! Every connection sends `lock_timeout=10s`,
//! `idle_in_transaction_session_timeout=15s`, `statement_timeout=60s` and
//! the writer version (`agentihooks.ledger_writer_version`) as startup
//! options, and checks after connecting that they took effect. A write
//! transaction (`wl_pg_write_begin`) takes the ledger writer lock as its
//! first statement, with its waits, then checks the writer floor.
//!
//! One file per C object.

// cbindgen declares the functions in the order it reads the modules: keep
// them apart (so rustfmt does not sort them) in the header's order.
mod settings;

mod conn;

mod write;

mod pool;

mod text_rows;

mod protocol;

pub use conn::*;
pub use pool::*;
pub use protocol::*;
pub use settings::*;
pub use text_rows::*;
pub use write::*;
