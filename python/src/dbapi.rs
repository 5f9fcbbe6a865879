//! What `writerlock.postgres` needs from the core for DB-API 2.0: spotting psycopg's `%s` and
//! `%(name)s` placeholders outside literals and comments, so a statement written for psycopg
//! gets a client error that says to use `?` instead of the server's syntax error at `%`.

use pyo3::prelude::*;

use writerlock::pg::placeholder;

/// The first `%s` or `%(name)s` placeholder in `sql` outside literals and comments, or
/// `None`.
#[pyfunction]
fn pg_pyformat_marker(sql: &str) -> Option<String> {
    placeholder::pyformat_marker(sql).map(str::to_string)
}

/// Whether `sql` has `?` or `$n` placeholders outside literals and comments.
#[pyfunction]
fn pg_has_placeholders(sql: &str) -> bool {
    placeholder::has_placeholders(sql)
}

/// Adds the functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pg_pyformat_marker, m)?)?;
    m.add_function(wrap_pyfunction!(pg_has_placeholders, m)?)?;
    Ok(())
}
