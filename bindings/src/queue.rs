//! `wl_queue`: the SQLite write queue of one database.
//!
//! Writers of one SQLite database take turns across processes before
//! `BEGIN IMMEDIATE`: an exclusive `flock()` on `<db>.writer-lock`, with a
//! shared `flock()` on `<db>.writer-queue` while waiting. The queue drives
//! the caller's own `sqlite3*`; it never opens a connection itself.

use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use libsqlite3_sys as ffi_sqlite;
use writerlock::wait::Interrupt;
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
    /// Set by `wl_queue_interrupt` (from a signal handler or another
    /// thread); read by the waits' interrupt check.
    interrupt: Arc<AtomicBool>,
}

impl wl_queue {
    fn new(queue: WriterQueue) -> wl_queue {
        wl_queue {
            queue,
            interrupt: Arc::new(AtomicBool::new(false)),
        }
    }

    /// `wait` ending early once `wl_queue_interrupt` sets the flag.
    fn interruptible(&self, wait: Wait) -> Wait {
        let flag = Arc::clone(&self.interrupt);
        wait.with_interrupt(Interrupt::new(move || flag.load(Ordering::Acquire)))
    }

    /// Clears the flag a wait ended on, so the next wait waits again.
    fn after<T>(&self, result: writerlock::Result<T>) -> writerlock::Result<T> {
        if let Err(writerlock::Error::Interrupted { .. }) = &result {
            self.interrupt.store(false, Ordering::Release);
        }
        result
    }
}

/// The caller's connection, checked for NULL.
fn connection(db: *mut sqlite3) -> Result<RawSqlite, wl_error> {
    // SAFETY: the caller passes an open connection that it does not use from
    // another thread during the call, as documented on each function.
    unsafe { RawSqlite::from_handle(db.cast::<ffi_sqlite::sqlite3>()) }
        .ok_or_else(|| null_arg("db"))
}

/// A wait for a transaction (below 1 s raised to 1 s) or a statement, with
/// the caller's setting name, or by default the argument the limit came
/// from (`wait_seconds of wl_queue_begin`): a C program has no
/// `[DatabaseSettings]`, so its busy message names what its author wrote.
fn wait_of(
    kind: BusyKind,
    function: &'static str,
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
        None => wait.with_setting(format!("{name} of {function}")),
    })
}

fn new_queue(
    path: *const c_char,
    strategy: Strategy,
    out: *mut *mut wl_queue,
) -> Result<(), wl_error> {
    let out = try_out!(out);
    let path = try_str!(path);
    let queue = Box::new(wl_queue::new(WriterQueue::with_strategy(path, strategy)));
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

/// Creates a queue for `db`'s own main database file, as SQLite names it
/// (`sqlite3_db_filename(db, "main")`), so the path is never typed twice.
/// `db` is only asked for its file name: it is not kept, and the queue may
/// serve any connection to the same file.
///
/// On success `*out` is a new queue the caller owns and frees with
/// `wl_queue_free`; on failure `*out` is NULL (`WL_INVALID_ARGUMENT` when
/// `db` is NULL). An in-memory or temporary database has no file and no
/// other writers: its queue grants the turn at once.
#[no_mangle]
pub extern "C" fn wl_queue_for_connection(db: *mut sqlite3, out: *mut *mut wl_queue) -> wl_result {
    run("wl_queue_for_connection", || {
        let out = try_out!(out);
        let conn = connection(db)?;
        let queue = WriterQueue::for_connection(&conn)?;
        put(out, Box::into_raw(Box::new(wl_queue::new(queue))));
        Ok(())
    })
}

/// Interrupts the waits for the writer turn running on `queue`: each one
/// returns `WL_INTERRUPTED` within 10 ms (`the wait for the writer turn was
/// interrupted after 1.2 s; nothing was written`), without the turn and with
/// nothing written or begun on the connection.
///
/// Async-signal-safe: it only sets an atomic flag, so a `SIGINT` or `SIGTERM`
/// handler may call it, as may any other thread. The flag stays set until a
/// wait ends on it, so a signal that arrives just before a wait starts still
/// ends that wait; a turn that is free is granted all the same, since
/// nothing waits for it. `wl_queue_clear_interrupt` withdraws a request that
/// no wait took. NULL is ignored.
// A plain dereference rather than `ffi::deref`, whose NULL error allocates:
// nothing that allocates may run in a signal handler.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
#[no_mangle]
pub extern "C" fn wl_queue_interrupt(queue: *const wl_queue) {
    // No `value()` boundary: nothing here can panic, and a signal handler
    // must not touch the thread's last-error slot.
    // SAFETY: the caller passes NULL or a live queue from wl_queue_new.
    if let Some(queue) = unsafe { queue.as_ref() } {
        queue.interrupt.store(true, Ordering::Release);
    }
}

/// Withdraws an interrupt request that no wait has taken yet (see
/// `wl_queue_interrupt`). Async-signal-safe. NULL is ignored.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
#[no_mangle]
pub extern "C" fn wl_queue_clear_interrupt(queue: *const wl_queue) {
    // SAFETY: the caller passes NULL or a live queue from wl_queue_new.
    if let Some(queue) = unsafe { queue.as_ref() } {
        queue.interrupt.store(false, Ordering::Release);
    }
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
/// message; NULL names this argument (`wait_seconds of wl_queue_begin`).
/// Exponential's driver passes `WL_TRANSACTION_SETTING`.
///
/// Returns `WL_BUSY` when the wait ran out, `WL_INTERRUPTED` when
/// `wl_queue_interrupt` ended it, `WL_NOT_STARTED` when `BEGIN IMMEDIATE`
/// failed otherwise, `WL_STATE` when `db` is already in a transaction or
/// this thread already holds the turn, `WL_WRONG_DATABASE` when `db` is a
/// connection to another database file, `WL_IO` when a lock file cannot be
/// opened. `db`'s busy timeout is put back as it was when the transaction
/// ends (and on failure). On any failure the turn is given back and nothing
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
        let wait = wait_of(
            BusyKind::Transaction,
            "wl_queue_begin",
            "wait_seconds",
            wait_seconds,
            setting,
        )?;
        queue.after(queue.queue.begin(&conn, &queue.interruptible(wait)))?;
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
/// `setting` names the limit's setting in the busy message; NULL names this
/// argument (`busy_timeout_seconds of wl_queue_exec`). Returns `WL_BUSY` when the wait
/// ran out (the statement was not run), `WL_INTERRUPTED` when
/// `wl_queue_interrupt` ended the wait, `WL_WRONG_DATABASE` when `db` is a
/// connection to another database file, `WL_SQLITE` when SQLite failed it.
/// `db`'s busy timeout is put back as it was.
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
            "wl_queue_exec",
            "busy_timeout_seconds",
            busy_timeout_seconds,
            setting,
        )?;
        queue.after(queue.queue.execute(&conn, sql, &queue.interruptible(wait)))?;
        Ok(())
    })
}

/// Takes the writer turn without starting a transaction, for hosts that run
/// `BEGIN` themselves; give it back with `wl_queue_release` when their
/// transaction ends.
///
/// `kind` is `WL_BUSY_TRANSACTION` (the wait is raised to at least 1 s) or
/// `WL_BUSY_STATEMENT`, and picks the busy message; `setting` as for
/// `wl_queue_begin` / `wl_queue_exec` (NULL: `wait_seconds of
/// wl_queue_take`).
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
        let wait = wait_of(kind, "wl_queue_take", "wait_seconds", wait_seconds, setting)?;
        let waited = queue.after(queue.queue.take(kind, &queue.interruptible(wait)))?;
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
