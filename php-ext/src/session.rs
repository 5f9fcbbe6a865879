//! PHP's `\SQLite3` and `PDO` (sqlite driver) objects as a connection the
//! queue can drive.
//!
//! Where the connection's own `sqlite3*` can be reached ([`crate::direct`]),
//! the queue's own statements (`BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`,
//! `PRAGMA busy_timeout`), the busy timeout, the transaction state and the
//! database file go straight to SQLite through the core's
//! [`SqliteHandle`]: none of them passes through the object's PHP methods
//! (a subclass overriding `exec()` never sees them), and the queue sets
//! SQLite's commit and rollback hooks on the handle for the length of its
//! transaction, so a transaction the script ends itself gives the turn back.
//! A statement queued with `exec()` still runs through the object's own
//! `exec()`, as the caller wrote it.
//!
//! Otherwise every call goes through the object's own methods (`SQLite3`:
//! `exec`, `busyTimeout`, `lastErrorCode`, `lastErrorMsg`; `PDO`: `exec`,
//! `errorInfo`, and `PRAGMA busy_timeout` for the busy timeout, since
//! `PDO::ATTR_TIMEOUT` counts whole seconds), and the one system `libsqlite3`
//! that PHP's sqlite extensions loaded does the work. `SQLite3::exec()` reports a failure with
//! an `E_WARNING`, a `PDO` with a warning, an exception or nothing, as its
//! error mode says; the calls run with the engine's warnings turned into
//! exceptions that are taken back at once (see
//! [`crate::zend::without_warnings`]), so a failure surfaces only as this
//! extension's exception: nothing is printed, logged, or passed to a user
//! error handler, and the connection's error mode is left as it was. A
//! closed `SQLite3` object (or a PDO never constructed) throws `\Error` from
//! every method; that becomes a failure too.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Duration;

use ext_php_rs::convert::IntoZvalDyn;
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::ExecutorGlobals;
use libsqlite3_sys as ffi;
use writerlock::{RawSqlite, SqliteFailure, SqliteHandle, SqliteSession};

use crate::direct::{self, Found};
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

/// Which PHP class a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnKind {
    /// `\SQLite3` (or a subclass).
    Sqlite3,
    /// `PDO` with the sqlite driver (or a subclass).
    Pdo,
}

/// A borrowed `\SQLite3` or `PDO` object.
pub(crate) struct PhpSqlite<'a> {
    db: &'a ZendObject,
    kind: ConnKind,
    /// The failure of the last `exec` through this wrapper, if it failed.
    last_failure: RefCell<Option<SqliteFailure>>,
    /// The connection's own handle, where the queue drives it directly; its
    /// statements are finalized when this wrapper is dropped, at the end of
    /// the extension's call.
    handle: Option<SqliteHandle>,
}

impl<'a> PhpSqlite<'a> {
    /// Wraps an object already checked to be an instance of `SQLite3`, or
    /// of `PDO` with the sqlite driver.
    pub(crate) fn new(db: &'a ZendObject, kind: ConnKind) -> Self {
        let mut session = PhpSqlite {
            db,
            kind,
            last_failure: RefCell::new(None),
            handle: None,
        };
        let found = direct::handle(db, kind);
        match found {
            // SAFETY: an open connection of this process's libsqlite3 (checked by
            // `direct::handle`), which PHP closes with sqlite3_close(): the handle's
            // statements are finalized when `session` is dropped, within this call.
            Found::Open(raw) => session.handle = unsafe { SqliteHandle::new(raw) },
            // A closed object fails its PHP methods with PHP's own message.
            Found::Closed | Found::Unknown => {}
        }
        session
    }

    /// Runs one of the queue's own statements on the handle, noting a failure.
    fn exec_direct(&self, handle: &SqliteHandle, sql: &str) -> Result<(), SqliteFailure> {
        let result = handle.exec(sql);
        *self.last_failure.borrow_mut() = result.as_ref().err().cloned();
        result
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
        let class = match self.kind {
            ConnKind::Sqlite3 => "SQLite3",
            ConnKind::Pdo => "PDO",
        };
        zend::without_signal_handlers(|| {
            let result = zend::without_warnings(|| self.db.try_call_method(method, args));
            if let Some(exception) = ExecutorGlobals::take_exception() {
                let engine_error = exception.instance_of(ext_php_rs::zend::ce::error());
                let message = exception
                    .try_call_method("getMessage", vec![])
                    .ok()
                    .and_then(|m| m.string())
                    .unwrap_or_else(|| format!("{class}::{method}() failed"));
                // Whatever getMessage() might have thrown is dropped as well.
                drop(ExecutorGlobals::take_exception());
                return Err(Thrown {
                    message,
                    engine_error,
                });
            }
            result.map_err(|e| Thrown {
                message: format!("{class}::{method}() could not be called: {e}"),
                engine_error: true,
            })
        })
    }

