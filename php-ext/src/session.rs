//! PHP's `\SQLite3` object as a connection the queue can drive.
//!
//! Every call goes through the object's own methods (`exec`, `busyTimeout`,
//! `lastErrorCode`, `lastErrorMsg`), so a subclass that overrides them is
//! honoured and the one system `libsqlite3` that PHP's sqlite3 extension
//! loaded does the work. `SQLite3::exec()` reports a failure with an
//! `E_WARNING`; the calls run with the engine's warnings turned into
//! exceptions that are taken back at once (see [`crate::zend::without_warnings`]),
//! so a failure surfaces only as this extension's exception: nothing is
//! printed, logged, or passed to a user error handler. A closed `SQLite3`
//! object throws `\Error` from every method; that becomes a failure too.

use std::cell::RefCell;
use std::time::Duration;

use ext_php_rs::convert::IntoZvalDyn;
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::ExecutorGlobals;
use writerlock::{SqliteFailure, SqliteSession};

use crate::zend;

/// `SQLITE_ERROR`.
const SQLITE_ERROR: i32 = 1;
/// `SQLITE_BUSY`.
const SQLITE_BUSY: i32 = 5;
/// `SQLITE_LOCKED`.
const SQLITE_LOCKED: i32 = 6;
/// `SQLITE_CONSTRAINT`.
const SQLITE_CONSTRAINT: i32 = 19;
/// `SQLITE_MISUSE`: what a closed connection amounts to.
pub(crate) const SQLITE_MISUSE: i32 = 21;

/// A PHP exception thrown by a method of the `SQLite3` object, taken back.
struct Thrown {
    message: String,
    /// An `\Error` (a closed or uninitialised object), not a failure SQLite
    /// reported.
    engine_error: bool,
}

/// A borrowed `\SQLite3` object.
pub(crate) struct PhpSqlite<'a> {
    db: &'a ZendObject,
    /// The failure of the last `exec` through this wrapper, if it failed.
    last_failure: RefCell<Option<SqliteFailure>>,
}

impl<'a> PhpSqlite<'a> {
    /// Wraps an object already checked to be an instance of `SQLite3`.
    pub(crate) fn new(db: &'a ZendObject) -> Self {
        PhpSqlite {
            db,
            last_failure: RefCell::new(None),
        }
    }

    /// Asks SQLite whether a transaction is open: a deferred `BEGIN` fails
    /// with "cannot start a transaction within a transaction" inside one;
    /// outside, it starts an empty transaction that takes no lock and is
    /// rolled back at once. It replaces the connection's last error message.
    fn probe_transaction(&self) -> Option<bool> {
        match self.exec("BEGIN") {
            Ok(()) => self.exec("ROLLBACK").ok().map(|()| false),
            Err(failure) if failure.message.contains("within a transaction") => Some(true),
            Err(_) => None,
        }
    }

    fn call(&self, method: &str, args: Vec<&dyn IntoZvalDyn>) -> Result<Zval, Thrown> {
        let result = zend::without_warnings(|| self.db.try_call_method(method, args));
        if let Some(exception) = ExecutorGlobals::take_exception() {
            let engine_error = exception.instance_of(ext_php_rs::zend::ce::error());
            let message = exception
                .try_call_method("getMessage", vec![])
                .ok()
                .and_then(|m| m.string())
                .unwrap_or_else(|| format!("SQLite3::{method}() failed"));
            // Whatever getMessage() might have thrown is dropped as well.
            drop(ExecutorGlobals::take_exception());
            return Err(Thrown {
                message,
                engine_error,
            });
        }
        result.map_err(|e| Thrown {
            message: format!("SQLite3::{method}() could not be called: {e}"),
            engine_error: true,
        })
    }

    /// SQLite's code and message for the last failure on this connection,
    /// or `fallback` when SQLite reports none.
    fn last_failure(&self, fallback: Option<String>) -> SqliteFailure {
        let code = self
            .call("lastErrorCode", vec![])
            .ok()
            .and_then(|zv| zv.long())
            .unwrap_or(0);
        let message = self
            .call("lastErrorMsg", vec![])
            .ok()
            .and_then(|zv| zv.string())
            .unwrap_or_default();
        if code == 0 {
            SqliteFailure::new(
                SQLITE_ERROR,
                fallback.unwrap_or_else(|| {
                    String::from("SQLite3 reported a failure without a message")
                }),
            )
        } else {
            SqliteFailure::new(i32::try_from(code).unwrap_or(SQLITE_ERROR), message)
        }
    }

    fn failure_from(&self, thrown: Thrown) -> SqliteFailure {
        if thrown.engine_error {
            SqliteFailure::new(SQLITE_MISUSE, thrown.message)
        } else {
            self.last_failure(Some(thrown.message))
        }
    }

    /// Fails when the object is closed (or was never opened), before anything
    /// else is tried.
    pub(crate) fn check_open(&self) -> Result<(), SqliteFailure> {
        match self.call("lastErrorCode", vec![]) {
            Ok(_) => Ok(()),
            Err(thrown) => Err(SqliteFailure::new(SQLITE_MISUSE, thrown.message)),
        }
    }
}

impl SqliteSession for PhpSqlite<'_> {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        let sql = sql.to_string();
        let result = match self.call("exec", vec![&sql]) {
            Ok(zv) if zv.bool() == Some(true) => Ok(()),
            Ok(_) => Err(self.last_failure(None)),
            Err(thrown) => Err(self.failure_from(thrown)),
        };
        *self.last_failure.borrow_mut() = result.as_ref().err().cloned();
        result
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        let millis = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        // SQLite takes an int; anything longer is as good as forever.
        let millis = millis.min(i64::from(i32::MAX));
        match self.call("busyTimeout", vec![&millis]) {
            Ok(zv) if zv.bool() != Some(false) => Ok(()),
            Ok(_) => Err(self.last_failure(None)),
            Err(thrown) => Err(self.failure_from(thrown)),
        }
    }

    /// PHP's `SQLite3` has no autocommit accessor. After a COMMIT or
    /// ROLLBACK that failed, SQLite's answer tells for the common cases
    /// (busy, locked and constraint failures leave the transaction open; "no
    /// transaction is active" says it is gone), which keeps the connection's
    /// `lastErrorMsg()` for the caller; otherwise SQLite is asked with a
    /// probe (see `probe_transaction`).
    fn in_transaction(&self) -> Option<bool> {
        let known =
            self.last_failure
                .borrow()
                .as_ref()
                .and_then(|failure| match failure.primary_code() {
                    SQLITE_BUSY | SQLITE_LOCKED | SQLITE_CONSTRAINT => Some(Some(true)),
                    SQLITE_MISUSE => Some(None),
                    _ if failure.message.contains("no transaction is active") => Some(Some(false)),
                    _ => None,
                });
        match known {
            Some(answer) => answer,
            None => self.probe_transaction(),
        }
    }
}
