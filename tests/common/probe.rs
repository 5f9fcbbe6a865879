//! Observing the queue from outside: a probe of `<db>.writer-lock` from
//! another process (the driver protocol's own `flock()`), CLOCK_MONOTONIC
//! times shared between processes, and messages that carry a measured
//! number.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use writerlock::lockfiles::lock_path;

/// What a `flock(LOCK_EX|LOCK_NB)` on the lock file from another process found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The lock was free: the probe took it and let it go at once.
    Free,
    /// `EWOULDBLOCK`: someone holds the writer's turn.
    Held,
}

/// Forks a process that opens `<db>.writer-lock` itself (its own open file
/// description, nothing inherited) and tries `flock(LOCK_EX|LOCK_NB)` on it.
pub fn probe_lock(database: &Path) -> Probe {
    probe_flock(&lock_path(database))
}

/// Forks a process that opens the file at `path` itself and tries
/// `flock(LOCK_EX|LOCK_NB)` on it: `Held` while anyone holds a `flock()` there.
pub fn probe_flock(path: &Path) -> Probe {
    let path =
        std::ffi::CString::new(path.as_os_str().as_bytes().to_vec()).expect("a path without NUL");
    let child = super::fork(move || {
        // SAFETY: plain system calls on a path we own; results checked.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return 3;
        }
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            unsafe { libc::flock(fd, libc::LOCK_UN) };
            return 0;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EWOULDBLOCK) => 1,
            _ => 2,
        }
    });
    match super::wait(child) {
        0 => Probe::Free,
        1 => Probe::Held,
        code => panic!("the probe of the lock file failed (exit {code})"),
    }
}

/// CLOCK_MONOTONIC in microseconds: one clock for every process on the machine.
pub fn mono_us() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1_000
}

/// Appends one line to a file shared by several processes, in one
/// `write()` (O_APPEND keeps lines whole).
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

/// `(enter_us, leave_us, pid)` turns recorded with [`append_line`] as
/// `"enter leave pid"`, sorted by enter.
pub fn read_turns(path: &Path) -> Vec<(i64, i64, i64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut turns: Vec<(i64, i64, i64)> = text
        .lines()
        .map(|line| {
            let v: Vec<i64> = line
                .split_whitespace()
                .map(|x| x.parse().expect("a number"))
                .collect();
            (v[0], v[1], v[2])
        })
        .collect();
    turns.sort();
    turns
}

/// Asserts that no two recorded turns overlap.
pub fn assert_no_overlap(turns: &[(i64, i64, i64)]) {
    for pair in turns.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "two writers held the turn at once: pid {} entered at {} µs, before pid {} left at {} µs",
            pair[1].2,
            pair[1].0,
            pair[0].2,
            pair[0].1
        );
    }
}

/// Asserts that `text` is exactly `template` with its one `{}` replaced by
/// a number of seconds with one decimal, and that the number lies within
/// `[low, high]`; returns it. For messages that carry a measured wait.
pub fn assert_measured(text: &str, template: &str, low: f64, high: f64) -> f64 {
    let (before, after) = template.split_once("{}").expect("a template with one {}");
    assert!(
        text.starts_with(before)
            && text.ends_with(after)
            && text.len() > before.len() + after.len(),
        "the message does not read as expected:\n  got:  {text}\n  want: {template}"
    );
    let number = &text[before.len()..text.len() - after.len()];
    let decimals = number.split_once('.').map(|(_, d)| d.len());
    assert_eq!(decimals, Some(1), "not one decimal: {number:?} in {text}");
    let value: f64 = number
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {number:?} in {text}"));
    assert!(
        (low..=high).contains(&value),
        "measured {value} s, outside [{low}, {high}]: {text}"
    );
    value
}
