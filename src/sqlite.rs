//! The few things the queue asks of a SQLite connection.
//!
//! The queue never opens a connection of its own: it drives the host's
//! (a `rusqlite::Connection`, a C caller's `sqlite3*`, PHP's `SQLite3`, a
//! Python `sqlite3.Connection`) through [`SqliteSession`], so every host keeps
//! the one system `libsqlite3` it already uses.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use libsqlite3_sys as ffi;

use crate::error::SqliteFailure;

/// A connection the queue can start and end transactions on.
pub trait SqliteSession {
    /// Runs one or more statements that return no rows.
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure>;

    /// Sets SQLite's busy timeout, so writers outside the queue are waited
    /// for within the time left.
    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure>;

    /// Whether the connection is inside a transaction (`None`: unknown).
    fn in_transaction(&self) -> Option<bool> {
        None
    }

    /// Whether `sql` only reads (`None`: unknown, and the queue decides by
    /// the statement's first word).
    fn is_read_only(&self, _sql: &str) -> Option<bool> {
        None
    }

    /// The connection's main database file as SQLite names it
    /// (`sqlite3_db_filename(db, "main")`, an absolute path): an empty path
    /// for an in-memory or temporary database, `Ok(None)` when the host
    /// cannot tell (the queue then skips its check that the connection and
    /// the queue serve the same database).
    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        Ok(None)
    }

    /// The connection's busy timeout (`PRAGMA busy_timeout`), which the queue
    /// restores when a turn ends; `Ok(None)` when the host cannot tell (it is
    /// then left at the time that was left of the wait).
    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        Ok(None)
    }
}

/// Decides from its first keyword whether a statement only reads: `SELECT`,
/// `VALUES`, `EXPLAIN` and a `PRAGMA` without `=` read; everything else,
/// `WITH` included (it may lead an INSERT), counts as a write.
pub fn looks_read_only(sql: &str) -> bool {
    let mut rest = sql.trim_start();
    // Skip leading comments.
    loop {
        if let Some(after) = rest.strip_prefix("--") {
            rest = after
                .split_once('\n')
                .map(|(_, r)| r)
                .unwrap_or("")
                .trim_start();
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after
                .split_once("*/")
                .map(|(_, r)| r)
                .unwrap_or("")
                .trim_start();
        } else {
            break;
        }
    }
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    match word.as_str() {
        "SELECT" | "VALUES" | "EXPLAIN" => true,
        "PRAGMA" => !rest.contains('='),
        _ => false,
    }
}

fn clamp_millis(timeout: Duration) -> i32 {
    timeout.as_millis().min(i32::MAX as u128) as i32
}

impl SqliteSession for rusqlite::Connection {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        self.execute_batch(sql).map_err(failure_from_rusqlite)
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        self.busy_timeout(timeout).map_err(failure_from_rusqlite)
    }

    fn in_transaction(&self) -> Option<bool> {
        Some(!self.is_autocommit())
    }

    fn is_read_only(&self, sql: &str) -> Option<bool> {
        // SAFETY: the handle stays valid while `self` is borrowed.
        unsafe { RawSqlite::from_handle(self.handle()) }.and_then(|raw| raw.is_read_only(sql))
    }

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        // SAFETY: the handle stays valid while `self` is borrowed.
        match unsafe { RawSqlite::from_handle(self.handle()) } {
            Some(raw) => raw.main_database_file(),
            None => Ok(None),
        }
    }

    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        // Read at every turn's start: the statement is kept prepared in the
        // connection's cache rather than parsed each time.
        self.prepare_cached("PRAGMA busy_timeout")
            .and_then(|mut statement| statement.query_row([], |row| row.get::<_, i64>(0)))
            .map(|ms| Some(Duration::from_millis(ms.max(0) as u64)))
            .map_err(failure_from_rusqlite)
    }
}

/// Turns a rusqlite error into SQLite's code and message.
pub fn failure_from_rusqlite(err: rusqlite::Error) -> SqliteFailure {
    match err {
        rusqlite::Error::SqliteFailure(code, message) => SqliteFailure::new(
            code.extended_code,
            message.unwrap_or_else(|| code.to_string()),
        ),
        other => SqliteFailure::new(ffi::SQLITE_ERROR, other.to_string()),
    }
}

/// A borrowed `sqlite3*` from a C caller.
#[derive(Debug, Clone, Copy)]
pub struct RawSqlite {
    db: *mut ffi::sqlite3,
}

impl RawSqlite {
    /// Wraps a connection handle; `None` for a null pointer.
    ///
    /// # Safety
    /// `db` must be an open connection that stays open, and is not used by
    /// another thread, while the wrapper is in use.
    pub unsafe fn from_handle(db: *mut ffi::sqlite3) -> Option<RawSqlite> {
        if db.is_null() {
            None
        } else {
            Some(RawSqlite { db })
        }
    }

    /// The wrapped handle.
    pub fn handle(&self) -> *mut ffi::sqlite3 {
        self.db
    }

