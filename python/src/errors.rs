//! The core's errors as Python exceptions.
//!
//! The classes live in `writerlock/_errors.py` (they subclass the `sqlite3` exceptions) and
//! are raised from here: [`Busy`] and [`NotStarted`] through `import_exception!`, the
//! Postgres errors through `writerlock._errors.pg_error`, which picks the class by the core's
//! kind name (its one table, `_BY_KIND`) and, for server errors, by SQLSTATE. The queue's
//! classes come from one table here ([`queue_class`]). Every message is the core's text.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::{import_exception, intern};

use writerlock::pg;
use writerlock::{Error as WlError, ErrorKind, SqliteFailure};

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

/// The Python class of a kind of SQLite queue error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueueClass {
    /// `writerlock.Busy`, with the wait's fields.
    Busy,
    /// `writerlock.NotStarted`, with SQLite's code (or the exception Python raised, when that
    /// was a misuse Python reports rather than SQLite refusing `BEGIN`).
    NotStarted,
    /// The `sqlite3` class of the exception Python raised, with the core's message
    /// (`sqlite3.OperationalError` when Python raised none).
    Sqlite3,
    /// `writerlock.WrongDatabase`, with the two paths.
    WrongDatabase,
    /// `sqlite3.OperationalError` (with the `OSError` as its cause for a lock file).
    OperationalError,
    /// `sqlite3.ProgrammingError`.
    ProgrammingError,
    /// `ValueError`.
    ValueError,
}

impl QueueClass {
    /// The class's name as Python shows it (for the table's test).
    fn name(self) -> &'static str {
        match self {
            QueueClass::Busy => "writerlock.Busy",
            QueueClass::NotStarted => "writerlock.NotStarted",
            QueueClass::Sqlite3 => "sqlite3.Error",
            QueueClass::WrongDatabase => "writerlock.WrongDatabase",
            QueueClass::OperationalError => "sqlite3.OperationalError",
            QueueClass::ProgrammingError => "sqlite3.ProgrammingError",
            QueueClass::ValueError => "ValueError",
        }
    }
}

/// The class of each kind of SQLite queue error: the one table the module maps the queue's
/// errors through.
fn queue_class(kind: ErrorKind) -> QueueClass {
    use ErrorKind as K;
    match kind {
        K::Busy => QueueClass::Busy,
        K::NotStarted => QueueClass::NotStarted,
        K::Sqlite => QueueClass::Sqlite3,
        K::NotHolding | K::AlreadyHolding | K::HeldThroughAnotherHandle => {
            QueueClass::ProgrammingError
        }
        K::InTransaction
        | K::LockFile
        | K::LockFileAccess
        | K::Flock
        | K::UnsafeLockFile
        | K::Interrupted => QueueClass::OperationalError,
        K::WrongDatabase | K::DatabaseReplaced => QueueClass::WrongDatabase,
        K::InvalidArgument => QueueClass::ValueError,
    }
}

/// How Python code makes a queue from a connection, named in the wrong-database message.
const FOR_CONNECTION: &str = "writerlock.WriterQueue.for_connection(conn)";

/// Turns an error of the SQLite queue into its Python exception. `original` is the exception
/// Python's `sqlite3` raised during the call, if any (chained as `__cause__`).
pub fn queue_error(py: Python<'_>, err: WlError, original: Option<PyErr>) -> PyErr {
    let message = match &err {
        WlError::WrongDatabase {
            queue_database,
            connection_database,
        } => writerlock::wrong_database_message(
            queue_database,
            connection_database,
            Some(FOR_CONNECTION),
        ),
        other => other.to_string(),
    };
    // A statement run on the connection's own handle raised nothing in Python: its cause is
    // the exception sqlite3 would have raised.
    let original = original.or_else(|| match &err {
        WlError::NotStarted { failure } | WlError::Sqlite { failure, .. } => {
            sqlite3_error_of(py, failure)
        }
        _ => None,
    });
    match queue_class(err.kind()) {
        QueueClass::Busy => {
            let (waited, limit, setting, holder_pid) = err.busy().map_or_else(
                || (0.0, 0.0, String::new(), None),
                |b| {
                    (
                        b.waited.as_secs_f64(),
                        b.limit.as_secs_f64(),
                        b.setting.clone(),
                        b.holder_pid,
                    )
                },
            );
            let err = Busy::new_err((message, waited, limit, setting, holder_pid));
            if let Some(original) = original.filter(|o| is_sqlite_error(py, o)) {
                err.set_cause(py, Some(original));
            }
            err
        }
        QueueClass::NotStarted => match original {
            // Not SQLite refusing BEGIN but a misuse Python reports (a connection used from
            // another thread, an exception of the host's own): raised as it was.
            Some(original) if !is_sqlite_error(py, &original) || is_misuse(py, &original) => {
                original
            }
            original => {
                let code = err.sqlite_error_code().unwrap_or(1);
                let err = NotStarted::new_err((message, code, sqlite_code_name(code)));
                if let Some(original) = original {
                    err.set_cause(py, Some(original));
                }
                err
            }
        },
        QueueClass::Sqlite3 => match original {
            Some(original) => rewrap(py, &message, original),
            None => OperationalError::new_err(message),
        },
        QueueClass::WrongDatabase => {
            let (queue, connection) = match &err {
                WlError::WrongDatabase {
                    queue_database,
                    connection_database,
                } => (queue_database.clone(), connection_database.clone()),
                WlError::DatabaseReplaced { path } => (path.clone(), path.clone()),
                _ => Default::default(),
            };
            WrongDatabase::new_err((
                message,
                queue.to_string_lossy().into_owned(),
                connection.to_string_lossy().into_owned(),
            ))
        }
        QueueClass::OperationalError => {
            let exc = OperationalError::new_err(message);
            if let WlError::LockFile { source, .. }
            | WlError::LockFileAccess { source, .. }
            | WlError::Flock { source, .. } = err
            {
                exc.set_cause(py, Some(PyErr::from(source)));
            }
            exc
        }
        QueueClass::ProgrammingError => ProgrammingError::new_err(message),
        QueueClass::ValueError => PyValueError::new_err(message),
    }
}

