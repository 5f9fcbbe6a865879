//! `wl_pg_rows`: the rows a Postgres statement returned, as text.
//!
//! Every value is rendered once, when the rows arrive, in the text form
//! Postgres itself prints (`t`/`f` for booleans, `\x...` hex for bytea,
//! `2024-05-01 12:00:00.25+00` for timestamps, in UTC), so C reads
//! `const char *` pointers that stay valid until the rows are freed.

use std::ffi::{c_char, CString};

use writerlock::pg::{Rows, Value};

use crate::ffi::{c_string, value};

/// The rows a statement returned (`wl_pg_query`), rendered as text.
///
/// Owned by the caller and freed with `wl_pg_rows_free`. Immutable: it may
/// be read from any thread. Pointers it hands out stay valid until it is
/// freed.
#[allow(non_camel_case_types)]
pub struct wl_pg_rows {
    columns: Vec<CString>,
    cells: Vec<Vec<Option<CString>>>,
    affected: u64,
}

impl wl_pg_rows {
    /// Renders `rows` as text.
    pub(crate) fn new(rows: &Rows) -> wl_pg_rows {
        wl_pg_rows {
            columns: rows.columns().iter().map(|c| c_string(c.name())).collect(),
            cells: rows
                .rows()
                .iter()
                .map(|r| {
                    r.values()
                        .iter()
                        .map(|v| text_of(v).map(|t| c_string(&t)))
                        .collect()
                })
                .collect(),
            affected: rows.affected(),
        }
    }

    fn cell(&self, row: usize, column: usize) -> Option<&CString> {
        self.cells.get(row)?.get(column)?.as_ref()
    }
}

/// A value in Postgres's text form (the core's [`Value::pg_text`]); `None` for SQL NULL.
/// Floats keep their shortest form (`1`, not the core's `1.0`), as C has always read them.
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Float(f) => Some(float_text(*f)),
        other => other.pg_text(),
    }
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        (if v > 0.0 { "Infinity" } else { "-Infinity" }).to_string()
    } else {
        v.to_string()
    }
}

fn rows_ref<'a>(rows: *const wl_pg_rows) -> Option<&'a wl_pg_rows> {
    crate::ffi::deref("rows", rows).ok()
}

/// Frees rows from `wl_pg_query`. NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_pg_rows_free(rows: *mut wl_pg_rows) {
    value("wl_pg_rows_free", (), || {
        drop(crate::ffi::take_box(rows));
    })
}

/// The number of rows (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_rows_count(rows: *const wl_pg_rows) -> usize {
    value("wl_pg_rows_count", 0, || {
        rows_ref(rows).map_or(0, |r| r.cells.len())
    })
}

/// The number of columns (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_rows_columns(rows: *const wl_pg_rows) -> usize {
    value("wl_pg_rows_columns", 0, || {
        rows_ref(rows).map_or(0, |r| r.columns.len())
    })
}

/// The number of rows the statement changed or returned (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_rows_affected(rows: *const wl_pg_rows) -> u64 {
    value("wl_pg_rows_affected", 0, || {
        rows_ref(rows).map_or(0, |r| r.affected)
    })
}

/// The name of column `column` (from 0), borrowed from `rows` until it is
/// freed; NULL when out of range.
#[no_mangle]
pub extern "C" fn wl_pg_rows_column_name(rows: *const wl_pg_rows, column: usize) -> *const c_char {
    value("wl_pg_rows_column_name", std::ptr::null(), || {
        rows_ref(rows)
            .and_then(|r| r.columns.get(column))
            .map_or(std::ptr::null(), |c| c.as_ptr())
    })
}

/// The value at `row`, `column` (both from 0) as text, borrowed from `rows`
/// until it is freed; NULL for SQL NULL or out of range (tell them apart
/// with `wl_pg_rows_count` / `wl_pg_rows_columns`).
#[no_mangle]
pub extern "C" fn wl_pg_rows_text(
    rows: *const wl_pg_rows,
    row: usize,
    column: usize,
) -> *const c_char {
    value("wl_pg_rows_text", std::ptr::null(), || {
        rows_ref(rows)
            .and_then(|r| r.cell(row, column))
            .map_or(std::ptr::null(), |c| c.as_ptr())
    })
}

/// Whether the value at `row`, `column` is SQL NULL (true out of range).
#[no_mangle]
pub extern "C" fn wl_pg_rows_is_null(rows: *const wl_pg_rows, row: usize, column: usize) -> bool {
    value("wl_pg_rows_is_null", true, || {
        rows_ref(rows).is_none_or(|r| r.cell(row, column).is_none())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_render_like_postgres() {
        assert_eq!(text_of(&Value::Bool(true)).as_deref(), Some("t"));
        assert_eq!(
            text_of(&Value::Bytes(vec![1, 0xab])).as_deref(),
            Some("\\x01ab")
        );
        assert_eq!(text_of(&Value::Null), None);
        let timestamp = |micros, time_zone| text_of(&Value::Timestamp { micros, time_zone });
        assert_eq!(
            timestamp(1_714_564_800_250_000, true).as_deref(),
            Some("2024-05-01 12:00:00.25+00")
        );
        assert_eq!(timestamp(0, false).as_deref(), Some("1970-01-01 00:00:00"));
        // 1 January 1 BC, 00:00:00.000001.
        assert_eq!(
            timestamp(-62_167_219_200_000_000 + 1, true).as_deref(),
            Some("0001-01-01 00:00:00.000001+00 BC")
        );
        assert_eq!(timestamp(i64::MAX, true).as_deref(), Some("infinity"));
        assert_eq!(timestamp(i64::MIN, false).as_deref(), Some("-infinity"));
    }
}
