//! `writerlock.so`: the writerlock SQLite write queue for PHP.
//!
//! Loaded with `extension=writerlock.so`, it registers (module `writerlock`):
//!
//! * `WriterLock\Queue`: a database's write queue for PHP's `\SQLite3`
//!   (`begin`, `commit`, `rollback`, `exec`, `holding`, `lastWait`);
//! * `WriterLock\Exception` (a `\RuntimeException`), and below it
//!   `WriterLock\BusyException` (the wait ran out: `waited()`, `limit()`,
//!   `setting()`, `holderPid()`) and `WriterLock\StartException` (the
//!   transaction could not start).
//!
//! The queue is the Rust core's [`writerlock::WriterQueue`]: writers of one
//! database take turns across processes (PHP-FPM workers, CLI scripts,
//! forked children) before `BEGIN IMMEDIATE`, with wall-clock deadlines of
//! their own (PHP's `max_execution_time` does not count time spent waiting
//! in system calls). Messages are the core's, word for word.

mod direct;
mod exceptions;
mod interrupt;
mod kinds;
mod queue;
mod session;
mod zend;

use std::ffi::c_int;

use ext_php_rs::prelude::*;
use ext_php_rs::zend::ModuleEntry;
use ext_php_rs::{info_table_end, info_table_header, info_table_row, info_table_start};
use writerlock::lockfiles::{LOCK_SUFFIX, QUEUE_SUFFIX};
use writerlock::wait;

pub use queue::Queue;

/// The extension's version (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Module startup: the exception classes (plain PHP exceptions, see
/// [`exceptions`]). `WriterLock\Queue` is registered by the module builder.
extern "C" fn startup(_type: c_int, _module_number: c_int) -> c_int {
    match std::panic::catch_unwind(exceptions::register) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("writerlock: could not register the WriterLock exception classes: {e}");
            -1
        }
        Err(_) => {
            eprintln!("writerlock: registering the WriterLock exception classes panicked");
            -1
        }
    }
}

/// Request shutdown: a writer turn never outlives its request (the request's
/// `SQLite3` objects close, and roll back, with it).
extern "C" fn request_shutdown(_type: c_int, _module_number: c_int) -> c_int {
    let _ = std::panic::catch_unwind(queue::release_all);
    0
}

/// The `writerlock` section of `phpinfo()`.
extern "C" fn info(_module: *mut ModuleEntry) {
    let _ = std::panic::catch_unwind(|| {
        let (queues, transactions) = queue::worker_figures();
        info_table_start!();
        info_table_header!("writerlock", "enabled");
        info_table_row!("Version", VERSION);
        info_table_row!(
            "Lock files",
            format!("<database>{LOCK_SUFFIX}, <database>{QUEUE_SUFFIX}")
        );
        info_table_row!(
            "Default waits ([DatabaseSettings])",
            format!(
                "SQLiteTransactionWait {} s, SQLiteCLITransactionWait {} s, SQLiteBusyTimeout {} ms, \
                 SQLiteCLIBusyTimeout {} ms",
                wait::TRANSACTION_WAIT.as_secs(),
                wait::CLI_TRANSACTION_WAIT.as_secs(),
                wait::BUSY_TIMEOUT.as_millis(),
                wait::CLI_BUSY_TIMEOUT.as_millis()
            )
        );
        info_table_row!("Queues kept open by this process", queues.to_string());
        info_table_row!(
            "Queued transactions begun by this process",
            transactions.to_string()
        );
        info_table_end!();
    });
}

/// The module: `writerlock`, its classes, startup, request shutdown and
/// phpinfo section.
#[php_module]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    module
        .name("writerlock")
        .version(VERSION)
        .startup_function(startup)
        .request_shutdown_function(request_shutdown)
        .info_function(info)
        .class::<Queue>()
}
