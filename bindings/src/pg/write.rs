//! `wl_pg_write`: what a write transaction learned while it started (its
//! waits, the stored floor, the refused writers) and the alerts to raise.

use std::ffi::{c_char, CString};

use writerlock::pg::{Alert, WriteStart};

use super::conn::wl_pg_conn;
use crate::error::wl_result;
use crate::ffi::{c_string, invalid, put, put_opt, run, try_out, try_ref, value};
use crate::strings::wl_strings;

/// What a write transaction learned while it started: the waits for the
/// writer lock, the stored floor and the refused writers still connected.
///
/// Created by `wl_pg_write_begin` (or `wl_pg_protocol_granted`, for a
/// write on the program's own connection), freed with `wl_pg_write_free`.
/// Freeing it does not end the transaction: end that with `wl_pg_commit` or
/// `wl_pg_rollback` (with `wl_pg_protocol_end` on the program's own
/// connection).
#[allow(non_camel_case_types)]
pub struct wl_pg_write {
    start: WriteStart,
    writers: Vec<CString>,
}

impl wl_pg_write {
    /// What a granted write learned, with the refused writers' names as C text.
    pub(super) fn new(start: WriteStart) -> wl_pg_write {
        let writers = start
            .refused()
            .iter()
            .map(|w| c_string(&w.writer))
            .collect();
        wl_pg_write { start, writers }
    }
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
            put(out, Box::into_raw(Box::new(wl_pg_write::new(start))));
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

/// The refusal count at which this write found no refused writer, to hand
/// to the next write on the same database with `wl_pg_protocol_known_clean`;
/// -1 when it found one, the database keeps no count, or for NULL.
#[no_mangle]
pub extern "C" fn wl_pg_write_refusals_clean(write: *const wl_pg_write) -> i64 {
    value("wl_pg_write_refusals_clean", -1, || {
        crate::ffi::deref("write", write)
            .ok()
            .and_then(|w| w.start.refusals_clean())
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
