//! Result codes and error details: `wl_result`, `wl_error` and the calling
//! thread's last error.
//!
//! Every function that returns a `wl_result` records, for the calling
//! thread, the details of its failure, and clears them when it returns
//! `WL_OK` (like `errno`, but reset on success). Read them at once with
//! `wl_last_error_code` / `wl_last_error_message`, or keep a copy with
//! `wl_last_error` (an owned `wl_error`, freed with `wl_error_free`). Being
//! per thread, the last error is never overwritten by another thread's call.

use std::cell::RefCell;
use std::ffi::c_char;

use writerlock::pg;
use writerlock::BusyKind;

use crate::ffi::{copy_out, value};

/// The outcome of a `wl_` function. The numeric values are part of the ABI:
/// they are never renumbered, and new codes are only added.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum wl_result {
    /// Success.
    WL_OK = 0,
    /// A wait limit ran out before the writer got its turn; nothing was
    /// written. The error carries the busy fields (`wl_error_busy_*`).
    WL_BUSY = 1,
    /// `BEGIN IMMEDIATE` failed for a reason other than a busy database
    /// (`the transaction could not start: <SQLite's message>; nothing was
    /// written`); the turn was given back.
    WL_NOT_STARTED = 2,
    /// SQLite refused a statement (COMMIT, ROLLBACK or a queued statement);
    /// `wl_error_sqlite_code` gives SQLite's code.
    WL_SQLITE = 3,
    /// A lock file beside the database could not be opened or locked; the
    /// message names the file and `wl_error_os_error` gives `errno`.
    WL_IO = 4,
    /// An argument was unusable: a NULL pointer, text that is not UTF-8, a
    /// negative or non-finite number of seconds, an index out of range, a
    /// Postgres parameter count that does not match the statement, settings
    /// that cannot work.
    WL_INVALID_ARGUMENT = 5,
    /// The call does not fit the current state: the turn is already held,
    /// no turn is held (commit without begin), the connection is already in a
    /// transaction.
    WL_STATE = 6,
    /// writerlock panicked (a bug); the panic was stopped at the boundary.
    WL_PANIC = 7,
    /// The wait for the writer turn was interrupted before the turn was
    /// taken; nothing was written.
    WL_INTERRUPTED = 8,
    /// The connection's main database is not the file the queue serves (a
    /// typo, or a relative path resolved elsewhere): its writers would not
    /// exclude the others, so nothing was run. The message names both files;
    /// make the queue with `wl_queue_for_connection`. Also a connection whose
    /// open database file was replaced or removed (a restore by rename):
    /// reopen the connection.
    WL_WRONG_DATABASE = 9,
    /// No Postgres session could be opened (an unreachable server, a refused
    /// login, an address that cannot be read). The message never contains
    /// the password.
    WL_PG_CONNECT = 100,
    /// A startup setting did not take effect (a connection pooler dropped
    /// the startup options); the message names it.
    WL_PG_SETTING = 101,
    /// The ledger writer lock was not granted in all the waits (SQLSTATE
    /// `55P03`): `the ledger writer lock was not granted in 3 waits of 10
    /// seconds`.
    WL_PG_NOT_GRANTED = 102,
    /// The writer is below the writer floor (SQLSTATE `LW001`):
    /// `ledger writer version 0 is below version 1, the oldest the shared
    /// database allows; update its code and restart it`. The error carries
    /// the version and floor (`wl_error_refused_version`/`_floor`).
    WL_PG_REFUSED = 103,
    /// The server reported an error for a statement; `wl_error_sqlstate`
    /// gives its SQLSTATE. An open transaction is aborted.
    WL_PG_DATABASE = 104,
    /// The server ended the session (terminated, idle limit); take a new
    /// connection.
    WL_PG_SESSION_ENDED = 105,
    /// The connection is closed or was lost; take a new one.
    WL_PG_CLOSED = 106,
    /// COMMIT could only roll back, because a statement in the transaction
    /// failed; nothing was committed.
    WL_PG_ROLLED_BACK = 107,
    /// Any other failure of the Postgres driver.
    WL_PG_DRIVER = 108,
    /// The connection was lost while COMMIT was in flight (SQLSTATE `08007`):
    /// the transaction may or may not have been committed. Check whether the
    /// write is in the database before retrying it.
    WL_PG_OUTCOME_UNKNOWN = 109,
}

