//! The mapped page and its bookkeeping: mapping it safely, claiming and
//! leaving slots, tickets, liveness and reaping, waking the oldest waiter,
//! and what a writer records when it takes or releases the lock.

use std::sync::atomic::Ordering;

use super::layout::{window_left, Layout, Slot, IDENTITY, PAGE_BYTES, SLOTS};
use super::sys::{boot_id, current_cpu, futex_wake, now_us, ofd_lock};
use crate::slice::{Leaving, COMEBACK};

/// A mapping of the hand-off page, kept by a queue handle beside its lock files.
#[derive(Debug)]
pub struct Page {
    ptr: *mut Layout,
    fd: i32,
    /// The process that mapped it: a forked child has no copy of the
    /// mapping (`MADV_DONTFORK`), so its copy of this value unmaps nothing.
    pid: u32,
}

// SAFETY: the mapping is shared memory accessed only through atomics.
unsafe impl Send for Page {}
unsafe impl Sync for Page {}

impl Page {
    /// Maps the page from the queue file, which must be empty or carry a
    /// page of this layout (see `prepare` below for what qualifies).
    /// `None` when it does not, when its blocks cannot be allocated (a
    /// full disk), or when it carries a foreign layout: the writer polls.
    pub fn map(fd: i32) -> Option<Page> {
        if !Page::prepare(fd) {
            return None;
        }
        // SAFETY: mapping the page's range of our descriptor, whose blocks
        // were just allocated for real; the result is checked.
        unsafe {
            let ptr = libc::mmap(
                std::ptr::null_mut(),
                PAGE_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            if ptr == libc::MAP_FAILED {
                return None;
            }
            // A forked child must not inherit the mapping: it would keep the
            // queue file's open file description alive (the mapping refers
            // to it), and with it the description's byte locks (the turn's
            // mark, the waiters' liveness), after the parent died, and with
            // it the child could write into the parent's page.
            if libc::madvise(ptr, PAGE_BYTES, libc::MADV_DONTFORK) != 0 {
                libc::munmap(ptr, PAGE_BYTES);
                return None;
            }
            let page = Page {
                ptr: ptr.cast(),
                fd,
                pid: crate::process::current_pid(),
            };
            let identity = &(*page.ptr).header.identity;
            match identity.compare_exchange(0, IDENTITY, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {}
                Err(found) if found == IDENTITY => {}
                Err(_) => return None, // foreign layout: dropped, which unmaps it
            }
            page.as_ref().adopt_boot();
            Some(page)
        }
    }

    /// Checks that the queue file may carry the page and allocates its
    /// blocks. Only a regular file that is empty, holds nothing but zero
    /// bytes up to the page's size (a page being created), or already
    /// starts with a page of this layout qualifies: anything else (a file
    /// a symlink or a hard link pointed at, a page of another program) is
    /// never extended or written. The blocks are allocated for real
    /// (`posix_fallocate`), not sparse: writing through the mapping into a
    /// hole on a full file system would kill the process with SIGBUS.
    /// False: the writer polls instead.
    fn prepare(fd: i32) -> bool {
        // SAFETY: fstat into a zeroed struct; checked.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return false;
        }
        let size = usize::try_from(st.st_size).unwrap_or(usize::MAX);
        let mut bytes = vec![0u8; size.min(PAGE_BYTES)];
        if !bytes.is_empty() {
            use std::os::unix::fs::FileExt;
            // SAFETY: a File view of our descriptor that never closes it.
            let file = std::mem::ManuallyDrop::new(unsafe {
                <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd)
            });
            if file.read_exact_at(&mut bytes, 0).is_err() {
                return false;
            }
            let ours = bytes.len() >= 8
                && bytes[..8].try_into().ok().map(u64::from_ne_bytes) == Some(IDENTITY)
                && size >= PAGE_BYTES;
            if !ours && (size > PAGE_BYTES || bytes.iter().any(|b| *b != 0)) {
                return false;
            }
        }
        // SAFETY: plain system call on our descriptor.
        unsafe { libc::posix_fallocate(fd, 0, PAGE_BYTES as libc::off_t) == 0 }
    }

    /// A borrowed view for the waiting loop.
    pub(crate) fn as_ref(&self) -> PageRef {
        PageRef {
            ptr: self.ptr,
            fd: self.fd,
        }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if self.pid != crate::process::current_pid() {
            // A forked child: the range is not mapped here (MADV_DONTFORK),
            // and may hold another mapping of the child's by now.
            return;
        }
        // SAFETY: we mapped exactly this range.
        unsafe {
            libc::munmap(self.ptr.cast(), PAGE_BYTES);
        }
    }
}

