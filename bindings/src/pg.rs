//! The Postgres writer session: `wl_pg_settings`, `wl_pg_conn`,
//! `wl_pg_pool` and `wl_pg_write`.
//!
//! Every connection sends `lock_timeout=10s`,
//! `idle_in_transaction_session_timeout=15s`, `statement_timeout=60s` and
//! the writer version (`agentihooks.ledger_writer_version`) as startup
//! options, and checks after connecting that they took effect. A write
//! transaction (`wl_pg_write_begin`) takes the ledger writer lock as its
//! first statement, with its waits, then checks the writer floor.

use std::ffi::{c_char, CString};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use writerlock::pg::{self, Alert, Connection, Pool, Settings, Value, WriteStart};

use crate::error::{wl_error, wl_result};
use crate::ffi::{
    c_string, copy_out, invalid, put, put_opt, run, seconds, try_mut, try_opt_str, try_out,
    try_ref, try_str, value,
};
use crate::rows::wl_pg_rows;
use crate::strings::wl_strings;

/// The settings of a Postgres writer session: time limits, writer version
/// and floor, keepalives. Starts at the ledger spec's defaults (`lock_timeout`
/// 10 s asked 3 times, idle in transaction 15 s, statement 60 s, version 1,
/// required floor 1, client keepalives 30 s / 10 s / 3).
///
/// Created with `wl_pg_settings_new`, freed with `wl_pg_settings_free`.
/// Connections and pools copy it, so it may be freed right after use. Do
/// not change it from two threads at once.
#[allow(non_camel_case_types)]
pub struct wl_pg_settings {
    inner: Settings,
}

/// A Postgres session carrying the writer-session settings.
///
/// Created with `wl_pg_connect` or `wl_pg_pool_take`; freed (closed) with
/// `wl_pg_conn_free` or handed back with `wl_pg_pool_give`. Calls on one
/// connection from several threads are serialized.
#[allow(non_camel_case_types)]
pub struct wl_pg_conn {
    conn: Mutex<Connection>,
}

impl wl_pg_conn {
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A bounded pool of writer-session connections to one database.
///
/// Created with `wl_pg_pool_new`, freed with `wl_pg_pool_free` (closing
/// its idle connections; connections taken out stay the caller's). Safe to
/// share between threads.
#[allow(non_camel_case_types)]
pub struct wl_pg_pool {
    pool: Pool,
}

/// What a write transaction learned while it started: the waits for the
/// writer lock, the stored floor and the refused writers still connected.
///
/// Created by `wl_pg_write_begin`, freed with `wl_pg_write_free`. Freeing
/// it does not end the transaction: end that with `wl_pg_commit` or
/// `wl_pg_rollback`.
#[allow(non_camel_case_types)]
pub struct wl_pg_write {
    start: WriteStart,
    writers: Vec<CString>,
}

/// A refused writer still connected to the database (see
/// `wl_pg_write_refused`).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wl_pg_refused_writer {
    /// Its client address, or `an unseen client` (a local socket). Borrowed
    /// from the `wl_pg_write`: valid until that is freed.
    pub writer: *const c_char,
    /// Its server process id.
    pub pid: i32,
    /// The writer version it sent (0 when none).
    pub version: i64,
    /// The floor it hit.
    pub floor: i64,
}

/// An alert already in a ledger's alert list, oldest first, for
/// `wl_pg_write_alerts`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wl_pg_alert {
    /// Its text (UTF-8, NUL-terminated).
    pub text: *const c_char,
    /// Whether it is still open.
    pub open: bool,
}

fn settings_of(settings: *const wl_pg_settings) -> Settings {
    crate::ffi::deref("settings", settings).map_or_else(|_| Settings::new(), |s| s.inner.clone())
}

fn set_seconds(
    settings: *mut wl_pg_settings,
    value: f64,
    apply: impl FnOnce(&mut Settings, Duration),
) -> Result<(), wl_error> {
    let settings = try_mut!(settings);
    let value = seconds("seconds", value)?;
    apply(&mut settings.inner, value);
    Ok(())
}