impl wl_result {
    /// The code's name, such as `WL_BUSY`.
    pub fn name(self) -> &'static str {
        name_c(self).to_str().unwrap_or("WL_UNKNOWN")
    }
}

/// Every code.
fn all_codes() -> [wl_result; 20] {
    [
        wl_result::WL_OK,
        wl_result::WL_BUSY,
        wl_result::WL_NOT_STARTED,
        wl_result::WL_SQLITE,
        wl_result::WL_IO,
        wl_result::WL_INVALID_ARGUMENT,
        wl_result::WL_STATE,
        wl_result::WL_PANIC,
        wl_result::WL_INTERRUPTED,
        wl_result::WL_WRONG_DATABASE,
        wl_result::WL_PG_CONNECT,
        wl_result::WL_PG_SETTING,
        wl_result::WL_PG_NOT_GRANTED,
        wl_result::WL_PG_REFUSED,
        wl_result::WL_PG_DATABASE,
        wl_result::WL_PG_SESSION_ENDED,
        wl_result::WL_PG_CLOSED,
        wl_result::WL_PG_ROLLED_BACK,
        wl_result::WL_PG_DRIVER,
        wl_result::WL_PG_OUTCOME_UNKNOWN,
    ]
}

/// What kind of wait ran out, in a `WL_BUSY` error.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum wl_busy_kind {
    /// The error is not a busy error.
    WL_BUSY_NONE = 0,
    /// A transaction waited for its turn (`wl_queue_begin`, or
    /// `wl_queue_take` with this kind).
    WL_BUSY_TRANSACTION = 1,
    /// A single write statement waited for its turn (`wl_queue_exec`, or
    /// `wl_queue_take` with this kind).
    WL_BUSY_STATEMENT = 2,
}

#[derive(Debug, Clone)]
struct BusyDetails {
    kind: wl_busy_kind,
    waited: f64,
    limit: f64,
    setting: String,
    holder_pid: u32,
}

/// The details of a failure: its code, its message and typed fields.
///
/// Obtained from `wl_last_error` (owned by the caller, freed with
/// `wl_error_free`). Immutable: it may be read from any thread.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone)]
pub struct wl_error {
    code: wl_result,
    message: String,
    sqlite_code: i32,
    os_error: i32,
    details: Option<Box<Details>>,
}

/// The fields only some errors carry.
#[derive(Debug, Clone, Default)]
struct Details {
    busy: Option<BusyDetails>,
    sqlstate: Option<String>,
    refused: Option<(i64, i64)>,
}

impl wl_error {
    /// An error with a code and a message and no other fields.
    pub(crate) fn new(code: wl_result, message: impl Into<String>) -> wl_error {
        wl_error {
            code,
            message: message.into(),
            sqlite_code: 0,
            os_error: 0,
            details: None,
        }
    }

    fn details_mut(&mut self) -> &mut Details {
        self.details.get_or_insert_with(Box::default)
    }

    fn busy(&self) -> Option<&BusyDetails> {
        self.details.as_ref()?.busy.as_ref()
    }

    fn sqlstate(&self) -> Option<&str> {
        self.details.as_ref()?.sqlstate.as_deref()
    }

    fn refused(&self) -> Option<(i64, i64)> {
        self.details.as_ref()?.refused
    }

    /// Its code.
    pub fn code(&self) -> wl_result {
        self.code
    }

