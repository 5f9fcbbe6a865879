//! The wait for the turn through the page: the head tries the lock, the
//! others sleep on their slot's futex and recheck that those ahead live;
//! the come-back windows of a holder's slice, the spin of a head woken
//! ahead of a slice's end, stalled heads passed over, and the yield to
//! writers that can only poll.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::layout::window_left;
use super::page::{PageRef, Place};
use super::sys::{current_cpu, futex_wait, now_us};
use crate::lockfiles::{try_flock, Flock, LockMode};
use crate::polling::{self, join_queue, leave_queue, others_in_queue, FilesView, Gave};
use crate::slice::COMEBACK;
use crate::wait::{poll_pause, Deadline, YIELD};

/// How often the waiter second in line checks that the head is alive (and
/// whether the lock stalled).
const RECHECK: Duration = Duration::from_millis(20);
/// How often waiters further back check: rarely, so that dozens of waiters
/// behind a long transaction do not keep the CPU from the head.
const RECHECK_FAR: Duration = Duration::from_millis(100);
/// A free lock nobody has taken for this long lets any waiter try it (a
/// head that stopped without dying, such as a SIGSTOPped process).
pub(super) const STALL_AFTER: Duration = Duration::from_millis(50);
/// How long a head woken ahead of a slice's end stays running, looking at
/// the page instead of sleeping (500 µs): a sleeping process takes tens of
/// microseconds to wake, which the hand-over would otherwise wait for.
const SPIN: Duration = Duration::from_micros(500);