/// Sets a time limit, refused (`WL_INVALID_ARGUMENT`, naming `name` and the
/// accepted range) when it is 0, under 1 ms or too long.
fn set_limit(
    settings: *mut wl_pg_settings,
    name: &'static str,
    value: f64,
    apply: impl FnOnce(&mut Settings, Duration),
) -> Result<(), wl_error> {
    let settings = try_mut!(settings);
    let value = seconds(name, value)?;
    writerlock::pg::check_limit(name, value)?;
    apply(&mut settings.inner, value);
    Ok(())
}

fn set_count(
    settings: *mut wl_pg_settings,
    apply: impl FnOnce(&mut Settings),
) -> Result<(), wl_error> {
    let settings = try_mut!(settings);
    apply(&mut settings.inner);
    Ok(())
}

/// Creates settings at the ledger spec's defaults. On success `*out` is owned by
/// the caller and freed with `wl_pg_settings_free`.
#[no_mangle]
pub extern "C" fn wl_pg_settings_new(out: *mut *mut wl_pg_settings) -> wl_result {
    run("wl_pg_settings_new", || {
        let out = try_out!(out);
        put(
            out,
            Box::into_raw(Box::new(wl_pg_settings {
                inner: Settings::new(),
            })),
        );
        Ok(())
    })
}

/// Frees settings. NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_pg_settings_free(settings: *mut wl_pg_settings) {
    value("wl_pg_settings_free", (), || {
        drop(crate::ffi::take_box(settings));
    })
}

/// Sets how long one wait for the writer lock may last (`lock_timeout`),
/// in seconds (default 10; sent in whole milliseconds).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_lock_wait(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_lock_wait", || {
        set_limit(settings, "lock_wait", seconds, |s, d| {
            s.lock_wait(d);
        })
    })
}

/// Sets how many waits for the writer lock a write makes before it fails
/// (default 3; 0 counts as 1).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_lock_tries(
    settings: *mut wl_pg_settings,
    tries: u32,
) -> wl_result {
    run("wl_pg_settings_set_lock_tries", || {
        set_count(settings, |s| {
            s.lock_tries(tries);
        })
    })
}

/// Sets how long a session may sit idle in an open transaction before the
/// server ends it (`idle_in_transaction_session_timeout`), in seconds
/// (default 15).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_idle_in_transaction(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_idle_in_transaction", || {
        set_limit(settings, "idle_in_transaction", seconds, |s, d| {
            s.idle_in_transaction(d);
        })
    })
}

/// Sets how long one statement may run before the server cancels it
/// (`statement_timeout`), in seconds (default 60).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_statement_timeout(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_statement_timeout", || {
        set_limit(settings, "statement_timeout", seconds, |s, d| {
            s.statement_timeout(d);
        })
    })
}

fn version_arg(name: &'static str, version: u32) -> Result<u16, wl_error> {
    u16::try_from(version).map_err(|_| invalid(name, format!("{version} is above 32767")))
}

/// Sets the writer version this code writes as
/// (`agentihooks.ledger_writer_version`, default 1, at most 32767).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_version(
    settings: *mut wl_pg_settings,
    version: u32,
) -> wl_result {
    run("wl_pg_settings_set_version", || {
        let version = version_arg("version", version)?;
        set_count(settings, |s| {
            s.version(version);
        })
    })
}

/// Sets the writer floor this code stores at schema setup (default 1).
/// Connecting with a required floor above the version fails with
/// `WL_INVALID_ARGUMENT`: that code would refuse its own writes.
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_required(
    settings: *mut wl_pg_settings,
    required: u32,
) -> wl_result {
    run("wl_pg_settings_set_required", || {
        let required = version_arg("required", required)?;
        set_count(settings, |s| {
            s.required(required);
        })
    })
}

/// Turns client TCP keepalives on or off (default on).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_keepalives(
    settings: *mut wl_pg_settings,
    on: bool,
) -> wl_result {
    run("wl_pg_settings_set_keepalives", || {
        set_count(settings, |s| {
            s.keepalives(on);
        })
    })
}