    /// Its message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The C code of each kind of queue error: the one table the C bindings map the SQLite
/// queue's errors through.
fn queue_code(kind: writerlock::ErrorKind) -> wl_result {
    use writerlock::ErrorKind as K;
    match kind {
        K::Busy => wl_result::WL_BUSY,
        K::NotStarted => wl_result::WL_NOT_STARTED,
        K::Sqlite => wl_result::WL_SQLITE,
        K::LockFile | K::LockFileAccess | K::UnsafeLockFile | K::Flock => wl_result::WL_IO,
        K::AlreadyHolding | K::HeldThroughAnotherHandle | K::NotHolding | K::InTransaction => {
            wl_result::WL_STATE
        }
        K::InvalidArgument => wl_result::WL_INVALID_ARGUMENT,
        K::WrongDatabase | K::DatabaseReplaced => wl_result::WL_WRONG_DATABASE,
        K::Interrupted => wl_result::WL_INTERRUPTED,
    }
}

/// The C code of each kind of Postgres error: the one table the C bindings map the writer
/// session's errors through. `WL_PG_DRIVER` is for the driver's own failures only.
fn pg_code(kind: pg::ErrorKind) -> wl_result {
    use pg::ErrorKind as K;
    match kind {
        K::InvalidUrl | K::Connect | K::StartupOptionsRejected | K::ConnectTimedOut => {
            wl_result::WL_PG_CONNECT
        }
        K::SettingNotInEffect => wl_result::WL_PG_SETTING,
        K::LockNotGranted => wl_result::WL_PG_NOT_GRANTED,
        K::Refused => wl_result::WL_PG_REFUSED,
        K::Database => wl_result::WL_PG_DATABASE,
        K::SessionEnded => wl_result::WL_PG_SESSION_ENDED,
        K::Closed => wl_result::WL_PG_CLOSED,
        K::RolledBack => wl_result::WL_PG_ROLLED_BACK,
        K::CommitOutcomeUnknown => wl_result::WL_PG_OUTCOME_UNKNOWN,
        K::AlreadyInTransaction | K::WriteEnded | K::Forked => wl_result::WL_STATE,
        K::ParameterCount
        | K::Parameter
        | K::UnsupportedType
        | K::Unsendable
        | K::ForeignConnection
        | K::LimitOutOfRange
        | K::RequiredAboveVersion
        | K::VersionOutOfRange => wl_result::WL_INVALID_ARGUMENT,
        K::Driver => wl_result::WL_PG_DRIVER,
    }
}

impl From<writerlock::Error> for wl_error {
    fn from(err: writerlock::Error) -> wl_error {
        use writerlock::Error as E;
        let code = queue_code(err.kind());
        let mut out = wl_error::new(code, err.to_string());
        out.sqlite_code = err.sqlite_error_code().unwrap_or(0);
        if let E::LockFile { source, .. }
        | E::LockFileAccess { source, .. }
        | E::Flock { source, .. } = &err
        {
            out.os_error = source.raw_os_error().unwrap_or(0);
        }
        if let Some(busy) = err.busy() {
            out.details_mut().busy = Some(BusyDetails {
                kind: match busy.kind {
                    BusyKind::Transaction => wl_busy_kind::WL_BUSY_TRANSACTION,
                    BusyKind::Statement => wl_busy_kind::WL_BUSY_STATEMENT,
                },
                waited: busy.waited.as_secs_f64(),
                limit: busy.limit.as_secs_f64(),
                setting: busy.setting.clone(),
                holder_pid: busy.holder_pid.unwrap_or(0),
            });
        }
        out
    }
}

impl From<pg::Error> for wl_error {
    fn from(err: pg::Error) -> wl_error {
        use pg::Error as E;
        let code = pg_code(err.kind());
        let mut out = wl_error::new(code, err.to_string());
        if let Some(code) = err.code() {
            out.details_mut().sqlstate = Some(code.code().to_string());
        }
        if let E::Refused { version, floor } = &err {
            out.details_mut().refused = Some((*version, *floor));
        }
        out
    }
}

thread_local! {
    static LAST: RefCell<Option<wl_error>> = const { RefCell::new(None) };
}

/// Records (or, with `None`, clears) the calling thread's last error.
pub(crate) fn set_last(err: Option<wl_error>) {
    let _ = LAST.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = err;
        }
    });
}

/// A copy of the calling thread's last error.
pub(crate) fn last() -> Option<wl_error> {
    LAST.try_with(|slot| slot.try_borrow().ok().and_then(|e| e.clone()))
        .ok()
        .flatten()
}

fn err_ref<'a>(err: *const wl_error) -> Option<&'a wl_error> {
    // SAFETY: the caller passes NULL or a live wl_error from wl_last_error.
    unsafe { err.as_ref() }
}