impl PageRef {
    /// For a head woken ahead of a slice's end: waits, running, until the
    /// lock looks free to take (no holder recorded, no come-back window),
    /// `until` (CLOCK_MONOTONIC µs) or the deadline. False when time ran out.
    fn spin_until_free(&self, until: u64, deadline: &Deadline) -> bool {
        let header = &self.layout().header;
        let mut looks = 0u32;
        loop {
            let now = now_us();
            if header.holder_pid.load(Ordering::Acquire) == 0
                && window_left(
                    header.comeback_until_us.load(Ordering::Acquire),
                    now,
                    COMEBACK,
                )
                .is_none()
            {
                return true;
            }
            // Woken onto the holder's CPU, spinning would only slow the
            // holder down: sleep instead; the slice's end wakes us.
            if now >= until || deadline.passed() || self.on_holders_cpu() {
                return false;
            }
            looks += 1;
            if looks % 16 == 0 {
                // Leave the CPU to the holder if it shares ours.
                // SAFETY: no arguments.
                unsafe { libc::sched_yield() };
            } else {
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// Whether the head may try the lock now, and when it should look
    /// again if sooner than its usual poll: at the end of a holder's
    /// come-back window, or, while a slice is open (its releases wake
    /// nobody), every [`COMEBACK`]. A head that sleeps on the holder's CPU
    /// sleeps to the slice's end instead: every wake-up there would preempt
    /// the holder.
    fn head_pause(&self) -> (bool, Option<Duration>) {
        let header = &self.layout().header;
        let now = now_us();
        let back = header.comeback_until_us.load(Ordering::SeqCst);
        if let Some(left) = window_left(back, now, COMEBACK) {
            return (false, Some(left));
        }
        let until = header.slice_until_us.load(Ordering::SeqCst);
        let Some(left) = window_left(until, now, crate::slice::SLICE) else {
            return (true, None);
        };
        if self.on_holders_cpu() {
            (true, Some(left))
        } else {
            (true, Some(COMEBACK))
        }
    }

    /// Whether this thread runs on the CPU the holder last took the lock on.
    fn on_holders_cpu(&self) -> bool {
        let cpu = current_cpu();
        cpu != 0 && cpu == self.layout().header.holder_cpu.load(Ordering::Acquire)
    }

    /// True when no page-aware writer took or released the lock for longer
    /// than [`STALL_AFTER`]: a head that should have taken a free lock by
    /// now may have stopped, so any waiter may try it (a held lock just
    /// refuses the try).
    fn stalled(&self) -> bool {
        let header = &self.layout().header;
        let now = now_us();
        let active = header.active_at_us.load(Ordering::Acquire);
        // A time ahead of this clock was not written on it: unknown, so
        // stalled. (Writers of this clock store times a moment before our
        // reading, never much after.)
        let stall = STALL_AFTER.as_micros() as u64;
        match now.checked_sub(active) {
            Some(since) => since > stall,
            None => active - now > stall,
        }
    }

    /// Sleeps up to `limit` or until a page-aware writer takes the lock.
    /// False when the wait's interrupt check ended the sleep.
    fn yield_to_others(&self, limit: Duration, wait: &Deadline) -> bool {
        let header = &self.layout().header;
        let seen = header.acquired.load(Ordering::Acquire);
        header.yielders.fetch_add(1, Ordering::AcqRel);
        let deadline = Deadline::after(limit);
        let mut interrupted = false;
        while header.acquired.load(Ordering::Acquire) == seen && !deadline.passed() {
            futex_wait(&header.acquired, seen, wait.nap(deadline.left()));
            if wait.interrupted() {
                interrupted = true;
                break;
            }
        }
        header.yielders.fetch_sub(1, Ordering::AcqRel);
        !interrupted
    }

    /// Live waiters on the page other than `place`. A waiter passed over
    /// as stalled that has since died is reaped here (nothing else looks
    /// at passed-over slots until every slot is taken).
    fn others_waiting(&self, place: Place) -> bool {
        self.slots().iter().enumerate().any(|(i, s)| {
            let ticket = s.ticket.load(Ordering::Acquire);
            if i == place.index || ticket == 0 {
                return false;
            }
            if s.skipped.load(Ordering::Acquire) != 0 && !self.alive(i) {
                return !self.reap(i, ticket);
            }
            true
        })
    }
}

/// Within its slice a writer takes the lock straight back if it is free,
/// without waiting: true when it did.
pub(crate) fn take_back_in_slice(lock_fd: i32, page: PageRef) -> bool {
    if let Ok(Flock::Taken) = try_flock(lock_fd, LockMode::Exclusive) {
        page.note_acquired(false);
        return true;
    }
    false
}

/// Waits for the turn through the page; falls back to polling when the
/// page has no free slot. (A turn taken straight back within a slice never
/// gets here: the queue tries [`take_back_in_slice`] first.)
pub(crate) fn wait_for_turn(
    view: &FilesView,
    page: PageRef,
    deadline: &Deadline,
) -> Result<(), Gave> {
    // A page-aware writer is on the page for as long as it holds the queue
    // file (it joins the page first and leaves it last), so writers in the
    // queue file that are not on the page are writers that can only poll.
    let Some(place) = page.join() else {
        // No slot free: this writer waits as one that can only poll.
        let result = polling::wait_for_turn(view, deadline);
        if result.is_ok() {
            page.note_acquired(true);
        }
        return result;
    };
    // On unwinding (a panic in a host's interrupt check, here or while
    // joining the queue file) the slot and the queue file are left, so the
    // others do not wait behind a ghost.
    let unwinding = LeaveOnUnwind { view, page, place };
    let others = match join_queue(view, deadline) {
        Ok(others) => others,
        Err(gave) => {
            std::mem::forget(unwinding);
            leave_queue(view);
            page.leave(place);
            return Err(gave);
        }
    };
    // Writers hold the queue file but none is on the page: they can only
    // poll, so once we find the lock free we leave it to them for up to
    // 30 ms (checked again then, as they may have taken and left it).
    let mut may_yield = others && !page.others_waiting(place);
    // Woken ahead of a slice's end: stay running until then.
    let mut spin_until: Option<u64> = None;
    let result = (|| loop {
        let slot = &page.layout().slots[place.index];
        let seen = slot.word.load(Ordering::Acquire);
        // Running again: no longer passed over (the ticket kept our place).
        if slot.skipped.load(Ordering::Relaxed) != 0 {
            slot.skipped.store(0, Ordering::Release);
        }
        let mut rank = page.rank(place);
        if rank > 0 {
            // Whoever is ahead may have died (or never lived: a crafted
            // page): reap the dead from the front before waiting on them.
            let _ = page.oldest_alive(Some(place.index));
            rank = page.rank(place);
        }
        let head = rank == 0;
        let mut soon = None;
        if !head {
            spin_until = None;
        }
        if let Some(until) = spin_until {
            if !page.spin_until_free(until, deadline) {
                spin_until = None;
            }
        }
        if head {
            let (may_try, pause) = page.head_pause();
            soon = pause;
            if may_try {
                match try_flock(view.lock_fd, LockMode::Exclusive) {
                    Ok(Flock::Taken) => {
                        if !may_yield {
                            return Ok(());
                        }
                        may_yield = false;
                        if others_in_queue(view, deadline)? && !page.others_waiting(place) {
                            let _ = crate::lockfiles::unlock(view.lock_fd);
                            if !page.yield_to_others(YIELD.min(deadline.left()), deadline) {
                                return Err(Gave::Interrupted);
                            }
                            continue;
                        }
                        return Ok(());
                    }
                    Ok(Flock::Held) => {}
                    Err(e) => return Err(Gave::Failed(e)),
                }
            }
        } else if page.stalled() {
            // Those ahead have not taken a free lock for a while: stopped
            // without dying (SIGSTOP, a debugger, a frozen container) or
            // swapped out. A waiter behind may take it, and passes them
            // over until they run again.
            if let Ok(Flock::Taken) = try_flock(view.lock_fd, LockMode::Exclusive) {
                page.skip_ahead_of(place);
                return Ok(());
            }
        }
        if deadline.passed() {
            return Err(Gave::Up);
        }
        if deadline.interrupted() {
            return Err(Gave::Interrupted);
        }
        if spin_until.is_some() {
            continue;
        }
        let timeout = match rank {
            0 => soon.unwrap_or_else(|| poll_pause(deadline.waited())),
            1 => RECHECK,
            _ => RECHECK_FAR,
        };
        slot.cpu.store(current_cpu(), Ordering::Relaxed);
        if !sleep_on(&slot.word, seen, timeout, deadline) {
            return Err(Gave::Interrupted);
        }
        if slot.ending.swap(0, Ordering::AcqRel) != 0 {
            spin_until = Some(now_us() + SPIN.as_micros() as u64);
        }
    })();
    std::mem::forget(unwinding);
    // Record the new slice before leaving the page, so the waiter that
    // becomes head next already sees it open.
    if result.is_ok() {
        page.note_acquired(true);
    }
    leave_queue(view);
    page.leave(place);
    if result.is_err() {
        // Gave up: pass the wake-up on in case it was meant for us.
        page.wake_oldest(false);
    }
    result
}

/// Leaves the queue file and the page's slot if a wait unwinds.
struct LeaveOnUnwind<'a> {
    view: &'a FilesView,
    page: PageRef,
    place: Place,
}

impl Drop for LeaveOnUnwind<'_> {
    fn drop(&mut self) {
        leave_queue(self.view);
        self.page.leave(self.place);
        self.page.wake_oldest(false);
    }
}

/// Sleeps on a futex word until it moves from `seen` or `timeout` passes
/// (at most the time left), running the wait's interrupt check at least
/// every [`crate::wait::INTERRUPT_CHECK`]. False when the check ended it.
fn sleep_on(word: &AtomicU32, seen: u32, timeout: Duration, deadline: &Deadline) -> bool {
    let until = std::time::Instant::now() + timeout.min(deadline.left());
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || word.load(Ordering::Acquire) != seen {
            return true;
        }
        futex_wait(word, seen, deadline.nap(left));
        if deadline.interrupted() {
            return false;
        }
    }
}