    fn failure(&self, rc: i32) -> SqliteFailure {
        // SAFETY: db is valid per the constructor's contract.
        let message = unsafe {
            let ptr = ffi::sqlite3_errmsg(self.db);
            if ptr.is_null() {
                String::from("unknown error")
            } else {
                CStr::from_ptr(ptr).to_string_lossy().into_owned()
            }
        };
        let code = unsafe { ffi::sqlite3_extended_errcode(self.db) };
        SqliteFailure::new(if code != 0 { code } else { rc }, message)
    }
}

fn c_string(sql: &str) -> Result<CString, SqliteFailure> {
    CString::new(sql).map_err(|_| {
        SqliteFailure::new(
            ffi::SQLITE_MISUSE,
            "the statement contains a NUL byte; pass SQL text without NUL characters",
        )
    })
}

impl SqliteSession for RawSqlite {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        let sql = c_string(sql)?;
        let mut errmsg: *mut libc::c_char = std::ptr::null_mut();
        // SAFETY: valid handle and NUL-terminated SQL; errmsg freed below.
        let rc = unsafe {
            ffi::sqlite3_exec(
                self.db,
                sql.as_ptr(),
                None,
                std::ptr::null_mut(),
                &mut errmsg,
            )
        };
        if rc == ffi::SQLITE_OK {
            return Ok(());
        }
        let message = if errmsg.is_null() {
            None
        } else {
            // SAFETY: sqlite3_exec allocated it with sqlite3_malloc.
            let text = unsafe { CStr::from_ptr(errmsg).to_string_lossy().into_owned() };
            unsafe { ffi::sqlite3_free(errmsg.cast()) };
            Some(text)
        };
        let mut failure = self.failure(rc);
        if let Some(message) = message {
            failure.message = message;
        }
        Err(failure)
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        // SAFETY: valid handle.
        let rc = unsafe { ffi::sqlite3_busy_timeout(self.db, clamp_millis(timeout)) };
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(self.failure(rc))
        }
    }

    fn in_transaction(&self) -> Option<bool> {
        // SAFETY: valid handle.
        Some(unsafe { ffi::sqlite3_get_autocommit(self.db) } == 0)
    }

    fn is_read_only(&self, sql: &str) -> Option<bool> {
        let sql = c_string(sql).ok()?;
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        let mut tail: *const libc::c_char = std::ptr::null();
        // SAFETY: valid handle; the statement is finalized below.
        let rc =
            unsafe { ffi::sqlite3_prepare_v2(self.db, sql.as_ptr(), -1, &mut stmt, &mut tail) };
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            if !stmt.is_null() {
                unsafe { ffi::sqlite3_finalize(stmt) };
            }
            return None;
        }
        // SAFETY: stmt was prepared above; tail points into `sql`.
        let read_only = unsafe { ffi::sqlite3_stmt_readonly(stmt) } != 0;
        let more = unsafe {
            !tail.is_null()
                && !CStr::from_ptr(tail)
                    .to_bytes()
                    .iter()
                    .all(|b| b.is_ascii_whitespace() || *b == b';')
        };
        unsafe { ffi::sqlite3_finalize(stmt) };
        // Several statements: decide by the first only when it writes.
        Some(read_only && !more)
    }

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        // SAFETY: valid handle; the name is a static C string. SQLite returns
        // NULL when there is no "main" (never for an open connection) and ""
        // for an in-memory or temporary database; the text stays valid while
        // the connection is open, and is copied at once.
        let name = unsafe { ffi::sqlite3_db_filename(self.db, c"main".as_ptr()) };
        if name.is_null() {
            return Ok(Some(PathBuf::new()));
        }
        let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
        Ok(Some(PathBuf::from(OsStr::from_bytes(bytes))))
    }

    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        // SAFETY: valid handle and a static statement; finalized below.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.db,
                c"PRAGMA busy_timeout".as_ptr(),
                -1,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            let failure = self.failure(rc);
            if !stmt.is_null() {
                unsafe { ffi::sqlite3_finalize(stmt) };
            }
            return Err(failure);
        }
        // SAFETY: stmt was prepared above.
        let rc = unsafe { ffi::sqlite3_step(stmt) };
        let result = if rc == ffi::SQLITE_ROW {
            let ms = unsafe { ffi::sqlite3_column_int64(stmt, 0) };
            Ok(Some(Duration::from_millis(ms.max(0) as u64)))
        } else {
            Err(self.failure(rc))
        };
        unsafe { ffi::sqlite3_finalize(stmt) };
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_keyword_decides() {
        assert!(looks_read_only("  select 1"));
        assert!(looks_read_only("-- hi\nSELECT 1"));
        assert!(looks_read_only("PRAGMA journal_mode"));
        assert!(!looks_read_only("PRAGMA journal_mode = wal"));
        assert!(!looks_read_only("INSERT INTO t VALUES (1)"));
        assert!(!looks_read_only(
            "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x"
        ));
    }

    #[test]
    fn rusqlite_connection_reports_read_only_statements() {
        let conn = rusqlite::Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t(x)").expect("create");
        assert_eq!(conn.is_read_only("SELECT * FROM t"), Some(true));
        assert_eq!(conn.is_read_only("INSERT INTO t VALUES (1)"), Some(false));
        assert_eq!(conn.in_transaction(), Some(false));
    }
}
