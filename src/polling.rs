//! Polling: the protocol of Exponential's driver, and the primitives both
//! waiting strategies share.
//!
//! A waiting writer holds a shared `flock()` on `<db>.writer-queue` (so the
//! others see a writer waiting) and tries an exclusive `flock()` on
//! `<db>.writer-lock` every 1 to 15 ms (1 to 5 ms after a second of
//! waiting); one that finds the lock free while others wait leaves it to
//! them for 30 ms first. The hand-off page ([`crate::handoff`]) builds on
//! these primitives; this module knows nothing of it.

use std::time::Duration;

use crate::lockfiles::{self, try_flock, Flock, LockMode};
use crate::wait::{poll_pause, Deadline, YIELD};

/// The descriptors a waiting loop needs, copied out of the queue's state so
/// that no mutex is held while waiting (a fork during the wait must not
/// leave a child with a locked mutex).
#[derive(Clone, Copy)]
pub(crate) struct FilesView {
    pub(crate) lock_fd: i32,
    pub(crate) queue_fd: i32,
}

/// Why a waiting loop stopped without the lock.
pub(crate) enum Gave {
    /// The deadline passed.
    Up,
    /// The wait's interrupt check asked to stop.
    Interrupted,
    /// A system call failed.
    Failed(std::io::Error),
}

/// Joins the waiting writers (a shared lock on the queue file), first
/// noting whether others were already waiting. Returns that.
pub(crate) fn join_queue(view: &FilesView, deadline: &Deadline) -> Result<bool, Gave> {
    let others = match try_flock(view.queue_fd, LockMode::Exclusive) {
        Ok(Flock::Taken) => false,
        Ok(Flock::Held) => true,
        Err(e) => return Err(Gave::Failed(e)),
    };
    // Convert (or take) a shared lock. Only another writer's momentary probe
    // can hold the exclusive one, so this loop ends within microseconds
    // (unless another program holds it: then the limit and the interrupt
    // check end it).
    loop {
        match try_flock(view.queue_fd, LockMode::Shared) {
            Ok(Flock::Taken) => return Ok(others),
            Ok(Flock::Held) if deadline.passed() => return Err(Gave::Up),
            Ok(Flock::Held) => {
                if !deadline.sleep(Duration::from_micros(200)) {
                    return Err(Gave::Interrupted);
                }
            }
            Err(e) => return Err(Gave::Failed(e)),
        }
    }
}

/// Leaves the waiting writers.
pub(crate) fn leave_queue(view: &FilesView) {
    let _ = lockfiles::unlock(view.queue_fd);
}

/// Exponential's driver protocol: polls of 1 to 15 ms (1 to 5 ms after a second of
/// waiting), and a 30 ms yield when the lock is free while others wait.
pub(crate) fn wait_for_turn(view: &FilesView, deadline: &Deadline) -> Result<(), Gave> {
    // The queue file is left however the wait ends, unwinding included (a
    // panic in a host's interrupt check): a writer that is gone must not
    // stay in the queue, where every other writer would yield to it.
    let _leave = LeaveQueue(view);
    let others = join_queue(view, deadline)?;
    if others && !deadline.sleep(YIELD) {
        return Err(Gave::Interrupted);
    }
    poll_lock(view, deadline)
}

/// Leaves the queue file when dropped (see [`leave_queue`]).
struct LeaveQueue<'a>(&'a FilesView);

impl Drop for LeaveQueue<'_> {
    fn drop(&mut self) {
        leave_queue(self.0);
    }
}

/// Tries the lock until taken or the deadline passes, pausing 1 to 15 ms
/// between tries (1 to 5 ms after a second of waiting).
pub(crate) fn poll_lock(view: &FilesView, deadline: &Deadline) -> Result<(), Gave> {
    loop {
        match try_flock(view.lock_fd, LockMode::Exclusive) {
            Ok(Flock::Taken) => return Ok(()),
            Ok(Flock::Held) => {}
            Err(e) => return Err(Gave::Failed(e)),
        }
        if deadline.passed() {
            return Err(Gave::Up);
        }
        if !deadline.sleep(poll_pause(deadline.waited())) {
            return Err(Gave::Interrupted);
        }
    }
}

/// Whether writers other than us hold the queue file (we hold it shared):
/// probed by converting our lock to exclusive, then back to shared.
pub(crate) fn others_in_queue(view: &FilesView, deadline: &Deadline) -> Result<bool, Gave> {
    match try_flock(view.queue_fd, LockMode::Exclusive) {
        Ok(Flock::Taken) => {
            join_queue(view, deadline)?;
            Ok(false)
        }
        // The failed conversion dropped our shared lock: take it again.
        Ok(Flock::Held) => join_queue(view, deadline).map(|_| true),
        Err(e) => Err(Gave::Failed(e)),
    }
}
