//! `wl_strings`: a list of texts handed to C (the alerts to raise).

use std::ffi::{c_char, CString};

use crate::ffi::{c_string, value};

/// A list of UTF-8 texts, such as the alerts `wl_pg_write_alerts` returns.
///
/// Owned by the caller and freed with `wl_strings_free`. Immutable: it may
/// be read from any thread. Pointers it hands out stay valid until it is
/// freed.
#[allow(non_camel_case_types)]
pub struct wl_strings {
    items: Vec<CString>,
}

impl wl_strings {
    /// A list of `texts`.
    pub(crate) fn new(texts: Vec<String>) -> wl_strings {
        wl_strings {
            items: texts.iter().map(|t| c_string(t)).collect(),
        }
    }
}

/// The number of texts (0 for NULL).
#[no_mangle]
pub extern "C" fn wl_strings_count(strings: *const wl_strings) -> usize {
    value("wl_strings_count", 0, || {
        crate::ffi::deref("strings", strings).map_or(0, |s| s.items.len())
    })
}

/// Text number `index` (from 0), borrowed from `strings` until it is freed;
/// NULL when out of range.
#[no_mangle]
pub extern "C" fn wl_strings_get(strings: *const wl_strings, index: usize) -> *const c_char {
    value("wl_strings_get", std::ptr::null(), || {
        crate::ffi::deref("strings", strings)
            .ok()
            .and_then(|s| s.items.get(index))
            .map_or(std::ptr::null(), |t| t.as_ptr())
    })
}

/// Frees a list. NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_strings_free(strings: *mut wl_strings) {
    value("wl_strings_free", (), || {
        drop(crate::ffi::take_box(strings));
    })
}
