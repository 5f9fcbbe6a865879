//! `wl_queue`: the SQLite write queue of one database.
//!
//! Writers of one SQLite database take turns across processes before
//! `BEGIN IMMEDIATE`: an exclusive `flock()` on `<db>.writer-lock`, with a
//! shared `flock()` on `<db>.writer-queue` while waiting. The queue drives
//! the caller's own `sqlite3*`; it never opens a connection itself.

use std::ffi::c_char;

use libsqlite3_sys as ffi_sqlite;
use writerlock::{BusyKind, RawSqlite, Strategy, Wait, WriterQueue};

use crate::error::{wl_busy_kind, wl_error, wl_result};
use crate::ffi::{
    copy_out, invalid, null_arg, put, put_opt, run, seconds, try_opt_str, try_out, try_ref,
    try_str, value,
};

/// The SQLite connection handle, as `<sqlite3.h>` declares it (skipped
/// when `<sqlite3.h>` was included first). Only ever used behind a pointer.
// The `sqlite3_h` feature is never enabled: cbindgen turns the `cfg` into
// `#if !defined(SQLITE3_H)` (see `[defines]` in cbindgen.toml).
#[allow(non_camel_case_types)]
#[cfg(not(feature = "sqlite3_h"))]
pub struct sqlite3 {
    _opaque: [u8; 0],
}

/// A waiting strategy for `wl_queue_new_with_strategy`.
#[allow(non_camel_case_types)]
pub type wl_strategy = u32;

/// Polling plus the hand-off page in `<db>.writer-queue`: a waiter sleeps on
/// a futex and the releaser wakes the oldest one (the default).
pub const WL_STRATEGY_HANDOFF: wl_strategy = 0;

/// Exponential's driver's protocol alone (the `eZSQLite3DB` queue): polls of
/// 1 to 15 ms and a fixed 30 ms yield; no hand-off page.
pub const WL_STRATEGY_POLL: wl_strategy = 1;

/// A process's handle on one database's write queue.
///
/// Create it with `wl_queue_new`, free it with `wl_queue_free`. The lock
/// files open lazily at the first turn. A handle may be shared by threads:
/// a second thread waits until the first gives the turn back. Two handles
/// for one database exclude each other like two processes. After `fork()`
/// the child's copy never releases the parent's lock and opens its own
/// files.
#[allow(non_camel_case_types)]
pub struct wl_queue {
    queue: WriterQueue,
}

/// The caller's connection, checked for NULL.
fn connection(db: *mut sqlite3) -> Result<RawSqlite, wl_error> {
    // SAFETY: the caller passes an open connection that it does not use from
    // another thread during the call, as documented on each function.
    unsafe { RawSqlite::from_handle(db.cast::<ffi_sqlite::sqlite3>()) }
        .ok_or_else(|| null_arg("db"))
}

/// A wait for a transaction (below 1 s raised to 1 s) or a statement, with
/// the caller's setting name or the default.
fn wait_of(
    kind: BusyKind,
    name: &'static str,
    limit: f64,
    setting: Option<&str>,
) -> Result<Wait, wl_error> {
    let limit = seconds(name, limit)?;
    let wait = match kind {
        BusyKind::Transaction => Wait::transaction(limit),
        BusyKind::Statement => Wait::statement(limit),
    };
    Ok(match setting {
        Some(s) => wait.with_setting(s),
        None => wait,
    })
}

fn new_queue(
    path: *const c_char,
    strategy: Strategy,
    out: *mut *mut wl_queue,
) -> Result<(), wl_error> {
    let out = try_out!(out);
    let path = try_str!(path);
    let queue = Box::new(wl_queue {
        queue: WriterQueue::with_strategy(path, strategy),
    });
    put(out, Box::into_raw(queue));
    Ok(())
}

/// Creates a queue for the SQLite database at `path` (UTF-8; `:memory:` and
/// `""` need no queue and are granted their turn at once). `path` is
/// copied: the caller may free or reuse it as soon as the call returns.
/// Opens nothing yet: the lock files `<path>.writer-lock` and `<path>.writer-queue` open
/// at the first turn, so a missing directory is reported then (`WL_IO`).
///
/// On success `*out` is a new queue the caller owns and frees with
/// `wl_queue_free`; on failure `*out` is NULL.
#[no_mangle]
pub extern "C" fn wl_queue_new(path: *const c_char, out: *mut *mut wl_queue) -> wl_result {
    run("wl_queue_new", || new_queue(path, Strategy::Handoff, out))
}