/// A copy of the calling thread's last error, or NULL when the thread's
/// last `wl_result`-returning call succeeded (or none was made).
///
/// Ownership: the caller owns the returned object and frees it with
/// `wl_error_free`. It stays valid after later calls.
#[no_mangle]
pub extern "C" fn wl_last_error() -> *mut wl_error {
    value("wl_last_error", std::ptr::null_mut(), || {
        last().map_or(std::ptr::null_mut(), |e| Box::into_raw(Box::new(e)))
    })
}

/// The code of the calling thread's last error (`WL_OK` when its last
/// `wl_result`-returning call succeeded).
#[no_mangle]
pub extern "C" fn wl_last_error_code() -> wl_result {
    value("wl_last_error_code", wl_result::WL_PANIC, || {
        last().map_or(wl_result::WL_OK, |e| e.code)
    })
}

/// Copies the message of the calling thread's last error into `buf` (`len`
/// bytes, always NUL-terminated when `len > 0`, truncated if short) and
/// returns its full length in bytes without the NUL (0 when there is no
/// error). `buf` may be NULL when `len` is 0, to ask for the length.
#[no_mangle]
pub extern "C" fn wl_last_error_message(buf: *mut c_char, len: usize) -> usize {
    value("wl_last_error_message", 0, || {
        let message = last().map(|e| e.message).unwrap_or_default();
        copy_out(&message, buf, len)
    })
}

/// Frees an error from `wl_last_error`. NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_error_free(err: *mut wl_error) {
    value("wl_error_free", (), || {
        drop(crate::ffi::take_box(err));
    })
}

/// The error's code (`WL_OK` for NULL).
#[no_mangle]
pub extern "C" fn wl_error_code(err: *const wl_error) -> wl_result {
    value("wl_error_code", wl_result::WL_PANIC, || {
        err_ref(err).map_or(wl_result::WL_OK, |e| e.code)
    })
}

/// Copies the error's message into `buf` (`len` bytes, always
/// NUL-terminated when `len > 0`, truncated if short) and returns its full
/// length in bytes without the NUL (0 for NULL). Call with `len` 0 to size
/// the buffer: allocate the result plus one.
#[no_mangle]
pub extern "C" fn wl_error_message(err: *const wl_error, buf: *mut c_char, len: usize) -> usize {
    value("wl_error_message", 0, || {
        copy_out(err_ref(err).map_or("", |e| e.message.as_str()), buf, len)
    })
}

/// Which wait ran out, for a `WL_BUSY` error; `WL_BUSY_NONE` otherwise.
#[no_mangle]
pub extern "C" fn wl_error_busy_kind(err: *const wl_error) -> wl_busy_kind {
    value("wl_error_busy_kind", wl_busy_kind::WL_BUSY_NONE, || {
        err_ref(err)
            .and_then(|e| e.busy())
            .map_or(wl_busy_kind::WL_BUSY_NONE, |b| b.kind)
    })
}

/// How long the writer waited, in seconds, for a `WL_BUSY` error; 0
/// otherwise.
#[no_mangle]
pub extern "C" fn wl_error_busy_waited(err: *const wl_error) -> f64 {
    value("wl_error_busy_waited", 0.0, || {
        err_ref(err)
            .and_then(|e| e.busy())
            .map_or(0.0, |b| b.waited)
    })
}

/// The wait limit it was given, in seconds, for a `WL_BUSY` error; 0
/// otherwise.
#[no_mangle]
pub extern "C" fn wl_error_busy_limit(err: *const wl_error) -> f64 {
    value("wl_error_busy_limit", 0.0, || {
        err_ref(err).and_then(|e| e.busy()).map_or(0.0, |b| b.limit)
    })
}

/// Copies the name of the setting the limit came from (quoted in the
/// message, such as `[DatabaseSettings] SQLiteTransactionWait`) into `buf`,
/// like `wl_error_message`; empty when the error is not a busy error.
#[no_mangle]
pub extern "C" fn wl_error_busy_setting(
    err: *const wl_error,
    buf: *mut c_char,
    len: usize,
) -> usize {
    value("wl_error_busy_setting", 0, || {
        let setting = err_ref(err)
            .and_then(|e| e.busy())
            .map_or("", |b| b.setting.as_str());
        copy_out(setting, buf, len)
    })
}