/// Sets the client keepalive idle time before the first probe, in seconds
/// (default 30).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_keepalives_idle(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_keepalives_idle", || {
        set_seconds(settings, seconds, |s, d| {
            s.keepalives_idle(d);
        })
    })
}

/// Sets the interval between client keepalive probes, in seconds (default
/// 10).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_keepalives_interval(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_keepalives_interval", || {
        set_seconds(settings, seconds, |s, d| {
            s.keepalives_interval(d);
        })
    })
}

/// Sets how many unanswered client keepalive probes close the connection
/// (default 3).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_keepalives_count(
    settings: *mut wl_pg_settings,
    count: u32,
) -> wl_result {
    run("wl_pg_settings_set_keepalives_count", || {
        set_count(settings, |s| {
            s.keepalives_count(count);
        })
    })
}

/// Sets the server's keepalive idle time for the session
/// (`tcp_keepalives_idle`), in seconds (default 30; 0 leaves the server's
/// default).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_server_keepalives_idle(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_server_keepalives_idle", || {
        set_seconds(settings, seconds, |s, d| {
            s.server_keepalives_idle(d);
        })
    })
}

/// Sets the server's keepalive interval for the session
/// (`tcp_keepalives_interval`), in seconds (default 10; 0 leaves the
/// server's default).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_server_keepalives_interval(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_server_keepalives_interval", || {
        set_seconds(settings, seconds, |s, d| {
            s.server_keepalives_interval(d);
        })
    })
}

/// Sets the server's keepalive probe count for the session
/// (`tcp_keepalives_count`, default 3; 0 leaves the server's default).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_server_keepalives_count(
    settings: *mut wl_pg_settings,
    count: u32,
) -> wl_result {
    run("wl_pg_settings_set_server_keepalives_count", || {
        set_count(settings, |s| {
            s.server_keepalives_count(count);
        })
    })
}

/// Sets the TCP user timeout of the session, in seconds (default 60, the
/// keepalive budget): set on the client's socket, so a statement sent into a
/// dead network fails with `WL_PG_CLOSED` (or `WL_PG_OUTCOME_UNKNOWN` for a
/// COMMIT) after this long, and sent to the server as `tcp_user_timeout`.
/// Between 0.001 and 2147483.647 seconds.
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_tcp_user_timeout(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_tcp_user_timeout", || {
        set_limit(settings, "tcp_user_timeout", seconds, |s, d| {
            s.tcp_user_timeout(d);
        })
    })
}

/// Sets how long opening a connection may take, in seconds (default 10).
#[no_mangle]
pub extern "C" fn wl_pg_settings_set_connect_timeout(
    settings: *mut wl_pg_settings,
    seconds: f64,
) -> wl_result {
    run("wl_pg_settings_set_connect_timeout", || {
        set_limit(settings, "connect_timeout", seconds, |s, d| {
            s.connect_timeout(d);
        })
    })
}

/// Copies the libpq `options` string these settings send (`-c
/// lock_timeout=10s -c idle_in_transaction_session_timeout=15s ...`) into
/// `buf`, like `wl_error_message`; returns its full length (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_settings_startup_options(
    settings: *const wl_pg_settings,
    buf: *mut c_char,
    len: usize,
) -> usize {
    value("wl_pg_settings_startup_options", 0, || {
        let text = crate::ffi::deref("settings", settings)
            .map(|s| s.inner.startup_options())
            .unwrap_or_default();
        copy_out(&text, buf, len)
    })
}

/// Opens a session at `url` (a `postgresql://` URL or libpq `key=value`
/// pairs) with `settings` (NULL: the defaults), and checks that every
/// startup setting took effect.
///
/// On success `*out` is a connection the caller owns and frees with
/// `wl_pg_conn_free`. Fails with `WL_PG_CONNECT` (the message names the
/// address without its password), `WL_PG_SETTING` when a startup setting
/// was dropped, `WL_INVALID_ARGUMENT` for settings that cannot work.
#[no_mangle]
pub extern "C" fn wl_pg_connect(
    url: *const c_char,
    settings: *const wl_pg_settings,
    out: *mut *mut wl_pg_conn,
) -> wl_result {
    run("wl_pg_connect", || {
        let out = try_out!(out);
        let url = try_str!(url);
        let conn = Connection::connect(url, &settings_of(settings))?;
        put(
            out,
            Box::into_raw(Box::new(wl_pg_conn {
                conn: Mutex::new(conn),
            })),
        );
        Ok(())
    })
}