/// Like `wl_queue_new`, with an explicit waiting strategy
/// (`WL_STRATEGY_HANDOFF` or `WL_STRATEGY_POLL`).
#[no_mangle]
pub extern "C" fn wl_queue_new_with_strategy(
    path: *const c_char,
    strategy: wl_strategy,
    out: *mut *mut wl_queue,
) -> wl_result {
    run("wl_queue_new_with_strategy", || {
        try_out!(out);
        let strategy = match strategy {
            WL_STRATEGY_HANDOFF => Strategy::Handoff,
            WL_STRATEGY_POLL => Strategy::Poll,
            other => {
                return Err(invalid(
                    "strategy",
                    format!("{other} is not WL_STRATEGY_HANDOFF (0) or WL_STRATEGY_POLL (1)"),
                ));
            }
        };
        new_queue(path, strategy, out)
    })
}

/// Frees a queue. A turn it still holds is given back (the transaction on
/// the caller's connection is not ended: end it first). NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_queue_free(queue: *mut wl_queue) {
    value("wl_queue_free", (), || {
        drop(crate::ffi::take_box(queue));
    })
}

/// Waits for the writer turn within `wait_seconds` (values below 1 are
/// raised to 1; the default is `WL_TRANSACTION_WAIT`, 25), sets `db`'s busy
/// timeout to the time left and runs `BEGIN IMMEDIATE` on it.
///
/// `setting` names the setting the limit came from, quoted in the busy
/// message; NULL means `[DatabaseSettings] SQLiteTransactionWait`.
///
/// Returns `WL_BUSY` when the wait ran out, `WL_NOT_STARTED` when `BEGIN
/// IMMEDIATE` failed otherwise, `WL_STATE` when `db` is already in a
/// transaction or this thread already holds the turn, `WL_IO` when a lock
/// file cannot be opened. On any failure the turn is given back and nothing
/// was written. End the transaction with `wl_queue_commit` or
/// `wl_queue_rollback`.
///
/// `db` must be an open connection that no other thread uses during the
/// call.
#[no_mangle]
pub extern "C" fn wl_queue_begin(
    queue: *const wl_queue,
    db: *mut sqlite3,
    wait_seconds: f64,
    setting: *const c_char,
) -> wl_result {
    run("wl_queue_begin", || {
        let queue = try_ref!(queue);
        let conn = connection(db)?;
        let setting = try_opt_str!(setting);
        let wait = wait_of(BusyKind::Transaction, "wait_seconds", wait_seconds, setting)?;
        queue.queue.begin(&conn, &wait)?;
        Ok(())
    })
}

/// Runs `COMMIT` on `db` and gives the turn back. `WL_STATE` when this queue
/// holds no turn (nothing is run). If SQLite refuses the COMMIT
/// (`WL_SQLITE`), the transaction and the turn stay until it ends.
#[no_mangle]
pub extern "C" fn wl_queue_commit(queue: *const wl_queue, db: *mut sqlite3) -> wl_result {
    run("wl_queue_commit", || {
        let queue = try_ref!(queue);
        let conn = connection(db)?;
        queue.queue.commit(&conn)?;
        Ok(())
    })
}

/// Runs `ROLLBACK` on `db` and gives the turn back. `WL_STATE` when this
/// queue holds no turn (nothing is run).
#[no_mangle]
pub extern "C" fn wl_queue_rollback(queue: *const wl_queue, db: *mut sqlite3) -> wl_result {
    run("wl_queue_rollback", || {
        let queue = try_ref!(queue);
        let conn = connection(db)?;
        queue.queue.rollback(&conn)?;
        Ok(())
    })
}

