//! The system calls the page needs: this boot's identity, the monotonic
//! clock in microseconds, the CPU a thread runs on, the futexes, and the
//! open-file-description byte locks that back each slot's liveness.

use std::io;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use super::layout::LIVENESS_BASE;

/// This boot's identity (`/proc/sys/kernel/random/boot_id` as a number; 0
/// when unreadable), as the page stores it.
pub fn boot_id() -> u128 {
    static BOOT: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .and_then(|text| {
                let hex: String = text.chars().filter(|c| c.is_ascii_hexdigit()).collect();
                u128::from_str_radix(&hex, 16).ok()
            })
            .unwrap_or(0)
    })
}

pub(super) fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// The CPU this thread runs on, plus one (0: unknown).
pub(super) fn current_cpu() -> u32 {
    // SAFETY: no arguments; glibc answers from the vDSO.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).map_or(0, |c| c + 1)
}

pub(super) fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a shared (not private) futex wait on a word of the mapping; the
    // kernel compares the value and sleeps at most `timeout`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            seen,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0,
        );
    }
}

pub(super) fn futex_wake(word: &AtomicU32, count: i32) {
    // SAFETY: waking waiters of a shared futex word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            count,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0,
        );
    }
}

pub(super) fn ofd_lock(
    fd: i32,
    cmd: libc::c_int,
    kind: libc::c_short,
    index: usize,
) -> io::Result<libc::flock> {
    // SAFETY: zeroed flock is a valid argument; fcntl checked.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = LIVENESS_BASE + index as i64;
    fl.l_len = 1;
    fl.l_pid = 0;
    if unsafe { libc::fcntl(fd, cmd, &mut fl) } == 0 {
        Ok(fl)
    } else {
        Err(io::Error::last_os_error())
    }
}