/// A copyable pointer to a mapped page, valid while its [`Page`] lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageRef {
    ptr: *mut Layout,
    fd: i32,
}

/// A claimed slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    pub(super) index: usize,
    pub(super) ticket: u64,
}

impl PageRef {
    /// Makes the page's times this boot's: a page written before a reboot
    /// (or copied from another machine) has its times cleared, since its
    /// clock restarted.
    fn adopt_boot(&self) {
        let header = &self.layout().header;
        let boot = boot_id();
        let (high, low) = ((boot >> 64) as u64, boot as u64);
        if header.boot[0].load(Ordering::Acquire) == high
            && header.boot[1].load(Ordering::Acquire) == low
        {
            return;
        }
        for time in [
            &header.active_at_us,
            &header.held_since_us,
            &header.slice_until_us,
            &header.comeback_until_us,
        ] {
            time.store(0, Ordering::SeqCst);
        }
        header.holder_pid.store(0, Ordering::Release);
        header.holder_cpu.store(0, Ordering::Release);
        header.boot[0].store(high, Ordering::Release);
        header.boot[1].store(low, Ordering::Release);
    }

    pub(super) fn layout(&self) -> &Layout {
        // SAFETY: the mapping outlives every PageRef (owned by LockFiles,
        // which the queue keeps while a wait runs).
        unsafe { &*self.ptr }
    }

    pub(super) fn slots(&self) -> &[Slot] {
        let high = (self.layout().header.high_water.load(Ordering::Acquire) as usize).min(SLOTS);
        &self.layout().slots[..high]
    }

    /// Claims a slot and draws a ticket; `None` when every slot belongs to
    /// a live waiter. A free slot is taken first; failing that, the slot of
    /// a waiter that died (its liveness lock gone) is reclaimed.
    pub(crate) fn join(&self) -> Option<Place> {
        let layout = self.layout();
        let pid = crate::process::current_pid();
        // Waiters passed over as stalled are invisible to the line; any of
        // them that died since is reaped here (rare, so cheap).
        for (index, slot) in self.slots().iter().enumerate() {
            let ticket = slot.ticket.load(Ordering::Acquire);
            if ticket != 0 && slot.skipped.load(Ordering::Acquire) != 0 && !self.alive(index) {
                self.reap(index, ticket);
            }
        }
        for (index, slot) in layout.slots.iter().enumerate() {
            if slot
                .pid
                .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            if !self.lock_liveness(index) {
                // Someone else holds it: a reaper or a reclaimer, whose slot it is.
                let _ = slot
                    .pid
                    .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
                continue;
            }
            return Some(self.publish(index, pid));
        }
        // Every slot is claimed: take over one whose waiter died. The
        // liveness lock decides: whoever holds it owns the slot.
        for index in 0..SLOTS {
            if self.lock_liveness(index) {
                layout.slots[index].pid.store(pid, Ordering::Release);
                return Some(self.publish(index, pid));
            }
        }
        None
    }

    /// Takes the liveness lock of a slot; false when another open file
    /// description holds it (a live waiter).
    fn lock_liveness(&self, index: usize) -> bool {
        ofd_lock(
            self.fd,
            libc::F_OFD_SETLK,
            libc::F_WRLCK as libc::c_short,
            index,
        )
        .is_ok()
    }