/// Closes and frees a connection; an open transaction is rolled back by the
/// server. NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_pg_conn_free(conn: *mut wl_pg_conn) {
    value("wl_pg_conn_free", (), || {
        if let Some(conn) = crate::ffi::take_box(conn) {
            let conn = conn.conn.into_inner().unwrap_or_else(|p| p.into_inner());
            let _ = conn.close();
        }
    })
}

/// Reads `nparams` text parameters (NULL elements are SQL NULL).
fn params_of(nparams: usize, params: *const *const c_char) -> Result<Vec<Value>, wl_error> {
    if nparams == 0 {
        return Ok(Vec::new());
    }
    if params.is_null() {
        return Err(crate::ffi::null_arg("params"));
    }
    let slice = crate::ffi::slice(params, nparams);
    slice
        .iter()
        .enumerate()
        .map(|(i, p)| match crate::ffi::c_opt_str("params", *p) {
            Ok(Some(text)) => Ok(Value::Text(text.to_string())),
            Ok(None) => Ok(Value::Null),
            Err(_) => Err(invalid(
                "params",
                format!("element {i} is not valid UTF-8; pass UTF-8 text"),
            )),
        })
        .collect()
}

/// Runs one statement with `?` or `$n` placeholders and `nparams` text
/// parameters (`params` may be NULL when `nparams` is 0; a NULL element is
/// SQL NULL; the server converts the text to the type it expects).
/// `affected_out`, if not NULL, receives the number of rows the statement
/// changed (or returned). Rows a statement returns are discarded: use
/// `wl_pg_query` to read them.
///
/// Outside a transaction the statement commits on its own. A server error
/// is `WL_PG_DATABASE` with its SQLSTATE; the floor trigger's refusal is
/// `WL_PG_REFUSED` (`LW001`).
#[no_mangle]
pub extern "C" fn wl_pg_exec(
    conn: *const wl_pg_conn,
    sql: *const c_char,
    nparams: usize,
    params: *const *const c_char,
    affected_out: *mut u64,
) -> wl_result {
    run("wl_pg_exec", || {
        put_opt(affected_out, 0);
        let conn = try_ref!(conn);
        let sql = try_str!(sql);
        let params = params_of(nparams, params)?;
        let rows = conn.lock().execute(sql, &params)?;
        put_opt(affected_out, rows.affected());
        Ok(())
    })
}

/// Runs one statement like `wl_pg_exec` and returns its rows: on success
/// `*out` is a `wl_pg_rows` the caller owns and frees with
/// `wl_pg_rows_free`.
#[no_mangle]
pub extern "C" fn wl_pg_query(
    conn: *const wl_pg_conn,
    sql: *const c_char,
    nparams: usize,
    params: *const *const c_char,
    out: *mut *mut wl_pg_rows,
) -> wl_result {
    run("wl_pg_query", || {
        let out = try_out!(out);
        let conn = try_ref!(conn);
        let sql = try_str!(sql);
        let params = params_of(nparams, params)?;
        let rows = conn.lock().execute(sql, &params)?;
        put(out, Box::into_raw(Box::new(wl_pg_rows::new(&rows))));
        Ok(())
    })
}

/// Runs a script of statements separated by `;` without parameters (the
/// simple query protocol), such as DDL or `CREATE DATABASE`.
#[no_mangle]
pub extern "C" fn wl_pg_exec_batch(conn: *const wl_pg_conn, sql: *const c_char) -> wl_result {
    run("wl_pg_exec_batch", || {
        let conn = try_ref!(conn);
        let sql = try_str!(sql);
        conn.lock().execute_batch(sql)?;
        Ok(())
    })
}

/// Opens a plain transaction (no writer lock; for writes use
/// `wl_pg_write_begin`). `WL_STATE` inside an open transaction.
#[no_mangle]
pub extern "C" fn wl_pg_begin(conn: *const wl_pg_conn) -> wl_result {
    run("wl_pg_begin", || {
        try_ref!(conn).lock().begin()?;
        Ok(())
    })
}

