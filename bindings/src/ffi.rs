//! The panic boundary, argument checks and string copies shared by every
//! exported function.
//!
//! Every `extern "C"` function runs its body through [`run`] (functions that
//! return a [`wl_result`]) or [`value`] (functions that return a plain value),
//! so no panic ever crosses into C. Arguments are checked with the macros
//! [`try_ref!`], [`try_mut!`], [`try_str!`], [`try_opt_str!`] and
//! [`try_out!`]: a NULL pointer or text that is not UTF-8 becomes
//! `WL_INVALID_ARGUMENT` with a message naming the argument.

use std::any::Any;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::error::{set_last, wl_error, wl_result};

/// Runs the body of a function that returns a [`wl_result`]: records its
/// failure (or clears the last error on success) for the calling thread and
/// turns a panic into `WL_PANIC`.
pub(crate) fn run(
    function: &'static str,
    body: impl FnOnce() -> Result<(), wl_error>,
) -> wl_result {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            set_last(None);
            wl_result::WL_OK
        }
        Ok(Err(err)) => {
            let code = err.code();
            set_last(Some(err));
            code
        }
        Err(payload) => {
            set_last(Some(panicked(function, payload.as_ref())));
            wl_result::WL_PANIC
        }
    }
}

/// Runs the body of a function that returns a plain value (a count, a flag,
/// a borrowed pointer); a panic returns `default` and is recorded as the
/// thread's last error (`WL_PANIC`).
pub(crate) fn value<T>(function: &'static str, default: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            set_last(Some(panicked(function, payload.as_ref())));
            default
        }
    }
}

fn panicked(function: &'static str, payload: &(dyn Any + Send)) -> wl_error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "an unknown panic".to_string());
    wl_error::new(
        wl_result::WL_PANIC,
        format!(
            "writerlock panicked in {function}: {what}; this is a bug in writerlock, please \
             report it (the call had no effect beyond what it may have done before the panic)"
        ),
    )
}

/// The error for an unusable argument.
pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> wl_error {
    wl_error::from(writerlock::Error::InvalidArgument {
        name,
        reason: reason.into(),
    })
}

/// The error for a NULL pointer.
pub(crate) fn null_arg(name: &'static str) -> wl_error {
    invalid(name, "it is NULL; pass a valid pointer")
}

/// Borrows the object behind a pointer from C.
pub(crate) fn deref<'a, T>(name: &'static str, ptr: *const T) -> Result<&'a T, wl_error> {
    // SAFETY: the C caller promises that a non-NULL pointer points to a live
    // object of this type, as documented on every function.
    unsafe { ptr.as_ref() }.ok_or_else(|| null_arg(name))
}

/// Borrows the object behind a pointer from C mutably.
pub(crate) fn deref_mut<'a, T>(name: &'static str, ptr: *mut T) -> Result<&'a mut T, wl_error> {
    // SAFETY: as in `deref`, and the caller does not use the object from
    // another thread during the call (documented on the setters).
    unsafe { ptr.as_mut() }.ok_or_else(|| null_arg(name))
}

/// Reads a NUL-terminated UTF-8 string from C.
pub(crate) fn c_str<'a>(name: &'static str, ptr: *const c_char) -> Result<&'a str, wl_error> {
    if ptr.is_null() {
        return Err(null_arg(name));
    }
    // SAFETY: non-NULL and, per the documented contract, NUL-terminated.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes.to_str().map_err(|e| {
        invalid(
            name,
            format!(
                "it is not valid UTF-8 (the bytes from offset {} are not); pass UTF-8 text",
                e.valid_up_to()
            ),
        )
    })
}

/// Reads an optional NUL-terminated UTF-8 string from C (NULL is `None`).
pub(crate) fn c_opt_str<'a>(
    name: &'static str,
    ptr: *const c_char,
) -> Result<Option<&'a str>, wl_error> {
    if ptr.is_null() {
        Ok(None)
    } else {
        c_str(name, ptr).map(Some)
    }
}

/// Checks an out-pointer and clears what it points to, so a failed call
/// leaves NULL (or zero) behind.
pub(crate) fn out_ptr<T>(name: &'static str, ptr: *mut *mut T) -> Result<*mut *mut T, wl_error> {
    if ptr.is_null() {
        return Err(null_arg(name));
    }
    // SAFETY: non-NULL and, per the contract, writable.
    unsafe { ptr.write(std::ptr::null_mut()) };
    Ok(ptr)
}

