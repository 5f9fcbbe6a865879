//! `wl_pg_pool`: a bounded pool of writer-session connections.

use std::ffi::c_char;
use std::sync::Mutex;

use writerlock::pg::Pool;

use super::conn::wl_pg_conn;
use super::settings::{settings_of, wl_pg_settings};
use crate::error::wl_result;
use crate::ffi::{put, run, try_out, try_ref, try_str, value};

/// A bounded pool of writer-session connections to one database.
///
/// Created with `wl_pg_pool_new`, freed with `wl_pg_pool_free` (closing
/// its idle connections; connections taken out stay the caller's). Safe to
/// share between threads.
#[allow(non_camel_case_types)]
pub struct wl_pg_pool {
    pool: Pool,
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