/// Commits the open transaction (nothing when none is open). If a statement
/// in it failed, it is rolled back and this returns `WL_PG_ROLLED_BACK`.
#[no_mangle]
pub extern "C" fn wl_pg_commit(conn: *const wl_pg_conn) -> wl_result {
    run("wl_pg_commit", || {
        try_ref!(conn).lock().commit()?;
        Ok(())
    })
}

/// Rolls back the open transaction (nothing when none is open).
#[no_mangle]
pub extern "C" fn wl_pg_rollback(conn: *const wl_pg_conn) -> wl_result {
    run("wl_pg_rollback", || {
        try_ref!(conn).lock().rollback()?;
        Ok(())
    })
}

/// Whether a transaction is open on the connection (false for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_in_transaction(conn: *const wl_pg_conn) -> bool {
    value("wl_pg_in_transaction", false, || {
        crate::ffi::deref("conn", conn).is_ok_and(|c| c.lock().in_transaction())
    })
}

/// Whether the connection is closed or was lost (true for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_is_closed(conn: *const wl_pg_conn) -> bool {
    value("wl_pg_is_closed", true, || {
        crate::ffi::deref("conn", conn).map_or(true, |c| c.lock().is_closed())
    })
}

/// The server process id of the session (`pg_backend_pid()`; 0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_pid(conn: *const wl_pg_conn) -> i32 {
    value("wl_pg_pid", 0, || {
        crate::ffi::deref("conn", conn).map_or(0, |c| c.lock().pid())
    })
}

/// Copies what `SHOW name` prints on this session (such as `10s` for
/// `lock_timeout`) into `buf` (`len` bytes, always NUL-terminated when
/// `len > 0`); `len_out`, if not NULL, receives its full length. An unset
/// custom setting reads as the empty string.
#[no_mangle]
pub extern "C" fn wl_pg_show(
    conn: *const wl_pg_conn,
    name: *const c_char,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
) -> wl_result {
    run("wl_pg_show", || {
        put_opt(len_out, 0);
        copy_out("", buf, len);
        let conn = try_ref!(conn);
        let name = try_str!(name);
        let shown = conn.lock().show(name)?.unwrap_or_default();
        put_opt(len_out, copy_out(&shown, buf, len));
        Ok(())
    })
}

/// Sets up the writer floor schema and stores this connection's required
/// floor (raising, never lowering, the stored one), in one transaction
/// under the writer lock, running the host's `extra_sql` script (NULL:
/// none) first. Creates minimal `ledgers(slug, generation)` and
/// `row_changes(slug, generation, row_key, changed_at)` tables where
/// missing. Must run outside a transaction.
#[no_mangle]
pub extern "C" fn wl_pg_setup_schema(
    conn: *const wl_pg_conn,
    extra_sql: *const c_char,
) -> wl_result {
    run("wl_pg_setup_schema", || {
        let conn = try_ref!(conn);
        let extra = try_opt_str!(extra_sql);
        pg::setup_schema(&mut conn.lock(), extra)?;
        Ok(())
    })
}

/// Reads the stored writer floor into `*floor_out`: -1 when the database
/// stores none (no writer on floor code set it up yet).
#[no_mangle]
pub extern "C" fn wl_pg_stored_floor(conn: *const wl_pg_conn, floor_out: *mut i64) -> wl_result {
    run("wl_pg_stored_floor", || {
        if floor_out.is_null() {
            return Err(crate::ffi::null_arg("floor_out"));
        }
        put_opt(floor_out, -1);
        let conn = try_ref!(conn);
        let floor = pg::stored_floor(&mut conn.lock())?;
        put_opt(floor_out, floor.unwrap_or(-1));
        Ok(())
    })
}

