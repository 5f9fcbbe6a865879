//! CLOCK_MONOTONIC, shared by every process on the machine: workers start at
//! one instant and their timestamps compare across processes.

use std::time::Duration;

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reads `instant_ns` (returns at once if it
/// already has).
pub fn sleep_until(instant_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (instant_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (instant_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: an absolute sleep on CLOCK_MONOTONIC with a valid timespec.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// A duration for people: `12.3 µs`, `1.24 ms`, `14.71 s`.
pub fn human(value: i64) -> String {
    let v = value.max(0) as f64;
    if v < 1_000.0 {
        format!("{v:.0} ns")
    } else if v < 1_000_000.0 {
        format!("{:.1} µs", v / 1e3)
    } else if v < 1_000_000_000.0 {
        let ms = v / 1e6;
        if ms < 10.0 {
            format!("{ms:.2} ms")
        } else {
            format!("{ms:.1} ms")
        }
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

/// A small xorshift generator for poll pauses (no need for quality).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded from the process id and the clock.
    pub fn new() -> Rng {
        Rng((now_ns() ^ (u64::from(std::process::id()) << 32)) | 1)
    }

    /// A uniformly random duration in `[lo, hi]`, to the microsecond.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        let span = hi.saturating_sub(lo).as_micros() as u64;
        lo + Duration::from_micros(if span == 0 { 0 } else { x % (span + 1) })
    }
}

impl Default for Rng {
    fn default() -> Self {
        Rng::new()
    }
}
