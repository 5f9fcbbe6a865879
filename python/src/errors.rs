//! The core's errors as Python exceptions.
//!
//! The classes live in `writerlock/_errors.py` (they subclass the `sqlite3` exceptions) and
//! are raised from here: [`Busy`] and [`NotStarted`] through `import_exception!`, the
//! Postgres errors through `writerlock._errors.pg_error`, which picks the class by kind and
//! SQLSTATE. Every message is the core's `Display` text.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use pyo3::{import_exception, intern};

use writerlock::pg;
use writerlock::{Error as WlError, SqliteFailure};

import_exception!(writerlock._errors, Busy);
import_exception!(writerlock._errors, NotStarted);
import_exception!(writerlock._errors, NotAutocommit);
import_exception!(writerlock._errors, WrongDatabase);
import_exception!(sqlite3, OperationalError);
import_exception!(sqlite3, ProgrammingError);

/// SQLite's name of a primary result code, as Python's `sqlite_errorname` gives it.
fn sqlite_code_name(code: i32) -> &'static str {
    match code & 0xff {
        0 => "SQLITE_OK",
        1 => "SQLITE_ERROR",
        2 => "SQLITE_INTERNAL",
        3 => "SQLITE_PERM",
        4 => "SQLITE_ABORT",
        5 => "SQLITE_BUSY",
        6 => "SQLITE_LOCKED",
        7 => "SQLITE_NOMEM",
        8 => "SQLITE_READONLY",
        9 => "SQLITE_INTERRUPT",
        10 => "SQLITE_IOERR",
        11 => "SQLITE_CORRUPT",
        13 => "SQLITE_FULL",
        14 => "SQLITE_CANTOPEN",
        15 => "SQLITE_PROTOCOL",
        17 => "SQLITE_SCHEMA",
        18 => "SQLITE_TOOBIG",
        19 => "SQLITE_CONSTRAINT",
        20 => "SQLITE_MISMATCH",
        21 => "SQLITE_MISUSE",
        23 => "SQLITE_AUTH",
        25 => "SQLITE_RANGE",
        26 => "SQLITE_NOTADB",
        _ => "SQLITE_ERROR",
    }
}

/// The `sqlite_errorcode` attribute of a `sqlite3.Error`, if it carries one.
fn sqlite_errorcode(err: &Bound<'_, PyAny>) -> Option<i32> {
    err.getattr(intern!(err.py(), "sqlite_errorcode"))
        .ok()
        .and_then(|c| c.extract::<i32>().ok())
}

/// Whether `err` is an instance of `sqlite3.Error`.
pub fn is_sqlite_error(py: Python<'_>, err: &PyErr) -> bool {
    py.import(intern!(py, "sqlite3"))
        .and_then(|m| m.getattr(intern!(py, "Error")))
        .map(|cls| err.value(py).is_instance(&cls).unwrap_or(false))
        .unwrap_or(false)
}

/// Whether `err` is a `sqlite3.ProgrammingError` or `sqlite3.InterfaceError`: a misuse of the
/// connection that Python reports, not a failure of SQLite.
fn is_misuse(py: Python<'_>, err: &PyErr) -> bool {
    let Ok(sqlite3) = py.import(intern!(py, "sqlite3")) else {
        return false;
    };
    ["ProgrammingError", "InterfaceError"].iter().any(|name| {
        sqlite3
            .getattr(*name)
            .map(|cls| err.value(py).is_instance(&cls).unwrap_or(false))
            .unwrap_or(false)
    })
}

/// SQLite's code and message for an exception Python's `sqlite3` raised (or any other
/// exception, which counts as `SQLITE_ERROR`).
pub fn failure_of(py: Python<'_>, err: &PyErr) -> SqliteFailure {
    let value = err.value(py);
    let message = value
        .str()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown error".to_string());
    let code = if is_sqlite_error(py, err) {
        sqlite_errorcode(value.as_any()).unwrap_or_else(|| {
            // Before Python 3.11 the exception carries no code; the message tells.
            if message.contains("database is locked") {
                5
            } else if message.contains("table is locked") {
                6
            } else {
                1
            }
        })
    } else {
        1
    };
    SqliteFailure::new(code, message)
}