/// Starts a write transaction: sets up the schema once per address per
/// process, takes the ledger writer lock as the transaction's first
/// statement (with its waits), reads the stored floor and refuses a writer
/// below it, and lists the refused writers still connected. Follow it with
/// `wl_pg_exec` / `wl_pg_query` and end it with `wl_pg_commit` or
/// `wl_pg_rollback`.
///
/// `out`, if not NULL, receives a `wl_pg_write` (owned by the caller, freed
/// with `wl_pg_write_free`) with the waits, the floor and the refused
/// writers. Fails with `WL_PG_NOT_GRANTED` after all the waits (`the ledger
/// writer lock was not granted in 3 waits of 10 seconds`), `WL_PG_REFUSED`
/// (`LW001`) below the floor, `WL_STATE` when the open transaction already
/// ran a statement (`cannot start a transaction within a transaction`). On
/// failure nothing was written and no transaction is left open.
#[no_mangle]
pub extern "C" fn wl_pg_write_begin(
    conn: *const wl_pg_conn,
    out: *mut *mut wl_pg_write,
) -> wl_result {
    run("wl_pg_write_begin", || {
        if !out.is_null() {
            put(out, std::ptr::null_mut());
        }
        let conn = try_ref!(conn);
        let start = conn.lock().begin_write()?;
        if !out.is_null() {
            let writers = start
                .refused()
                .iter()
                .map(|w| c_string(&w.writer))
                .collect();
            put(out, Box::into_raw(Box::new(wl_pg_write { start, writers })));
        }
        Ok(())
    })
}

/// Frees what `wl_pg_write_begin` returned (the transaction is not
/// affected). NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_pg_write_free(write: *mut wl_pg_write) {
    value("wl_pg_write_free", (), || {
        drop(crate::ffi::take_box(write));
    })
}

/// How many waits for the writer lock the write took (1 when granted on
/// the first; 0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_write_waits(write: *const wl_pg_write) -> u32 {
    value("wl_pg_write_waits", 0, || {
        crate::ffi::deref("write", write).map_or(0, |w| w.start.waits())
    })
}

/// The stored floor the write was checked against (-1 when the database
/// stores none, or for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_write_floor(write: *const wl_pg_write) -> i64 {
    value("wl_pg_write_floor", -1, || {
        crate::ffi::deref("write", write)
            .ok()
            .and_then(|w| w.start.floor())
            .unwrap_or(-1)
    })
}

/// How many refused writers are still connected to the database (0 for
/// NULL).
#[no_mangle]
pub extern "C" fn wl_pg_write_refused_count(write: *const wl_pg_write) -> usize {
    value("wl_pg_write_refused_count", 0, || {
        crate::ffi::deref("write", write).map_or(0, |w| w.start.refused().len())
    })
}

/// Fills `*out` with refused writer number `index` (from 0).
/// `out->writer` is borrowed from `write` and valid until it is freed.
/// `WL_INVALID_ARGUMENT` when `index` is out of range.
#[no_mangle]
pub extern "C" fn wl_pg_write_refused(
    write: *const wl_pg_write,
    index: usize,
    out: *mut wl_pg_refused_writer,
) -> wl_result {
    run("wl_pg_write_refused", || {
        let write = try_ref!(write);
        if out.is_null() {
            return Err(crate::ffi::null_arg("out"));
        }
        let refused = write.start.refused();
        let (Some(w), Some(name)) = (refused.get(index), write.writers.get(index)) else {
            return Err(invalid(
                "index",
                format!(
                    "{index} is out of range: there are {} refused writers",
                    refused.len()
                ),
            ));
        };
        put_opt(
            out,
            wl_pg_refused_writer {
                writer: name.as_ptr(),
                pid: w.pid,
                version: w.version,
                floor: w.floor,
            },
        );
        Ok(())
    })
}