    /// Fills a slot whose liveness lock we hold and draws its ticket.
    fn publish(&self, index: usize, pid: u32) -> Place {
        let layout = self.layout();
        let slot = &layout.slots[index];
        slot.pid.store(pid, Ordering::Release);
        layout
            .header
            .high_water
            .fetch_max(index as u32 + 1, Ordering::AcqRel);
        slot.ending.store(0, Ordering::Release);
        slot.cpu.store(0, Ordering::Release);
        slot.skipped.store(0, Ordering::Release);
        slot.since_us.store(now_us(), Ordering::Relaxed);
        // Tickets wrap after 2^64 draws (or from a crafted counter); 0
        // means "none", so it is drawn again.
        let draw = || {
            layout
                .header
                .next_ticket
                .fetch_add(1, Ordering::AcqRel)
                .wrapping_add(1)
        };
        let ticket = match draw() {
            0 => draw().max(1),
            ticket => ticket,
        };
        slot.ticket.store(ticket, Ordering::Release);
        Place { index, ticket }
    }

    /// Gives the slot up. The liveness lock goes last: whoever holds it
    /// owns the slot, so nobody can take the slot over before it is empty.
    pub(crate) fn leave(&self, place: Place) {
        let slot = &self.layout().slots[place.index];
        slot.ticket.store(0, Ordering::Release);
        slot.pid.store(0, Ordering::Release);
        let _ = ofd_lock(
            self.fd,
            libc::F_OFD_SETLK,
            libc::F_UNLCK as libc::c_short,
            place.index,
        );
    }

    /// True when the slot's waiter is alive (its liveness byte is locked).
    pub(super) fn alive(&self, index: usize) -> bool {
        match ofd_lock(
            self.fd,
            libc::F_OFD_GETLK,
            libc::F_WRLCK as libc::c_short,
            index,
        ) {
            Ok(fl) => fl.l_type != libc::F_UNLCK as libc::c_short,
            Err(_) => true,
        }
    }

    /// Frees a dead waiter's slot (only if it still carries `ticket`).
    /// False when the waiter turns out to be alive: the liveness lock,
    /// taken for the reaping, proves it dead and keeps joiners out.
    pub(super) fn reap(&self, index: usize, ticket: u64) -> bool {
        if !self.lock_liveness(index) {
            return false;
        }
        let slot = &self.layout().slots[index];
        if slot
            .ticket
            .compare_exchange(ticket, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            slot.pid.store(0, Ordering::Release);
        }
        let _ = ofd_lock(
            self.fd,
            libc::F_OFD_SETLK,
            libc::F_UNLCK as libc::c_short,
            index,
        );
        true
    }

    /// Published tickets of waiters not passed over, with their slots.
    fn queued(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.slots().iter().enumerate().filter_map(|(i, s)| {
            let t = s.ticket.load(Ordering::Acquire);
            (t != 0 && s.skipped.load(Ordering::Acquire) == 0).then_some((i, t))
        })
    }

    /// How many waiters are ahead of `place` (0: it is the head). Waiters
    /// passed over as stalled do not count.
    pub(super) fn rank(&self, place: Place) -> usize {
        self.queued()
            .filter(|&(i, t)| i != place.index && t < place.ticket)
            .count()
    }

    /// The slot with the lowest published ticket not passed over, if any.
    fn oldest(&self) -> Option<(usize, u64)> {
        self.queued().min_by_key(|&(_, t)| t)
    }

    /// The oldest live waiter, reaping dead ones on the way. `own` is the
    /// caller's slot, alive by definition: its liveness lock belongs to the
    /// caller's own open file description, which never conflicts with itself.
    pub(super) fn oldest_alive(&self, own: Option<usize>) -> Option<(usize, u64)> {
        // Each round reaps one slot; a page rewritten under us (another
        // program) cannot keep this loop going past twice the slots.
        for _ in 0..2 * SLOTS {
            let (index, ticket) = self.oldest()?;
            if own == Some(index) || self.alive(index) || !self.reap(index, ticket) {
                return Some((index, ticket));
            }
        }
        self.oldest()
    }