/// Re-raises a `sqlite3` exception's class with the core's message, keeping its codes and
/// chaining the original as `__cause__`; any other exception is raised as it was.
fn rewrap(py: Python<'_>, message: &str, original: PyErr) -> PyErr {
    if !is_sqlite_error(py, &original) {
        return original;
    }
    let value = original.value(py);
    let built = value.get_type().call1((message,)).and_then(|new| {
        for attr in ["sqlite_errorcode", "sqlite_errorname"] {
            if let Ok(v) = value.getattr(attr) {
                new.setattr(attr, v)?;
            }
        }
        Ok(new)
    });
    match built {
        Ok(new) => {
            let err = PyErr::from_value(new);
            err.set_cause(py, Some(original));
            err
        }
        Err(_) => original,
    }
}

/// The exception Python's `sqlite3` raises for `failure`, as it would had it run the
/// statement itself (its class by SQLite's primary code, `sqlite_errorcode` and
/// `sqlite_errorname` set): the cause chained to an error of a statement the queue ran
/// directly on the connection's handle.
pub fn sqlite3_error_of(py: Python<'_>, failure: &SqliteFailure) -> Option<PyErr> {
    let class = match failure.primary_code() {
        2 | 12 => "InternalError",
        7 => {
            return Some(pyo3::exceptions::PyMemoryError::new_err(
                failure.message.clone(),
            ))
        }
        1 | 3 | 4 | 5 | 6 | 8 | 9 | 10 | 13 | 14 | 15 | 16 | 17 => "OperationalError",
        18 => "DataError",
        19 | 20 => "IntegrityError",
        21 | 25 => "InterfaceError",
        _ => "DatabaseError",
    };
    let built = py
        .import("sqlite3")
        .and_then(|m| m.getattr(class))
        .and_then(|class| class.call1((failure.message.as_str(),)))
        .and_then(|value| {
            value.setattr("sqlite_errorcode", failure.code)?;
            value.setattr("sqlite_errorname", sqlite_code_name(failure.code))?;
            Ok(value)
        });
    built.ok().map(PyErr::from_value)
}

/// Turns an error of the SQLite queue into its Python exception. `original` is the exception
/// Python's `sqlite3` raised during the call, if any (chained as `__cause__`).
pub fn queue_error(py: Python<'_>, err: WlError, original: Option<PyErr>) -> PyErr {
    let message = err.to_string();
    // A statement run on the connection's own handle raised nothing in Python: its cause is
    // the exception sqlite3 would have raised.
    let original = original.or_else(|| match &err {
        WlError::NotStarted { failure } | WlError::Sqlite { failure, .. } => {
            sqlite3_error_of(py, failure)
        }
        _ => None,
    });
    match err {
        WlError::Busy(busy) => {
            let err = Busy::new_err((
                message,
                busy.waited.as_secs_f64(),
                busy.limit.as_secs_f64(),
                busy.setting,
                busy.holder_pid,
            ));
            if let Some(original) = original.filter(|o| is_sqlite_error(py, o)) {
                err.set_cause(py, Some(original));
            }
            err
        }
        WlError::NotStarted { failure } => match original {
            // Not SQLite refusing BEGIN but a misuse Python reports (a connection used from
            // another thread, an exception of the host's own): raised as it was.
            Some(original) if !is_sqlite_error(py, &original) || is_misuse(py, &original) => {
                original
            }
            original => {
                let err =
                    NotStarted::new_err((message, failure.code, sqlite_code_name(failure.code)));
                if let Some(original) = original {
                    err.set_cause(py, Some(original));
                }
                err
            }
        },
        WlError::Sqlite { .. } => match original {
            Some(original) => rewrap(py, &message, original),
            None => OperationalError::new_err(message),
        },
        WlError::NotHolding
        | WlError::AlreadyHolding
        | WlError::HeldThroughAnotherHandle { .. } => ProgrammingError::new_err(message),
        WlError::InTransaction => OperationalError::new_err(message),
        WlError::LockFile { source, .. }
        | WlError::LockFileAccess { source, .. }
        | WlError::Flock { source, .. } => {
            let err = OperationalError::new_err(message);
            err.set_cause(py, Some(PyErr::from(source)));
            err
        }
        WlError::WrongDatabase {
            queue_database,
            connection_database,
        } => WrongDatabase::new_err((
            message.replace(
                "(or from the connection itself)",
                "(or from the connection itself: writerlock.WriterQueue.for_connection(conn))",
            ),
            queue_database.to_string_lossy().into_owned(),
            connection_database.to_string_lossy().into_owned(),
        )),
        WlError::DatabaseReplaced { path } => {
            let path = path.to_string_lossy().into_owned();
            WrongDatabase::new_err((message, path.clone(), path))
        }
        WlError::InvalidArgument { .. } => PyValueError::new_err(message),
        WlError::Interrupted { .. } => OperationalError::new_err(message),
        WlError::UnsafeLockFile { .. } => OperationalError::new_err(message),
    }
}