/// Stores `value` through an out-pointer checked by [`out_ptr`].
pub(crate) fn put<T>(ptr: *mut *mut T, value: *mut T) {
    // SAFETY: checked non-NULL by `out_ptr` at the start of the call.
    unsafe { ptr.write(value) };
}

/// Stores `value` through an optional out-pointer (NULL: not wanted).
pub(crate) fn put_opt<T>(ptr: *mut T, value: T) {
    if !ptr.is_null() {
        // SAFETY: non-NULL and, per the contract, writable.
        unsafe { ptr.write(value) };
    }
}

/// Takes back ownership of an object this library handed to C (NULL:
/// `None`).
pub(crate) fn take_box<T>(ptr: *mut T) -> Option<Box<T>> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: every pointer freed this way came from Box::into_raw in
        // this library and, per the documented contract, is freed once.
        Some(unsafe { Box::from_raw(ptr) })
    }
}

/// Borrows an array of `len` elements from C (`ptr` checked non-NULL by
/// the caller when `len > 0`).
pub(crate) fn slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: the caller passes an array of `len` elements, as documented.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// Copies `text` into a caller's buffer of `len` bytes, truncating and
/// always NUL-terminating when `len > 0`; returns the full length of `text`
/// in bytes (without the NUL), so a caller can size its buffer (snprintf's
/// convention). `buf` may be NULL when `len` is 0.
pub(crate) fn copy_out(text: &str, buf: *mut c_char, len: usize) -> usize {
    let bytes = text.as_bytes();
    if !buf.is_null() && len > 0 {
        let n = bytes.len().min(len - 1);
        // SAFETY: the caller provides `len` writable bytes at `buf`.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    bytes.len()
}

/// A C string of `text`, with any NUL bytes inside replaced (C strings end
/// at the first NUL).
pub(crate) fn c_string(text: &str) -> CString {
    CString::new(text.replace('\0', "\u{FFFD}")).unwrap_or_default()
}

/// Seconds from C as a duration; negative, infinite and NaN are refused.
pub(crate) fn seconds(name: &'static str, value: f64) -> Result<Duration, wl_error> {
    writerlock::Wait::seconds(name, value).map_err(wl_error::from)
}

/// Borrows a non-NULL object argument, or returns `WL_INVALID_ARGUMENT`
/// naming it.
macro_rules! try_ref {
    ($ptr:ident) => {
        $crate::ffi::deref(stringify!($ptr), $ptr)?
    };
}

/// Borrows a non-NULL object argument mutably, or returns
/// `WL_INVALID_ARGUMENT` naming it.
macro_rules! try_mut {
    ($ptr:ident) => {
        $crate::ffi::deref_mut(stringify!($ptr), $ptr)?
    };
}

/// Reads a non-NULL UTF-8 string argument, or returns `WL_INVALID_ARGUMENT`.
macro_rules! try_str {
    ($ptr:ident) => {
        $crate::ffi::c_str(stringify!($ptr), $ptr)?
    };
}

/// Reads an optional UTF-8 string argument (NULL is `None`).
macro_rules! try_opt_str {
    ($ptr:ident) => {
        $crate::ffi::c_opt_str(stringify!($ptr), $ptr)?
    };
}

/// Checks a non-NULL out-pointer and sets `*out = NULL` until success.
macro_rules! try_out {
    ($ptr:ident) => {
        $crate::ffi::out_ptr(stringify!($ptr), $ptr)?
    };
}

pub(crate) use {try_mut, try_opt_str, try_out, try_ref, try_str};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_out_truncates_and_reports_the_full_length() {
        let mut buf = [0x55 as c_char; 4];
        assert_eq!(copy_out("hello", buf.as_mut_ptr(), buf.len()), 5);
        let got = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(got.to_str().ok(), Some("hel"));
        assert_eq!(copy_out("hello", std::ptr::null_mut(), 0), 5);
    }

    #[test]
    fn panics_become_wl_panic() {
        let code = run("test_fn", || panic!("boom"));
        assert_eq!(code, wl_result::WL_PANIC);
        let last = crate::error::last();
        assert!(last.is_some_and(|e| e.message().contains("test_fn: boom")));
        assert_eq!(value("test_fn", 7, || panic!("again")), 7);
    }
}