    /// SQLite's code and message for the last failure on this connection,
    /// or `fallback` when SQLite reports none.
    fn last_failure(&self, fallback: Option<String>) -> SqliteFailure {
        if self.kind == ConnKind::Pdo {
            return self.last_pdo_failure(fallback);
        }
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

    /// `PDO::errorInfo()`: SQLSTATE, SQLite's code, SQLite's message.
    fn last_pdo_failure(&self, fallback: Option<String>) -> SqliteFailure {
        let info = self.call("errorInfo", vec![]).ok();
        let array = info.as_ref().and_then(|zv| zv.array());
        let code = array
            .and_then(|a| a.get_index(1))
            .and_then(|zv| zv.long())
            .unwrap_or(0);
        let message = array
            .and_then(|a| a.get_index(2))
            .and_then(|zv| zv.string())
            .unwrap_or_default();
        if code == 0 {
            SqliteFailure::new(
                SQLITE_ERROR,
                fallback
                    .unwrap_or_else(|| String::from("PDO reported a failure without a message")),
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

    /// The failure of the last statement run through this wrapper, or the
    /// connection's last error.
    pub(crate) fn last_failure_now(&self) -> SqliteFailure {
        let known = self.last_failure.borrow().clone();
        known.unwrap_or_else(|| self.last_failure(None))
    }

    /// The first column of the first row of a query (`None`: no row), run
    /// through the connection's own methods (`SQLite3::querySingle()`,
    /// `PDO::query()` and `PDOStatement::fetchColumn()`).
    fn query_single(&self, sql: &str) -> Result<Option<Zval>, SqliteFailure> {
        let sql = sql.to_string();
        let value = match self.kind {
            ConnKind::Sqlite3 => self.call("querySingle", vec![&sql]),
            ConnKind::Pdo => match self.call("query", vec![&sql]) {
                Ok(statement) => match statement.object() {
                    Some(statement) => {
                        let (fetched, thrown) = zend::without_signal_handlers(|| {
                            let fetched = zend::without_warnings(|| {
                                statement.try_call_method("fetchColumn", vec![])
                            });
                            (fetched, ExecutorGlobals::take_exception())
                        });
                        match thrown {
                            Some(_) => Err(Thrown {
                                message: "PDOStatement::fetchColumn() failed".into(),
                                engine_error: false,
                            }),
                            None => fetched.map_err(|e| Thrown {
                                message: format!(
                                    "PDOStatement::fetchColumn() could not be called: {e}"
                                ),
                                engine_error: true,
                            }),
                        }
                    }
                    None => return Err(self.last_failure(None)),
                },
                Err(thrown) => Err(thrown),
            },
        };
        match value {
            // SQLite3::querySingle() returns false on failure and null for
            // no row; PDOStatement::fetchColumn() false for no row.
            Ok(zv) if zv.bool() == Some(false) && self.kind == ConnKind::Sqlite3 => {
                Err(self.last_failure(None))
            }
            Ok(zv) if zv.is_null() || zv.bool() == Some(false) => Ok(None),
            Ok(zv) => Ok(Some(zv)),
            Err(thrown) => Err(self.failure_from(thrown)),
        }
    }

    /// The file of the connection's main database (empty for an in-memory
    /// or temporary one), as `PRAGMA database_list` names it.
    pub(crate) fn main_file(&self) -> Result<String, SqliteFailure> {
        if let Some(handle) = &self.handle {
            return handle.main_database_file().map(|file| {
                file.map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        }
        let value =
            self.query_single("SELECT file FROM pragma_database_list WHERE name = 'main'")?;
        match value {
            Some(zv) => Ok(zv.string().unwrap_or_default()),
            None => Ok(String::new()),
        }
    }

    /// Fails when the object is closed (or was never opened), before anything
    /// else is tried.
    pub(crate) fn check_open(&self) -> Result<(), SqliteFailure> {
        if self.handle.is_some() {
            return Ok(());
        }
        // SQLite3::lastErrorCode() answers 0 on a closed object; changes()
        // throws, and changes nothing.
        let method = match self.kind {
            ConnKind::Sqlite3 => "changes",
            ConnKind::Pdo => "errorCode",
        };
        match self.call(method, vec![]) {
            Ok(_) => Ok(()),
            Err(thrown) => Err(SqliteFailure::new(SQLITE_MISUSE, thrown.message)),
        }
    }
}

impl SqliteSession for PhpSqlite<'_> {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        if let Some(handle) = &self.handle {
            if SqliteHandle::is_own_statement(sql) {
                return self.exec_direct(handle, sql);
            }
        }
        let sql = sql.to_string();
        let result = match self.call("exec", vec![&sql]) {
            // SQLite3::exec() returns true; PDO::exec() the number of rows.
            Ok(zv) if zv.bool() == Some(true) || zv.long().is_some() => Ok(()),
            Ok(_) => Err(self.last_failure(None)),
            Err(thrown) => Err(self.failure_from(thrown)),
        };
        *self.last_failure.borrow_mut() = result.as_ref().err().cloned();
        result
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        if let Some(handle) = &self.handle {
            return handle.set_busy_timeout(timeout);
        }
        let millis = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        // SQLite takes an int; anything longer is as good as forever.
        let millis = millis.min(i64::from(i32::MAX));
        if self.kind == ConnKind::Pdo {
            return self.exec(&format!("PRAGMA busy_timeout = {millis}"));
        }
        match self.call("busyTimeout", vec![&millis]) {
            Ok(zv) if zv.bool() != Some(false) => Ok(()),
            Ok(_) => Err(self.last_failure(None)),
            Err(thrown) => Err(self.failure_from(thrown)),
        }
    }

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        self.main_file().map(|file| Some(PathBuf::from(file)))
    }

    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        if let Some(handle) = &self.handle {
            return handle.busy_timeout();
        }
        let value = self.query_single("PRAGMA busy_timeout")?;
        Ok(value
            .and_then(|zv| zv.long())
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    /// PHP's `SQLite3` has no autocommit accessor, and `PDO::inTransaction()`
    /// knows only of transactions PDO itself began. After a COMMIT or
    /// ROLLBACK that failed, SQLite's answer tells for the common cases
    /// (busy, locked and constraint failures leave the transaction open; "no
    /// transaction is active" says it is gone), which keeps the connection's
    /// `lastErrorMsg()` for the caller; otherwise SQLite is asked with a
    /// probe (see `probe_transaction`).
    fn in_transaction(&self) -> Option<bool> {
        if let Some(handle) = &self.handle {
            return handle.in_transaction();
        }
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

    fn connection_id(&self) -> Option<usize> {
        if let Some(handle) = &self.handle {
            return handle.connection_id();
        }
        // The object's address: one connection object per address while it lives.
        Some(std::ptr::from_ref(self.db) as usize)
    }

    fn has_moved(&self) -> Option<bool> {
        // SQLite's own check (SQLITE_FCNTL_HAS_MOVED: one stat() of the path) rather than
        // the handle's, which first looks for SQLite's descriptor (three system calls),
        // since the handle lives for one call here.
        let handle = self.handle.as_ref()?;
        // SAFETY: the handle of an open connection, valid while `self` is.
        unsafe { RawSqlite::from_handle(handle.handle()) }.and_then(|raw| raw.has_moved())
    }

    fn is_read_only(&self, sql: &str) -> Option<bool> {
        self.handle
            .as_ref()
            .and_then(|handle| handle.is_read_only(sql))
    }

    fn end_hooks_handle(&self) -> Option<*mut ffi::sqlite3> {
        // Neither PHP's SQLite3 nor PDO sets SQLite's commit or rollback hook, or lets its
        // users set one: the queue's, for the length of its transaction, takes nothing away.
        self.handle
            .as_ref()
            .and_then(|handle| handle.end_hooks_handle())
    }
}