/// The kind name `writerlock._errors.pg_error` maps to a class, and the extra attributes.
fn pg_kind<'py>(py: Python<'py>, err: &pg::Error) -> PyResult<(&'static str, Bound<'py, PyDict>)> {
    let attrs = PyDict::new(py);
    let kind = match err {
        pg::Error::InvalidUrl { .. } => "invalid_url",
        pg::Error::Connect { address, .. } => {
            attrs.set_item("address", address)?;
            "connect"
        }
        pg::Error::SettingNotInEffect {
            setting,
            expected,
            actual,
        } => {
            attrs.set_item("setting", setting)?;
            attrs.set_item("expected", expected)?;
            attrs.set_item("actual", actual)?;
            "setting"
        }
        pg::Error::LockNotGranted { tries, wait } => {
            attrs.set_item("tries", tries)?;
            attrs.set_item("wait", wait.as_secs_f64())?;
            "lock_not_granted"
        }
        pg::Error::Refused { version, floor } => {
            attrs.set_item("version", version)?;
            attrs.set_item("floor", floor)?;
            "refused"
        }
        pg::Error::AlreadyInTransaction => "already_in_transaction",
        pg::Error::Database { detail, hint, .. } => {
            attrs.set_item("detail", detail)?;
            attrs.set_item("hint", hint)?;
            "database"
        }
        pg::Error::SessionEnded { .. } => "session_ended",
        pg::Error::Closed { .. } => "closed",
        pg::Error::RolledBack => "rolled_back",
        pg::Error::CommitOutcomeUnknown { .. } => "outcome_unknown",
        pg::Error::StartupOptionsRejected { address, .. }
        | pg::Error::ConnectTimedOut { address, .. } => {
            attrs.set_item("address", address)?;
            "connect"
        }
        pg::Error::Unsendable { rolled_back, .. } => {
            attrs.set_item("rolled_back", rolled_back)?;
            "unsendable"
        }
        pg::Error::Forked { .. } => "forked",
        pg::Error::WriteEnded => "write_ended",
        pg::Error::ForeignConnection { .. } => "foreign",
        pg::Error::LimitOutOfRange { .. } => "value",
        pg::Error::ParameterCount { .. } | pg::Error::Parameter { .. } => "parameter",
        pg::Error::UnsupportedType { .. } => "unsupported_type",
        pg::Error::RequiredAboveVersion { .. } | pg::Error::VersionOutOfRange { .. } => "value",
        pg::Error::Driver { .. } => "driver",
        _ => "driver",
    };
    Ok((kind, attrs))
}

/// Turns an error of the Postgres writer session into its Python exception: a
/// `sqlite3.DatabaseError` subclass carrying the SQLSTATE.
pub fn pg_error(py: Python<'_>, err: pg::Error) -> PyErr {
    let message = err.to_string();
    let sqlstate = match &err {
        pg::Error::Connect { code: None, .. } => Some("08001".to_string()),
        other => other.code().map(|c| c.code().to_string()),
    };
    let built = pg_kind(py, &err).and_then(|(kind, attrs)| {
        let module = py.import(intern!(py, "writerlock._errors"))?;
        let exc = module.getattr(intern!(py, "pg_error"))?.call1((
            kind,
            PyString::new(py, &message),
            sqlstate,
            attrs,
        ))?;
        Ok(PyErr::from_value(exc))
    });
    built.unwrap_or_else(|failure| {
        let err = PyRuntimeError::new_err(message);
        err.set_cause(py, Some(failure));
        err
    })
}
