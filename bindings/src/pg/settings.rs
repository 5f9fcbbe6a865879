//! `wl_pg_settings`: the time limits, writer version and floor, and
//! keepalives a connection or pool is opened with.

use std::ffi::c_char;
use std::time::Duration;

use writerlock::pg::Settings;

use crate::error::{wl_error, wl_result};
use crate::ffi::{copy_out, invalid, put, run, seconds, try_mut, try_out, try_ref, value};

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

pub(super) fn settings_of(settings: *const wl_pg_settings) -> Settings {
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

/// Copies the statement that reports how these settings' startup settings
/// stand on a session into `buf`, like `wl_error_message`; returns its full
/// length (0 for NULL). It has no parameters: run it on a connection of the
/// program's own (libpq's `PQexec`) right after connecting, and pass its
/// rows to `wl_pg_settings_verify`.
#[no_mangle]
pub extern "C" fn wl_pg_settings_check_sql(
    settings: *const wl_pg_settings,
    buf: *mut c_char,
    len: usize,
) -> usize {
    value("wl_pg_settings_check_sql", 0, || {
        let text = crate::ffi::deref("settings", settings)
            .map(|s| s.inner.check_sql())
            .unwrap_or_default();
        copy_out(&text, buf, len)
    })
}

/// Checks the rows `wl_pg_settings_check_sql`'s statement returned on a
/// connection of the program's own: `WL_OK` when every startup setting of
/// `settings` (NULL: the defaults) took effect, `WL_PG_SETTING` naming the
/// first one that did not (a connection pooler that dropped the startup
/// options, or a connection opened without them).
#[no_mangle]
pub extern "C" fn wl_pg_settings_verify(
    settings: *const wl_pg_settings,
    rows: *const super::text_rows::wl_pg_text_rows,
) -> wl_result {
    run("wl_pg_settings_verify", || {
        let rows = try_ref!(rows);
        let settings = settings_of(settings);
        writerlock::pg::verify_checks(settings.read_checks(rows.values()))?;
        Ok(())
    })
}