    /// Passes over every waiter ahead of `place`: they left a free lock
    /// untaken for [`STALL_AFTER`](super::turn::STALL_AFTER). Each clears its mark when it runs again.
    pub(super) fn skip_ahead_of(&self, place: Place) {
        for (index, ticket) in self.queued().collect::<Vec<_>>() {
            if index != place.index && ticket < place.ticket {
                self.layout().slots[index]
                    .skipped
                    .store(1, Ordering::Release);
            }
        }
    }

    /// Wakes the waiter with the oldest ticket. Liveness is not checked
    /// here, on every release: a dead head's wake-up is lost, and the
    /// waiters behind it reap it at their next recheck.
    ///
    /// `ending`: a wake-up ahead of the slice's end, to stay running for
    /// it. Not sent to a waiter asleep on our own CPU, where it would only
    /// preempt us: the slice's end wakes that one.
    pub(super) fn wake_oldest(&self, ending: bool) {
        let Some((index, _)) = self.oldest() else {
            return;
        };
        let slot = &self.layout().slots[index];
        if ending {
            if slot.cpu.load(Ordering::Acquire) == current_cpu() {
                return;
            }
            slot.ending.store(1, Ordering::Release);
        }
        slot.word.fetch_add(1, Ordering::AcqRel);
        futex_wake(&slot.word, 1);
    }

    /// Records that a page-aware writer took the lock, ending yields. A
    /// turn granted in arrival order (`fresh`) opens a slice.
    pub(super) fn note_acquired(&self, fresh: bool) {
        let header = &self.layout().header;
        let now = now_us();
        if fresh {
            header.slice_until_us.store(
                now + crate::slice::SLICE.as_micros() as u64,
                Ordering::SeqCst,
            );
        }
        header.held_since_us.store(now, Ordering::Release);
        header.holder_cpu.store(current_cpu(), Ordering::Release);
        header
            .holder_pid
            .store(crate::process::current_pid(), Ordering::SeqCst);
        // After the pid: a spinning head never sees neither.
        header.comeback_until_us.store(0, Ordering::SeqCst);
        header.active_at_us.store(now, Ordering::Release);
        header.acquired.fetch_add(1, Ordering::AcqRel);
        if header.yielders.load(Ordering::Acquire) > 0 {
            futex_wake(&header.acquired, i32::MAX);
        }
    }

    /// Marks activity just before the `flock()` is dropped, so that until
    /// [`PageRef::note_released`] says how the lock was left, no waiter
    /// behind the head mistakes the free lock for one the head left
    /// untaken (and passes the head over).
    pub(crate) fn note_releasing(&self) {
        self.layout()
            .header
            .active_at_us
            .store(now_us(), Ordering::Release);
    }

    /// Records a release (after the `flock()` was dropped). A writer whose
    /// slice has turns left keeps the lock for [`COMEBACK`] without waking
    /// anyone (but the head, ahead of the slice's end); any other release
    /// wakes the oldest waiter.
    pub(crate) fn note_released(&self, leaving: Leaving) {
        let header = &self.layout().header;
        let now = now_us();
        let keep = leaving != Leaving::Done
            && window_left(
                header.slice_until_us.load(Ordering::SeqCst),
                now,
                crate::slice::SLICE,
            )
            .is_some();
        if keep {
            header
                .comeback_until_us
                .store(now + COMEBACK.as_micros() as u64, Ordering::SeqCst);
        } else {
            header.comeback_until_us.store(0, Ordering::SeqCst);
            header.slice_until_us.store(0, Ordering::SeqCst);
        }
        header.holder_pid.store(0, Ordering::Release);
        header.active_at_us.store(now, Ordering::Release);
        // No sched_yield() for a next writer asleep on our CPU: measured,
        // the yielded writer stayed runnable there and later preempted the
        // new holder mid-turn (turns 19-20 µs instead of 14-15).
        if !keep || leaving == Leaving::ComingBackFirst {
            self.wake_oldest(false);
        } else if leaving == Leaving::ComingBackLast {
            self.wake_oldest(true);
        }
    }
}
