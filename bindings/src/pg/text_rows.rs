//! `wl_pg_text_rows`: rows of text cells from a driver of the program's own
//! (libpq's `PQgetvalue`), handed to a `wl_pg_protocol` or a settings check.

use std::ffi::c_char;

use writerlock::pg::Value;

use crate::error::{wl_error, wl_result};
use crate::ffi::{run, try_mut, try_opt_str, try_out, value};

/// Rows a statement returned on the program's own connection, as text
/// cells (NULL cells are SQL NULL), the way libpq hands them out.
///
/// Created with `wl_pg_text_rows_new`, freed with `wl_pg_text_rows_free`.
/// Fill it with `wl_pg_text_rows_add_row` and `wl_pg_text_rows_add_cell`,
/// pass it to `wl_pg_protocol_feed_rows` or `wl_pg_settings_verify` (which
/// copy what they need), and empty it with `wl_pg_text_rows_clear` to use
/// it again. Do not change it from two threads at once.
#[allow(non_camel_case_types)]
pub struct wl_pg_text_rows {
    rows: Vec<Vec<Value>>,
}

impl wl_pg_text_rows {
    /// The rows as the core's values: text or NULL.
    pub(super) fn values(&self) -> &[Vec<Value>] {
        &self.rows
    }
}

/// Creates an empty set of rows. On success `*out` is owned by the caller
/// and freed with `wl_pg_text_rows_free`.
#[no_mangle]
pub extern "C" fn wl_pg_text_rows_new(out: *mut *mut wl_pg_text_rows) -> wl_result {
    run("wl_pg_text_rows_new", || {
        let out = try_out!(out);
        crate::ffi::put(
            out,
            Box::into_raw(Box::new(wl_pg_text_rows { rows: Vec::new() })),
        );
        Ok(())
    })
}

/// Frees rows. NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_pg_text_rows_free(rows: *mut wl_pg_text_rows) {
    value("wl_pg_text_rows_free", (), || {
        drop(crate::ffi::take_box(rows));
    })
}

/// Starts a new row; the cells added next belong to it.
#[no_mangle]
pub extern "C" fn wl_pg_text_rows_add_row(rows: *mut wl_pg_text_rows) -> wl_result {
    run("wl_pg_text_rows_add_row", || {
        let rows = try_mut!(rows);
        rows.rows.push(Vec::new());
        Ok(())
    })
}

/// Adds a cell to the row started last: `text` (UTF-8, NUL-terminated; the
/// text form Postgres prints, as `PQgetvalue` returns it), or SQL NULL when
/// `text` is NULL (`PQgetisnull`). `WL_STATE` before the first
/// `wl_pg_text_rows_add_row`; `WL_INVALID_ARGUMENT` for text that is not
/// UTF-8.
#[no_mangle]
pub extern "C" fn wl_pg_text_rows_add_cell(
    rows: *mut wl_pg_text_rows,
    text: *const c_char,
) -> wl_result {
    run("wl_pg_text_rows_add_cell", || {
        let rows = try_mut!(rows);
        let text = try_opt_str!(text);
        let Some(row) = rows.rows.last_mut() else {
            return Err(wl_error::new(
                wl_result::WL_STATE,
                "the rows have no row to add a cell to; start one with wl_pg_text_rows_add_row",
            ));
        };
        row.push(text.map_or(Value::Null, |t| Value::Text(t.to_string())));
        Ok(())
    })
}

/// The number of rows (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_text_rows_count(rows: *const wl_pg_text_rows) -> usize {
    value("wl_pg_text_rows_count", 0, || {
        crate::ffi::deref("rows", rows).map_or(0, |r| r.rows.len())
    })
}

/// Removes every row, to fill the object again.
#[no_mangle]
pub extern "C" fn wl_pg_text_rows_clear(rows: *mut wl_pg_text_rows) -> wl_result {
    run("wl_pg_text_rows_clear", || {
        try_mut!(rows).rows.clear();
        Ok(())
    })
}
