//! A writer that knows only the lock files, written here from the description
//! of Exponential's driver and nothing of the core: an exclusive `flock()` on
//! `<db>.writer-lock`, tried every 1 to 15 ms (1 to 5 ms after a second),
//! a shared `flock()` on `<db>.writer-queue` while it waits, and a 30 ms
//! yield when it finds others waiting. It stands for another program (or
//! Exponential's stock PHP driver) that never maps the hand-off page.
//!
//! Without the queue file and the yield ([`DriverLock::hot`]) it is a plain
//! `flock()` loop: the "yield off" hot loop of scenario 5.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use crate::clock::{now_ns, Rng};

const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(15);
const PATIENT_POLL_MAX: Duration = Duration::from_millis(5);
const PATIENT_AFTER: Duration = Duration::from_secs(1);
const YIELD: Duration = Duration::from_millis(30);

/// One process's lock files, opened once.
#[derive(Debug)]
pub struct DriverLock {
    lock: File,
    queue: File,
    joins_queue: bool,
    rng: Rng,
}

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

fn suffixed(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// `flock(fd, op | LOCK_NB)`: `Ok(true)` when taken, `Ok(false)` when held
/// by someone else.
fn try_flock(file: &File, op: libc::c_int) -> io::Result<bool> {
    loop {
        // SAFETY: a plain system call on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(err),
        }
    }
}

fn unlock(file: &File) -> io::Result<()> {
    // SAFETY: a plain system call on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl DriverLock {
    /// Exponential's driver protocol: joins the queue file while waiting and yields.
    pub fn queued(db: &Path) -> io::Result<DriverLock> {
        DriverLock::open(db, true)
    }

    /// A plain `flock()` loop on `.writer-lock`: no queue file, no yield.
    pub fn hot(db: &Path) -> io::Result<DriverLock> {
        DriverLock::open(db, false)
    }

    fn open(db: &Path, joins_queue: bool) -> io::Result<DriverLock> {
        Ok(DriverLock {
            lock: open(&suffixed(db, writerlock::lockfiles::LOCK_SUFFIX))?,
            queue: open(&suffixed(db, writerlock::lockfiles::QUEUE_SUFFIX))?,
            joins_queue,
            rng: Rng::new(),
        })
    }

    /// Waits up to `limit` for the lock: `Ok(true)` when taken.
    pub fn acquire(&mut self, limit: Duration) -> io::Result<bool> {
        let start = now_ns();
        let end = start + limit.as_nanos() as u64;
        let left = |now: u64| Duration::from_nanos(end.saturating_sub(now));
        if self.joins_queue {
            // Others waiting? (an exclusive try on the queue file), then wait
            // with a shared lock on it.
            let alone = try_flock(&self.queue, libc::LOCK_EX)?;
            while !try_flock(&self.queue, libc::LOCK_SH)? {
                if now_ns() >= end {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            if !alone {
                std::thread::sleep(YIELD.min(left(now_ns())));
            }
        }
        let taken = loop {
            if try_flock(&self.lock, libc::LOCK_EX)? {
                break true;
            }
            let now = now_ns();
            if now >= end {
                break false;
            }
            let waited = Duration::from_nanos(now - start);
            let pause = if waited > PATIENT_AFTER {
                self.rng.between(POLL_MIN, PATIENT_POLL_MAX)
            } else {
                self.rng.between(POLL_MIN, POLL_MAX)
            };
            std::thread::sleep(pause.min(left(now)));
        };
        if self.joins_queue {
            unlock(&self.queue)?;
        }
        Ok(taken)
    }

    /// Gives the lock back.
    pub fn release(&self) -> io::Result<()> {
        unlock(&self.lock)
    }
}
