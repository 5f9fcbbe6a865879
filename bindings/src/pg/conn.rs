//! `wl_pg_conn`: one writer-session connection, its statements and
//! transactions, and the writer floor schema.

use std::ffi::c_char;
use std::sync::{Mutex, MutexGuard};

use writerlock::pg::{self, Connection, Value};

use super::settings::{settings_of, wl_pg_settings};
use crate::error::{wl_error, wl_result};
use crate::ffi::{
    copy_out, invalid, put, put_opt, run, try_opt_str, try_out, try_ref, try_str, value,
};
use crate::rows::wl_pg_rows;

/// A Postgres session carrying the writer-session settings.
///
/// Created with `wl_pg_connect` or `wl_pg_pool_take`; freed (closed) with
/// `wl_pg_conn_free` or handed back with `wl_pg_pool_give`. Calls on one
/// connection from several threads are serialized.
#[allow(non_camel_case_types)]
pub struct wl_pg_conn {
    pub(super) conn: Mutex<Connection>,
}

impl wl_pg_conn {
    pub(super) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
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