/// The pid of the process that held the writer lock when the wait gave up,
/// where `/proc/locks` shows it; 0 when unknown or not a busy error.
#[no_mangle]
pub extern "C" fn wl_error_busy_holder_pid(err: *const wl_error) -> u32 {
    value("wl_error_busy_holder_pid", 0, || {
        err_ref(err)
            .and_then(|e| e.busy())
            .map_or(0, |b| b.holder_pid)
    })
}

/// SQLite's (extended) result code where SQLite reported the failure (5,
/// `SQLITE_BUSY`, for a busy error); 0 otherwise.
#[no_mangle]
pub extern "C" fn wl_error_sqlite_code(err: *const wl_error) -> i32 {
    value("wl_error_sqlite_code", 0, || {
        err_ref(err).map_or(0, |e| e.sqlite_code)
    })
}

/// The operating system's error number (`errno`) for a `WL_IO` error; 0
/// otherwise.
#[no_mangle]
pub extern "C" fn wl_error_os_error(err: *const wl_error) -> i32 {
    value("wl_error_os_error", 0, || {
        err_ref(err).map_or(0, |e| e.os_error)
    })
}

/// Copies the Postgres SQLSTATE (such as `LW001` for a refusal, `55P03`
/// when the writer lock was not granted, the server's code for a database
/// error) into `buf`, like `wl_error_message`; empty when there is none.
#[no_mangle]
pub extern "C" fn wl_error_sqlstate(err: *const wl_error, buf: *mut c_char, len: usize) -> usize {
    value("wl_error_sqlstate", 0, || {
        let state = err_ref(err).and_then(|e| e.sqlstate()).unwrap_or("");
        copy_out(state, buf, len)
    })
}

/// The refused writer's version for a `WL_PG_REFUSED` error; -1 otherwise.
#[no_mangle]
pub extern "C" fn wl_error_refused_version(err: *const wl_error) -> i64 {
    value("wl_error_refused_version", -1, || {
        err_ref(err).and_then(|e| e.refused()).map_or(-1, |r| r.0)
    })
}

/// The stored writer floor for a `WL_PG_REFUSED` error; -1 otherwise.
#[no_mangle]
pub extern "C" fn wl_error_refused_floor(err: *const wl_error) -> i64 {
    value("wl_error_refused_floor", -1, || {
        err_ref(err).and_then(|e| e.refused()).map_or(-1, |r| r.1)
    })
}

/// The name of a result code, such as `"WL_BUSY"` (a static string, never
/// freed); `"WL_UNKNOWN"` for a value that is not a code.
#[no_mangle]
pub extern "C" fn wl_result_name(code: u32) -> *const c_char {
    value("wl_result_name", c"WL_UNKNOWN".as_ptr(), || {
        let known = all_codes().into_iter().find(|c| *c as u32 == code);
        known.map_or(c"WL_UNKNOWN".as_ptr(), |c| name_c(c).as_ptr())
    })
}

