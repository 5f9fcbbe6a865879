//! What `writerlock.postgres` needs from the core for DB-API 2.0, read from a statement's
//! text before or after it runs:
//!
//! - psycopg's `%s` and `%(name)s` placeholders outside literals and comments, so a statement
//!   written for psycopg gets a client error that says to use `?` instead of the server's
//!   syntax error at `%`;
//! - whether its command tag counts rows (`rowcount` is -1 for DDL and `SET`);
//! - whether it is an `INSERT` (`lastrowid`);
//! - whether it may change the session's `TimeZone` (the cursor's cached zone is read again).
//!
//! These run on every statement, so they read the text without regular expressions or
//! copies (see [`writerlock::pg::words`]).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use writerlock::pg::{placeholder, words};

/// The `writerlock.postgres` exception classes raised from here.
mod pg_exceptions {
    pyo3::import_exception!(writerlock._errors, ProgrammingError);
}

/// The `ProgrammingError` for a statement written with psycopg's `marker` placeholder.
pub fn pyformat_error(marker: &str) -> PyErr {
    let how = if marker.starts_with("%(") {
        format!(
            "write ? where it says {marker} and pass the values as a tuple, in the order of \
             the ?s"
        )
    } else {
        format!("write ? where it says {marker} and pass the values as a tuple")
    };
    pg_exceptions::ProgrammingError::new_err(format!(
        "the statement uses {marker}, psycopg's placeholder style; writerlock.postgres takes \
         ? placeholders (or $1, $2, ...): {how}, for example \
         conn.execute(\"UPDATE t SET x = ? WHERE id = ?\", (x, id))"
    ))
}

/// Answers psycopg's `%s` / `%(name)s` with a client error that says to use `?`, before
/// anything is sent, when parameters are given for them (a mapping, or values for a
/// statement without `?` or `$n` placeholders). A `%s` with no parameters is left to the
/// server (it may be an operator).
pub fn check_pyformat(sql: &str, params: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let Some(marker) = placeholder::pyformat_marker(sql) else {
        return Ok(());
    };
    let Some(params) = params else {
        return Ok(());
    };
    if params.is_instance_of::<PyDict>()
        || (params.is_truthy()? && !placeholder::has_placeholders(sql))
    {
        return Err(pyformat_error(marker));
    }
    Ok(())
}

/// The server's syntax error for a statement written with psycopg's placeholders, told as
/// that (the server's error kept as its cause); any other error unchanged.
pub fn explain_syntax_error(
    py: Python<'_>,
    sql: &str,
    sqlstate: Option<&str>,
    err: PyErr,
) -> PyErr {
    if sqlstate != Some("42601") {
        return err;
    }
    match placeholder::pyformat_marker(sql) {
        Some(marker) => {
            let told = pyformat_error(marker);
            told.set_cause(py, Some(err));
            told
        }
        None => err,
    }
}

/// The commands whose tag carries a row count (DB-API `rowcount`); DDL, `SET` and the
/// like give -1.
const COUNTING: [&str; 12] = [
    "INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "MOVE", "FETCH", "SELECT", "WITH", "VALUES",
    "TABLE", "EXECUTE",
];

/// Whether the statement's command tag counts rows.
pub fn counts_rows(sql: &str) -> bool {
    words::starts_with_any(sql, &COUNTING)
}

/// Whether the statement is an `INSERT`.
pub fn is_insert(sql: &str) -> bool {
    words::starts_with_any(sql, &["INSERT"])
}

/// Whether the statement may change the session's `TimeZone` (`SET TIME ZONE`,
/// `SET timezone`, `RESET`, `DISCARD`); a false alarm only costs one `SHOW TimeZone`.
pub fn may_change_zone(sql: &str) -> bool {
    let text = sql.as_bytes();
    let time_zone = (0..text.len().saturating_sub(3)).any(|i| {
        text[i..i + 4].eq_ignore_ascii_case(b"time") && {
            let rest = &text[i + 4..];
            let gap = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
            rest.len() >= gap + 4 && rest[gap..gap + 4].eq_ignore_ascii_case(b"zone")
        }
    });
    time_zone || words::mentions(sql, "reset") || words::mentions(sql, "discard")
}
