//! Waits a person can interrupt, and that never outlive `max_execution_time`.
//!
//! A waiting writer sits in system calls, where PHP neither runs signal
//! handlers nor counts time against `max_execution_time` (PHP's timer counts
//! the CPU time the script uses, `ITIMER_PROF`). So every wait here carries a
//! core [`Interrupt`] check that ends it early when
//!
//! * a signal arrived for which `pcntl_async_signals(true)` is on: pcntl's C
//!   handler raises `EG(vm_interrupt)`, the flag PHP's VM itself checks; the
//!   queue then runs the PHP handlers (`pcntl_signal_dispatch()`): an
//!   exception a handler throws, or its `exit()`, propagates with the turn
//!   not taken and nothing written, and a handler that returns lets the wait
//!   go on for the time left of it;
//! * the time left before `max_execution_time` (what PHP's timer has left,
//!   which `set_time_limit()` restarts) runs out first: the wait ends as the
//!   busy exception with `max_execution_time` as its limit and setting.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ext_php_rs::types::ZendCallable;
use ext_php_rs::zend::ExecutorGlobals;
use writerlock::wait::Interrupt;
use writerlock::{Busy, BusyKind, Error, Wait};

use crate::zend::{clear_vm_interrupt, timed_out, vm_interrupt};

/// The setting named by a wait that `max_execution_time` cut short.
pub const TIME_LIMIT_SETTING: &str = "max_execution_time";

/// How long after the end a wait the core would go on with is stopped.
const DEADLINE_GRACE: Duration = Duration::from_millis(15);

const NOT_FIRED: u8 = 0;
const SIGNAL: u8 = 1;
const DEADLINE: u8 = 2;

/// The time PHP's execution timer has left (`max_execution_time`, or what
/// `set_time_limit()` set, minus the CPU time used since); `None` when no
/// limit is set (the command line's default).
fn php_time_left() -> Option<Duration> {
    // SAFETY: a plain read of the executor globals (set_time_limit() and the
    // INI setting write it on this thread): no limit needs no system call.
    let limit = unsafe {
        std::ptr::read_volatile(std::ptr::addr_of!(
            ext_php_rs::ffi::executor_globals.timeout_seconds
        ))
    };
    if limit <= 0 {
        return None;
    }
    let mut timer = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: getitimer writes the struct it is given.
    if unsafe { libc::getitimer(libc::ITIMER_PROF, &mut timer) } != 0 {
        return None;
    }
    let secs = u64::try_from(timer.it_value.tv_sec).unwrap_or(0);
    let micros = u32::try_from(timer.it_value.tv_usec).unwrap_or(0);
    let left = Duration::from_secs(secs) + Duration::from_micros(u64::from(micros));
    (!left.is_zero()).then_some(left)
}

/// `max_execution_time` as set (`ini_get()`, which `set_time_limit()`
/// changes too), in whole seconds; `None` when it is 0 (no limit) or
/// cannot be read.
fn configured_time_limit() -> Option<Duration> {
    let ini_get = ZendCallable::try_from_name("ini_get").ok()?;
    let value = ini_get.try_call(vec![&TIME_LIMIT_SETTING]).ok()?;
    let secs: u64 = value.str()?.trim().parse().ok()?;
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// How a wait through [`run`] ended without the turn.
pub(crate) enum Stopped {
    /// A core error (busy with the caller's own limit, or anything else).
    Core(Error),
    /// A signal handler threw (or called `exit()`): that exception is
    /// pending in the engine and propagates as it is (an exception thrown
    /// over it would be dropped).
    HandlerThrew,
}

/// Runs `attempt` (a core wait) with the caller's `limit` and `setting`
/// under the two checks above, again after signal handlers that return,
/// until it ends.
pub(crate) fn run<T>(
    kind: BusyKind,
    limit: Duration,
    setting: &str,
    make_wait: impl Fn(Duration) -> Wait,
    holder: impl Fn() -> Option<u32>,
    mut attempt: impl FnMut(&Wait) -> Result<T, Error>,
) -> Result<T, Stopped> {
    let started = Instant::now();
    let time_left = php_time_left();
    // The earlier of the two ends, with the limit and setting it names.
    let (end_limit, end_setting) = match time_left {
        Some(left) if left < limit => (left, TIME_LIMIT_SETTING.to_string()),
        _ => (limit, setting.to_string()),
    };
    // The limit the message quotes: the setting's own value ("5 s" for
    // max_execution_time=5), not the CPU time its timer had left ("4.976 s").
    let quoted_limit = if end_setting == TIME_LIMIT_SETTING {
        configured_time_limit().unwrap_or(end_limit)
    } else {
        end_limit
    };
    let end = started + end_limit;
    loop {
        let remaining = end.saturating_duration_since(Instant::now());
        let wait = make_wait(remaining.max(Duration::from_millis(1)));
        // The core ends a wait at its own limit (and names the holder); the
        // check ends only what the core would let run on: a transaction's
        // wait that its 1 s minimum raised past the end.
        let watch_end = wait.limit() > remaining + DEADLINE_GRACE;
        let fired = Arc::new(AtomicU8::new(NOT_FIRED));
        let flag = Arc::clone(&fired);
        let check = Interrupt::new(move || {
            if watch_end && Instant::now() >= end + DEADLINE_GRACE {
                flag.store(DEADLINE, Ordering::Relaxed);
                return true;
            }
            if vm_interrupt() {
                flag.store(SIGNAL, Ordering::Relaxed);
                return true;
            }
            false
        });
        let wait = wait.with_setting(end_setting.clone()).with_interrupt(check);
        let busy = |waited: Duration| {
            Stopped::Core(Error::Busy(Busy {
                kind,
                waited,
                limit: quoted_limit,
                setting: end_setting.clone(),
                holder_pid: holder(),
                outside_pid: None,
            }))
        };
        match attempt(&wait) {
            Ok(value) => return Ok(value),
            Err(Error::Interrupted { .. }) => match fired.load(Ordering::Relaxed) {
                DEADLINE => return Err(busy(started.elapsed())),
                SIGNAL => {
                    if timed_out() {
                        // PHP's own timer fired: the VM ends the script with
                        // its fatal error as soon as control returns.
                        return Err(busy(started.elapsed()));
                    }
                    if dispatch_signals() {
                        return Err(Stopped::HandlerThrew);
                    }
                    clear_vm_interrupt();
                    if Instant::now() >= end {
                        return Err(busy(started.elapsed()));
                    }
                }
                _ => {
                    return Err(Stopped::Core(Error::Interrupted {
                        kind,
                        waited: started.elapsed(),
                    }))
                }
            },
            Err(Error::Busy(b)) => {
                // The core's own end, at `remaining`: the whole wait, with the
                // limit and setting it ran into.
                return Err(Stopped::Core(Error::Busy(Busy {
                    kind,
                    waited: b.waited.max(started.elapsed()),
                    limit: quoted_limit,
                    setting: end_setting.clone(),
                    holder_pid: b.holder_pid,
                    outside_pid: b.outside_pid,
                })));
            }
            Err(other) => return Err(Stopped::Core(other)),
        }
    }
}

/// Runs the PHP signal handlers of pending signals (`pcntl_signal_dispatch()`);
/// true when one of them threw (its `exit()` included), which is left
/// pending.
fn dispatch_signals() -> bool {
    if let Ok(dispatch) = ZendCallable::try_from_name("pcntl_signal_dispatch") {
        let _ = dispatch.try_call(vec![]);
    }
    ExecutorGlobals::has_exception()
}
