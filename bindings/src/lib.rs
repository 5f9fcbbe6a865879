//! The C ABI of writerlock: `libwriterlock.so` (soname `libwriterlock.so.0`)
//! and `libwriterlock.a`, described by `include/writerlock.h` (generated
//! from this crate by cbindgen).
//!
//! Conventions, the same for every function:
//!
//! * Objects are opaque handles with a `wl_` prefix, created by a `_new`,
//!   `_connect` or `_begin` function through an out-pointer and freed by
//!   their `_free` function (which ignores NULL). What a function returns
//!   through an out-pointer is the caller's; `const char *` results are
//!   borrowed from the object that returned them.
//! * Fallible functions return a `wl_result` (`WL_OK` is 0). The codes are
//!   stable. A failure's message and typed fields are kept for the calling
//!   thread: `wl_last_error_message`, or `wl_last_error` for an owned
//!   `wl_error` with the busy fields, SQLite's code and the SQLSTATE.
//! * NULL pointers and text that is not UTF-8 are `WL_INVALID_ARGUMENT`,
//!   never a crash; a panic inside the library is `WL_PANIC`, never an
//!   unwind into C.
//! * Seconds are `double`s; negative, infinite and NaN values are refused.
//! * The SQLite side drives the caller's own `sqlite3*`: link the same
//!   system `libsqlite3` (the library links it dynamically).

#![allow(clippy::missing_safety_doc)]

mod error;
mod ffi;
mod pg;
mod queue;
mod rows;
mod strings;

pub use error::*;
pub use pg::*;
pub use queue::*;
pub use rows::*;
pub use strings::*;

use std::ffi::c_char;

/// The default wait for a transaction's turn, in seconds
/// (`[DatabaseSettings] SQLiteTransactionWait`, 25).
pub const WL_TRANSACTION_WAIT: f64 = 25.0;

/// The default wait for a transaction's turn on the command line, in
/// seconds (`[DatabaseSettings] SQLiteCLITransactionWait`, 300).
pub const WL_CLI_TRANSACTION_WAIT: f64 = 300.0;

/// Transaction waits below this many seconds are raised to it (1).
pub const WL_MIN_TRANSACTION_WAIT: f64 = 1.0;

/// The default wait of a single write statement, in seconds
/// (`[DatabaseSettings] SQLiteBusyTimeout`, 5000 ms).
pub const WL_BUSY_TIMEOUT: f64 = 5.0;

/// The default wait of a single write statement on the command line, in
/// seconds (`[DatabaseSettings] SQLiteCLIBusyTimeout`, 30000 ms).
pub const WL_CLI_BUSY_TIMEOUT: f64 = 30.0;

/// The Postgres ledger writer lock key:
/// `SELECT pg_advisory_xact_lock(1279607879)` (0x4C454447).
pub const WL_PG_WRITER_LOCK: i64 = 1279607879;

/// The refusal lock's class id (0x4C574652).
pub const WL_PG_REFUSED_LOCK_CLASS: i32 = 1280788050;

/// The writer version this library writes as by default (1).
pub const WL_PG_VERSION: u32 = 1;

/// The writer floor this library stores by default (1).
pub const WL_PG_REQUIRED: u32 = 1;

/// The major version of the header: releases with the same major version
/// keep the ABI (the soname is `libwriterlock.so.<major>`). Compare it with
/// `wl_version()` to see which library a program runs with.
pub const WL_VERSION_MAJOR: u32 = 0;

/// The minor version of the header (new functions and codes only).
pub const WL_VERSION_MINOR: u32 = 1;

/// The patch version of the header (fixes only).
pub const WL_VERSION_PATCH: u32 = 0;

/// The version of the library running, such as `"0.1.0"` (a static string,
/// never freed). `WL_VERSION_MAJOR`, `WL_VERSION_MINOR` and
/// `WL_VERSION_PATCH` give the header's version at compile time.
#[no_mangle]
pub extern "C" fn wl_version() -> *const c_char {
    ffi::value("wl_version", std::ptr::null(), || {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use writerlock::{lockfiles, pg as core_pg, wait};

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn constants_match_the_core() {
        assert_eq!(WL_TRANSACTION_WAIT, secs(wait::TRANSACTION_WAIT));
        assert_eq!(WL_CLI_TRANSACTION_WAIT, secs(wait::CLI_TRANSACTION_WAIT));
        assert_eq!(WL_MIN_TRANSACTION_WAIT, secs(wait::MIN_TRANSACTION_WAIT));
        assert_eq!(WL_BUSY_TIMEOUT, secs(wait::BUSY_TIMEOUT));
        assert_eq!(WL_CLI_BUSY_TIMEOUT, secs(wait::CLI_BUSY_TIMEOUT));
        assert_eq!(WL_PG_WRITER_LOCK, core_pg::WRITER_LOCK);
        assert_eq!(WL_PG_REFUSED_LOCK_CLASS, core_pg::REFUSED_LOCK_CLASS);
        assert_eq!(WL_PG_VERSION, u32::from(core_pg::VERSION));
        assert_eq!(WL_PG_REQUIRED, u32::from(core_pg::REQUIRED));
    }

    /// cbindgen cannot emit string constants, so cbindgen.toml writes them
    /// by hand; they must match the core's.
    #[test]
    fn string_defines_in_the_header_match_the_core() {
        let config = include_str!("../cbindgen.toml");
        for (name, text) in [
            ("WL_TRANSACTION_SETTING", wait::TRANSACTION_SETTING),
            ("WL_CLI_TRANSACTION_SETTING", wait::CLI_TRANSACTION_SETTING),
            ("WL_BUSY_SETTING", wait::BUSY_SETTING),
            ("WL_CLI_BUSY_SETTING", wait::CLI_BUSY_SETTING),
            ("WL_LOCK_SUFFIX", lockfiles::LOCK_SUFFIX),
            ("WL_QUEUE_SUFFIX", lockfiles::QUEUE_SUFFIX),
            ("WL_PG_REFUSED_SQLSTATE", core_pg::REFUSED_SQLSTATE),
            ("WL_PG_VERSION_SETTING", core_pg::VERSION_SETTING),
            ("WL_PG_UNSEEN_CLIENT", core_pg::UNSEEN_CLIENT),
        ] {
            let line = format!("#define {name} \"{text}\"\n");
            assert!(config.contains(&line), "cbindgen.toml lacks {line}");
        }
    }

    #[test]
    fn version_matches_the_package() {
        let v = unsafe { std::ffi::CStr::from_ptr(wl_version()) };
        assert_eq!(v.to_str().ok(), Some(env!("CARGO_PKG_VERSION")));
        let macros = format!("{WL_VERSION_MAJOR}.{WL_VERSION_MINOR}.{WL_VERSION_PATCH}");
        assert_eq!(
            macros,
            env!("CARGO_PKG_VERSION"),
            "WL_VERSION_MAJOR/MINOR/PATCH in bindings/src/lib.rs must follow the workspace version"
        );
    }
}