fn name_c(code: wl_result) -> &'static std::ffi::CStr {
    match code {
        wl_result::WL_OK => c"WL_OK",
        wl_result::WL_BUSY => c"WL_BUSY",
        wl_result::WL_NOT_STARTED => c"WL_NOT_STARTED",
        wl_result::WL_SQLITE => c"WL_SQLITE",
        wl_result::WL_IO => c"WL_IO",
        wl_result::WL_INVALID_ARGUMENT => c"WL_INVALID_ARGUMENT",
        wl_result::WL_STATE => c"WL_STATE",
        wl_result::WL_PANIC => c"WL_PANIC",
        wl_result::WL_INTERRUPTED => c"WL_INTERRUPTED",
        wl_result::WL_WRONG_DATABASE => c"WL_WRONG_DATABASE",
        wl_result::WL_PG_CONNECT => c"WL_PG_CONNECT",
        wl_result::WL_PG_SETTING => c"WL_PG_SETTING",
        wl_result::WL_PG_NOT_GRANTED => c"WL_PG_NOT_GRANTED",
        wl_result::WL_PG_REFUSED => c"WL_PG_REFUSED",
        wl_result::WL_PG_DATABASE => c"WL_PG_DATABASE",
        wl_result::WL_PG_SESSION_ENDED => c"WL_PG_SESSION_ENDED",
        wl_result::WL_PG_CLOSED => c"WL_PG_CLOSED",
        wl_result::WL_PG_ROLLED_BACK => c"WL_PG_ROLLED_BACK",
        wl_result::WL_PG_DRIVER => c"WL_PG_DRIVER",
        wl_result::WL_PG_OUTCOME_UNKNOWN => c"WL_PG_OUTCOME_UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_queue_kind_has_its_own_code() {
        for kind in writerlock::ErrorKind::ALL {
            let code = queue_code(*kind);
            assert!((1..100).contains(&(code as u32)), "{kind:?} -> {code:?}");
            assert_ne!(code, wl_result::WL_PANIC, "{kind:?}");
        }
    }

    #[test]
    fn every_pg_kind_but_the_drivers_has_a_specific_code() {
        for kind in pg::ErrorKind::ALL {
            let code = pg_code(*kind);
            assert_ne!(code, wl_result::WL_OK, "{kind:?}");
            assert_ne!(code, wl_result::WL_PANIC, "{kind:?}");
            assert_eq!(
                code == wl_result::WL_PG_DRIVER,
                *kind == pg::ErrorKind::Driver,
                "{kind:?} -> {code:?}"
            );
        }
    }

    #[test]
    fn codes_are_stable() {
        let expected = [
            (wl_result::WL_OK, 0),
            (wl_result::WL_BUSY, 1),
            (wl_result::WL_NOT_STARTED, 2),
            (wl_result::WL_SQLITE, 3),
            (wl_result::WL_IO, 4),
            (wl_result::WL_INVALID_ARGUMENT, 5),
            (wl_result::WL_STATE, 6),
            (wl_result::WL_PANIC, 7),
            (wl_result::WL_INTERRUPTED, 8),
            (wl_result::WL_WRONG_DATABASE, 9),
            (wl_result::WL_PG_CONNECT, 100),
            (wl_result::WL_PG_SETTING, 101),
            (wl_result::WL_PG_NOT_GRANTED, 102),
            (wl_result::WL_PG_REFUSED, 103),
            (wl_result::WL_PG_DATABASE, 104),
            (wl_result::WL_PG_SESSION_ENDED, 105),
            (wl_result::WL_PG_CLOSED, 106),
            (wl_result::WL_PG_ROLLED_BACK, 107),
            (wl_result::WL_PG_DRIVER, 108),
            (wl_result::WL_PG_OUTCOME_UNKNOWN, 109),
        ];
        for (code, number) in expected {
            assert_eq!(code as u32, number);
            let name = unsafe { std::ffi::CStr::from_ptr(wl_result_name(number)) };
            assert_eq!(name.to_str().ok(), Some(code.name()));
        }
        assert_eq!(expected.len(), all_codes().len());
    }

    #[test]
    fn busy_fields_survive_conversion() {
        let err = wl_error::from(writerlock::Error::Busy(writerlock::Busy {
            kind: BusyKind::Transaction,
            waited: Duration::from_millis(1010),
            limit: Duration::from_secs(1),
            setting: "S".into(),
            holder_pid: Some(9),
            outside_pid: None,
        }));
        assert_eq!(err.code, wl_result::WL_BUSY);
        assert_eq!(wl_error_busy_holder_pid(&err), 9);
        assert_eq!(wl_error_busy_limit(&err), 1.0);
        assert_eq!(wl_error_sqlite_code(&err), 5);
        assert_eq!(wl_error_busy_kind(&err), wl_busy_kind::WL_BUSY_TRANSACTION);
    }

    #[test]
    fn refusal_keeps_sqlstate_and_fields() {
        let err = wl_error::from(pg::Error::Refused {
            version: 0,
            floor: 1,
        });
        assert_eq!(err.code, wl_result::WL_PG_REFUSED);
        assert_eq!(err.sqlstate(), Some("LW001"));
        assert_eq!(
            (wl_error_refused_version(&err), wl_error_refused_floor(&err)),
            (0, 1)
        );
    }
}