/// Runs one SQL statement (or script) on `db`. A write outside a
/// transaction takes its turn within `busy_timeout_seconds` (the default is
/// `WL_BUSY_TIMEOUT`, 5) and retries a lock SQLite reports within the time
/// left; reads, and statements inside an open transaction, run at once.
///
/// `setting` names the limit's setting in the busy message; NULL means
/// `[DatabaseSettings] SQLiteBusyTimeout`. Returns `WL_BUSY` when the wait
/// ran out (the statement was not run), `WL_SQLITE` when SQLite failed it.
#[no_mangle]
pub extern "C" fn wl_queue_exec(
    queue: *const wl_queue,
    db: *mut sqlite3,
    sql: *const c_char,
    busy_timeout_seconds: f64,
    setting: *const c_char,
) -> wl_result {
    run("wl_queue_exec", || {
        let queue = try_ref!(queue);
        let conn = connection(db)?;
        let sql = try_str!(sql);
        let setting = try_opt_str!(setting);
        let wait = wait_of(
            BusyKind::Statement,
            "busy_timeout_seconds",
            busy_timeout_seconds,
            setting,
        )?;
        queue.queue.execute(&conn, sql, &wait)?;
        Ok(())
    })
}

/// Takes the writer turn without starting a transaction, for hosts that run
/// `BEGIN` themselves; give it back with `wl_queue_release` when their
/// transaction ends.
///
/// `kind` is `WL_BUSY_TRANSACTION` (the wait is raised to at least 1 s) or
/// `WL_BUSY_STATEMENT`, and picks the busy message; `setting` as for
/// `wl_queue_begin` / `wl_queue_exec` (NULL: the default of the kind).
/// `waited_out`, if not NULL, receives how long it waited in seconds.
#[no_mangle]
pub extern "C" fn wl_queue_take(
    queue: *const wl_queue,
    kind: u32,
    wait_seconds: f64,
    setting: *const c_char,
    waited_out: *mut f64,
) -> wl_result {
    run("wl_queue_take", || {
        put_opt(waited_out, 0.0);
        let queue = try_ref!(queue);
        let kind = match kind {
            k if k == wl_busy_kind::WL_BUSY_TRANSACTION as u32 => BusyKind::Transaction,
            k if k == wl_busy_kind::WL_BUSY_STATEMENT as u32 => BusyKind::Statement,
            other => {
                return Err(invalid(
                    "kind",
                    format!("{other} is not WL_BUSY_TRANSACTION (1) or WL_BUSY_STATEMENT (2)"),
                ))
            }
        };
        let setting = try_opt_str!(setting);
        let wait = wait_of(kind, "wait_seconds", wait_seconds, setting)?;
        let waited = queue.queue.take(kind, &wait)?;
        put_opt(waited_out, waited.as_secs_f64());
        Ok(())
    })
}

/// Gives back a turn taken with `wl_queue_take` (or `wl_queue_begin`).
/// `released_out`, if not NULL, receives false when this queue held no turn
/// (which is not an error).
#[no_mangle]
pub extern "C" fn wl_queue_release(queue: *const wl_queue, released_out: *mut bool) -> wl_result {
    run("wl_queue_release", || {
        put_opt(released_out, false);
        let queue = try_ref!(queue);
        let released = queue.queue.release()?;
        put_opt(released_out, released);
        Ok(())
    })
}

/// Whether this queue holds the writer turn in this process (false for
/// NULL).
#[no_mangle]
pub extern "C" fn wl_queue_holding(queue: *const wl_queue) -> bool {
    value("wl_queue_holding", false, || {
        crate::ffi::deref("queue", queue).is_ok_and(|q| q.queue.holding())
    })
}

/// How long the last turn (a begin, a queued statement or a take) waited
/// before it was granted, in seconds (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_queue_last_wait(queue: *const wl_queue) -> f64 {
    value("wl_queue_last_wait", 0.0, || {
        crate::ffi::deref("queue", queue).map_or(0.0, |q| q.queue.last_wait().as_secs_f64())
    })
}

/// Copies the database path this queue serves into `buf` (`len` bytes,
/// always NUL-terminated when `len > 0`) and returns its full length (0 for
/// NULL).
#[no_mangle]
pub extern "C" fn wl_queue_database(queue: *const wl_queue, buf: *mut c_char, len: usize) -> usize {
    value("wl_queue_database", 0, || {
        let path = crate::ffi::deref("queue", queue)
            .map(|q| q.queue.database().to_string_lossy().into_owned())
            .unwrap_or_default();
        copy_out(&path, buf, len)
    })
}