/// The alert texts to raise on the ledger being written, given that
/// ledger's current alerts (`existing`, `nexisting` of them oldest first;
/// NULL when `nexisting` is 0): one per refused writer (`The ledger writer
/// at 10.0.0.5 was refused: ledger writer version 0 is below version 1,
/// ...`), except those with an open alert of the same text or a closed one
/// still among the newest 200 closed alerts.
///
/// On success `*out` is a `wl_strings` the caller owns and frees with
/// `wl_strings_free` (possibly empty).
#[no_mangle]
pub extern "C" fn wl_pg_write_alerts(
    write: *const wl_pg_write,
    existing: *const wl_pg_alert,
    nexisting: usize,
    out: *mut *mut wl_strings,
) -> wl_result {
    run("wl_pg_write_alerts", || {
        let out = try_out!(out);
        let write = try_ref!(write);
        let alerts: Vec<Alert> = if nexisting == 0 {
            Vec::new()
        } else {
            if existing.is_null() {
                return Err(crate::ffi::null_arg("existing"));
            }
            let slice = crate::ffi::slice(existing, nexisting);
            let mut alerts = Vec::with_capacity(slice.len());
            for (i, a) in slice.iter().enumerate() {
                let text = crate::ffi::c_str("existing", a.text).map_err(|_| {
                    invalid(
                        "existing",
                        format!("the text of element {i} is NULL or not valid UTF-8"),
                    )
                })?;
                alerts.push(Alert {
                    text: text.to_string(),
                    open: a.open,
                });
            }
            alerts
        };
        let texts = write.start.alerts(&alerts);
        put(out, Box::into_raw(Box::new(wl_strings::new(texts))));
        Ok(())
    })
}

/// Creates a pool for `url` with `settings` (NULL: the defaults) that keeps
/// up to `size` idle connections. Checks the address and settings now and
/// opens no connection until `wl_pg_pool_take`. On success `*out` is owned
/// by the caller and freed with `wl_pg_pool_free`.
#[no_mangle]
pub extern "C" fn wl_pg_pool_new(
    url: *const c_char,
    settings: *const wl_pg_settings,
    size: usize,
    out: *mut *mut wl_pg_pool,
) -> wl_result {
    run("wl_pg_pool_new", || {
        let out = try_out!(out);
        let url = try_str!(url);
        let pool = Pool::new(url, settings_of(settings), size)?;
        put(out, Box::into_raw(Box::new(wl_pg_pool { pool })));
        Ok(())
    })
}

/// Frees a pool and closes its idle connections. NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_pg_pool_free(pool: *mut wl_pg_pool) {
    value("wl_pg_pool_free", (), || {
        drop(crate::ffi::take_box(pool));
    })
}

/// Hands out an idle connection that is still open, or opens a new one
/// (which checks its settings). On success `*out` is the caller's until it
/// is given back with `wl_pg_pool_give` (or freed with `wl_pg_conn_free`).
#[no_mangle]
pub extern "C" fn wl_pg_pool_take(pool: *const wl_pg_pool, out: *mut *mut wl_pg_conn) -> wl_result {
    run("wl_pg_pool_take", || {
        let out = try_out!(out);
        let pool = try_ref!(pool);
        let conn = pool.pool.take()?;
        put(
            out,
            Box::into_raw(Box::new(wl_pg_conn {
                conn: Mutex::new(conn),
            })),
        );
        Ok(())
    })
}

/// Gives a connection back to the pool, which takes ownership of it: an
/// open transaction is rolled back; a connection that is closed, whose
/// rollback fails, or beyond the pool's size is closed. The caller must not
/// use `conn` afterwards. With a NULL `pool` (`WL_INVALID_ARGUMENT`) the
/// connection stays the caller's. A NULL `conn` is ignored. A connection to
/// another address or with other settings (another writer version) is
/// refused with `WL_INVALID_ARGUMENT` and closed.
#[no_mangle]
pub extern "C" fn wl_pg_pool_give(pool: *const wl_pg_pool, conn: *mut wl_pg_conn) -> wl_result {
    run("wl_pg_pool_give", || {
        let pool = try_ref!(pool);
        if let Some(conn) = crate::ffi::take_box(conn) {
            let conn = conn.conn.into_inner().unwrap_or_else(|p| p.into_inner());
            pool.pool.give(conn)?;
        }
        Ok(())
    })
}

/// How many idle connections the pool keeps right now (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_pool_idle_count(pool: *const wl_pg_pool) -> usize {
    value("wl_pg_pool_idle_count", 0, || {
        crate::ffi::deref("pool", pool).map_or(0, |p| p.pool.idle_count())
    })
}
