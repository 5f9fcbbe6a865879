//! `writerlock._native`: the Python extension module of writerlock.
//!
//! The Python package `writerlock` (in `python/writerlock/`) wraps this module:
//!
//! * [`sqlite`]: `WriterQueue`, the SQLite write queue driving a Python `sqlite3.Connection`
//!   through [`writerlock::SqliteSession`];
//! * [`pg`]: the Postgres writer session (`PgSession`, `PgPool`, `PgSettings`), the floor and
//!   alert functions, and the conversions of [`values`];
//! * [`write`]: `PgWrite`, the native half of `writerlock.postgres.Write`;
//! * [`protocol`]: `PgProtocol`, the core's writer protocol without I/O, which
//!   `writerlock/_drivers.py` runs on a psycopg (or psycopg2) connection;
//! * [`dbapi`]: what `writerlock.postgres`' DB-API 2.0 cursor reads from a statement's text;
//! * [`status`]: who holds and who waits, for `python -m writerlock status`;
//! * [`errors`]: the mapping of the core's errors to the exception classes defined in
//!   `writerlock/_errors.py`.
//!
//! Every wait of the core (a `flock()`, a sleep, the network) runs with the interpreter
//! released (`Python::detach`), so other Python threads keep running.

use pyo3::prelude::*;

pub mod dbapi;
pub mod errors;
pub mod pg;
pub mod protocol;
pub mod sqlite;
pub mod status;
pub mod values;
pub mod write;

/// The native part of writerlock; import `writerlock` and `writerlock.postgres` instead.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    sqlite::register(m)?;
    m.add_function(wrap_pyfunction!(status::lock_status, m)?)?;
    pg::register(m)?;
    write::register(m)?;
    protocol::register(m)?;
    errors::register(m)?;
    Ok(())
}