/// The extra attributes of a Postgres error's exception (the kind picks its class in
/// `writerlock._errors`).
fn pg_attrs<'py>(py: Python<'py>, err: &pg::Error) -> PyResult<Bound<'py, PyDict>> {
    let attrs = PyDict::new(py);
    match err {
        pg::Error::Connect { address, .. }
        | pg::Error::StartupOptionsRejected { address, .. }
        | pg::Error::ConnectTimedOut { address, .. } => {
            attrs.set_item("address", address)?;
        }
        pg::Error::SettingNotInEffect {
            setting,
            expected,
            actual,
        } => {
            attrs.set_item("setting", setting)?;
            attrs.set_item("expected", expected)?;
            attrs.set_item("actual", actual)?;
        }
        pg::Error::LockNotGranted { tries, wait } => {
            attrs.set_item("tries", tries)?;
            attrs.set_item("wait", wait.as_secs_f64())?;
        }
        pg::Error::Refused { version, floor } => {
            attrs.set_item("version", version)?;
            attrs.set_item("floor", floor)?;
        }
        pg::Error::Database { detail, hint, .. } => {
            attrs.set_item("detail", detail)?;
            attrs.set_item("hint", hint)?;
        }
        pg::Error::Unsendable { rolled_back, .. } => {
            attrs.set_item("rolled_back", rolled_back)?;
        }
        // The other errors carry no attributes beyond the message and the SQLSTATE.
        _ => {}
    }
    Ok(attrs)
}

/// The text of the error for a statement run through a write that has already ended, in the
/// Python API's words for how a write ends and how to start a new one.
#[pyfunction]
fn pg_write_ended_message(how_it_ends: &str, start_new: &str) -> String {
    pg::write_ended_message(how_it_ends, start_new)
}

/// The class name of every kind of SQLite queue error, by the kind's name (what the tests
/// check the table against).
#[pyfunction]
fn queue_error_classes(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let table = PyDict::new(py);
    for kind in ErrorKind::ALL {
        table.set_item(kind.name(), queue_class(*kind).name())?;
    }
    Ok(table)
}

/// Registers the error helpers: `pg_write_ended_message`, `queue_error_classes` and
/// `PG_ERROR_KINDS`, the name of every kind of Postgres error (the keys of
/// `writerlock._errors`' table).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pg_write_ended_message, m)?)?;
    m.add_function(wrap_pyfunction!(queue_error_classes, m)?)?;
    let kinds: Vec<&str> = pg::ErrorKind::ALL.iter().map(|k| k.name()).collect();
    m.add("PG_ERROR_KINDS", PyTuple::new(m.py(), kinds)?)?;
    Ok(())
}

/// Turns an error of the Postgres writer session into its Python exception: a
/// `sqlite3.DatabaseError` subclass carrying the SQLSTATE.
pub fn pg_error(py: Python<'_>, err: pg::Error) -> PyErr {
    let message = err.to_string();
    let sqlstate = match &err {
        pg::Error::Connect { code: None, .. } => Some("08001".to_string()),
        other => other.code().map(|c| c.code().to_string()),
    };
    let kind = err.kind().name();
    let built = pg_attrs(py, &err).and_then(|attrs| {
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
