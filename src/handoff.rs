//! The hand-off page: waking the next writer in microseconds, in arrival
//! order.
//!
//! Exponential's driver queue polls every 1 to 15 ms and makes a writer that comes
//! back while others wait sleep a fixed 30 ms, which caps a contended
//! database at about 33 commits per second per writer. This module adds a
//! small shared page, mapped from `<db>.writer-queue` (writers that only
//! `flock()` that file never look at its content), through which a releasing
//! writer wakes the oldest waiter with a futex.
//!
//! The page is only a hint. `flock()` on `.writer-lock` stays the one truth
//! about who holds the turn, so a crash still frees it, and writers that do
//! not know the page (another program, an older driver) still exclude and
//! are still waited for by polling. Every futex wait has a timeout, so a
//! lost wake-up costs at most one poll interval, never a stall.
//!
//! **The rule.** `flock()` on `<db>.writer-lock` is the truth; the page is
//! a hint. No content of the page (stale, corrupt, from another boot,
//! crafted by another program) and no state of another process (stopped,
//! killed, a zombie) may make a writer fail on a free lock, or wait more
//! than 50 ms longer than the polling protocol alone would. Hence: every
//! value read from the page is bounded before use (a stored window longer
//! than its own maximum is over, a ticket wraps instead of overflowing,
//! indexes are clamped to the slots), times carry the boot they count in,
//! a waiter ahead counts only while its liveness lock is held, and waiters
//! that leave a free lock untaken for 50 ms are passed over until they run
//! again. The page is only created in an empty file, its blocks allocated
//! before it is mapped, and never written into a file that does not
//! already carry it. `tests/faults.rs` writes arbitrary pages and asks for
//! a free lock.
//!
//! Layout (version [`LAYOUT_VERSION`], 16 KiB): a 128-byte header, then 254
//! slots of 64 bytes, one per waiting writer. A waiter claims a free slot,
//! draws a ticket from the header's counter and sleeps on its slot's futex
//! word; only the waiter with the lowest live ticket (the head) tries the
//! lock.
//!
//! A writer that got its turn in arrival order keeps a *slice* (see
//! [`crate::wait::SLICE`]): a release within it announces that the writer is
//! coming back (for [`COMEBACK`]) instead of waking the head, so the head
//! neither steals the turn between two of the holder's transactions nor
//! costs the holder a wake-up per commit. While a slice is open the head
//! checks every [`COMEBACK`] on its own, so a holder that leaves early hands
//! over within about that long; the release that ends a slice wakes the
//! head at once. Each claimed slot is backed by an open-file-description lock on
//! one byte of the queue file (beyond the page), which the kernel drops when
//! the waiter dies, so a `kill -9`'d waiter is recognised and skipped.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::lockfiles::{try_flock, Flock, LockMode};
use crate::polling::{self, join_queue, leave_queue, others_in_queue, FilesView, Gave};
use crate::wait::{poll_pause, Deadline, YIELD};

/// The page's identifying word: "WLQP" and the layout version. A page whose
/// word differs is a foreign layout and is ignored (the writer polls).
pub const LAYOUT_VERSION: u32 = 2;
const MAGIC: u64 = 0x574C_5150;
const IDENTITY: u64 = (MAGIC << 32) | LAYOUT_VERSION as u64;
/// Bytes the page takes at the start of the queue file.
pub const PAGE_BYTES: usize = 16 * 1024;
/// Waiters the page can hold; more wait by polling.
pub const SLOTS: usize = 254;
/// Where the per-slot liveness bytes start in the queue file.
const LIVENESS_BASE: i64 = 1 << 20;
/// How often the waiter second in line checks that the head is alive (and
/// whether the lock stalled).
const RECHECK: Duration = Duration::from_millis(20);
/// How often waiters further back check: rarely, so that dozens of waiters
/// behind a long transaction do not keep the CPU from the head.
const RECHECK_FAR: Duration = Duration::from_millis(100);
/// A free lock nobody has taken for this long lets any waiter try it (a
/// head that stopped without dying, such as a SIGSTOPped process).
const STALL_AFTER: Duration = Duration::from_millis(50);
/// How long a release within a slice keeps the lock for its writer's next
/// transaction (100 µs), and how often the head checks while a slice is
/// open. A writer that does not come back within it loses its slice.
pub const COMEBACK: Duration = Duration::from_micros(100);
/// How long a head woken ahead of a slice's end stays running, looking at
/// the page instead of sleeping (500 µs): a sleeping process takes tens of
/// microseconds to wake, which the hand-over would otherwise wait for.
const SPIN: Duration = Duration::from_micros(500);

/// A writer wakes the head ahead of its slice's end when this many turns
/// or less are left in it...
pub(crate) const WAKE_AHEAD_TURNS: u32 = 4;
/// ...or this little time (150 µs).
pub(crate) const WAKE_AHEAD_TIME: Duration = Duration::from_micros(150);

/// How a release leaves the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    /// The writer's turns are over: the head is woken.
    Done,
    /// The writer's slice has turns left: it keeps the lock for
    /// [`COMEBACK`] and wakes nobody.
    ComingBack,
    /// The first release of a slice with turns left: keeps the lock and
    /// wakes the head, which from then on watches the come-back windows.
    ComingBackFirst,
    /// Coming back, but the slice ends within a few turns: the head is
    /// woken ahead, so that it is running when the lock passes to it.
    ComingBackLast,
}

#[repr(C, align(64))]
struct Header {
    identity: AtomicU64,
    next_ticket: AtomicU64,
    /// CLOCK_MONOTONIC microseconds of the last acquisition or release.
    active_at_us: AtomicU64,
    /// CLOCK_MONOTONIC microseconds when the current holder took the lock.
    held_since_us: AtomicU64,
    /// CLOCK_MONOTONIC microseconds until which the holder's slice is open
    /// (0: none). Releases after it wake the head.
    slice_until_us: AtomicU64,
    /// A release within a slice: until when (CLOCK_MONOTONIC µs) the head
    /// leaves the free lock to the writer coming back (0: none).
    comeback_until_us: AtomicU64,
    /// Bumped by every page-aware writer that takes the lock (a futex word
    /// for yielding writers).
    acquired: AtomicU32,
    /// Writers sleeping on `acquired`.
    yielders: AtomicU32,
    /// One past the highest slot index ever claimed (bounds the scans).
    high_water: AtomicU32,
    /// The pid of the page-aware writer holding the lock (0: none recorded).
    holder_pid: AtomicU32,
    /// The CPU that writer last took the lock on, plus one (0: unknown). A
    /// head woken onto the same CPU sleeps instead of spinning, which would
    /// only take the CPU from the holder.
    holder_cpu: AtomicU32,
    /// The boot (`/proc/sys/kernel/random/boot_id`) whose CLOCK_MONOTONIC
    /// the stored times count in, in two halves (zero: unknown). A writer
    /// mapping a page of another boot clears the times first. Added in the
    /// header's spare bytes: writers that predate it leave it zero, which
    /// only costs a reset of the times.
    boot: [AtomicU64; 2],
}

#[repr(C, align(64))]
struct Slot {
    /// Futex word: bumped to wake this slot's waiter.
    word: AtomicU32,
    /// The waiter's pid; 0 when the slot is free.
    pid: AtomicU32,
    /// The waiter's ticket; 0 until published.
    ticket: AtomicU64,
    /// Set with a wake-up that says the holder's slice ends within a few
    /// turns: the head stays running (spins) instead of sleeping again.
    ending: AtomicU32,
    /// The CPU the waiter last went to sleep on, plus one (0: unknown).
    cpu: AtomicU32,
    /// Set by a waiter that took a free lock this waiter left untaken for
    /// [`STALL_AFTER`] (stopped, frozen, swapped out): the others pass it
    /// over until it runs again and clears this, keeping its ticket.
    skipped: AtomicU32,
    /// When the waiter drew its ticket (`CLOCK_MONOTONIC` microseconds of
    /// the page's boot), for status tools; 0 when unknown (older writers).
    since_us: AtomicU64,
}

#[repr(C)]
struct Layout {
    header: Header,
    slots: [Slot; SLOTS],
}

const _: () = assert!(std::mem::size_of::<Layout>() == PAGE_BYTES);

/// The identifying word a page of this layout starts with (native byte
/// order), for tools and tests that read or craft pages.
pub const PAGE_IDENTITY: u64 = IDENTITY;
/// Bytes of the page's header; the slots follow it.
pub const HEADER_BYTES: usize = std::mem::offset_of!(Layout, slots);
/// Bytes of one slot.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// One field of the page's layout, for tools and tests that read or craft
/// pages: its name, offset (in the header, or in each slot) and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The field's name in the layout.
    pub name: &'static str,
    /// Whether the field is in every slot (offset from the slot's start)
    /// or in the header (offset from the page's start).
    pub in_slot: bool,
    /// Its offset.
    pub offset: usize,
    /// Its size in bytes (4 or 8, native byte order).
    pub size: usize,
}

macro_rules! fields {
    ($($ty:ident $in_slot:literal $name:ident $size:literal $(+ $extra:literal)?;)*) => {
        &[$(Field {
            name: stringify!($name),
            in_slot: $in_slot,
            offset: std::mem::offset_of!($ty, $name) $(+ $extra)?,
            size: $size,
        },)*]
    };
}

/// Every field of the layout.
pub const FIELDS: &[Field] = fields! {
    Header false identity 8;
    Header false next_ticket 8;
    Header false active_at_us 8;
    Header false held_since_us 8;
    Header false slice_until_us 8;
    Header false comeback_until_us 8;
    Header false acquired 4;
    Header false yielders 4;
    Header false high_water 4;
    Header false holder_pid 4;
    Header false holder_cpu 4;
    Header false boot 8;
    Slot true word 4;
    Slot true pid 4;
    Slot true ticket 8;
    Slot true ending 4;
    Slot true cpu 4;
    Slot true skipped 4;
    Slot true since_us 8;
};

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

/// The time left in a window that ends at `until` (CLOCK_MONOTONIC µs), if
/// it is open now. A window longer than `max`, its own maximum, was not
/// written on this clock (another boot, another time namespace, a crafted
/// page) and counts as closed.
fn window_left(until: u64, now: u64, max: Duration) -> Option<Duration> {
    let left = until.checked_sub(now).filter(|left| *left > 0)?;
    (left <= max.as_micros() as u64).then(|| Duration::from_micros(left))
}

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
    index: usize,
    ticket: u64,
}

fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// The CPU this thread runs on, plus one (0: unknown).
fn current_cpu() -> u32 {
    // SAFETY: no arguments; glibc answers from the vDSO.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).map_or(0, |c| c + 1)
}

fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
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

fn futex_wake(word: &AtomicU32, count: i32) {
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

fn ofd_lock(
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

    fn layout(&self) -> &Layout {
        // SAFETY: the mapping outlives every PageRef (owned by LockFiles,
        // which the queue keeps while a wait runs).
        unsafe { &*self.ptr }
    }

    fn slots(&self) -> &[Slot] {
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
    fn alive(&self, index: usize) -> bool {
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
    fn reap(&self, index: usize, ticket: u64) -> bool {
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
    fn rank(&self, place: Place) -> usize {
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
    fn oldest_alive(&self, own: Option<usize>) -> Option<(usize, u64)> {
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
    /// untaken for [`STALL_AFTER`]. Each clears its mark when it runs again.
    fn skip_ahead_of(&self, place: Place) {
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
    fn wake_oldest(&self, ending: bool) {
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
    fn note_acquired(&self, fresh: bool) {
        let header = &self.layout().header;
        let now = now_us();
        if fresh {
            header.slice_until_us.store(
                now + crate::wait::SLICE.as_micros() as u64,
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
                crate::wait::SLICE,
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
        let Some(left) = window_left(until, now, crate::wait::SLICE) else {
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
/// page has no free slot.
pub(crate) fn wait_for_turn(
    view: &FilesView,
    page: PageRef,
    deadline: &Deadline,
    in_slice: bool,
) -> Result<bool, Gave> {
    // Within its slice a writer takes the lock straight back if it is free.
    if in_slice && take_back_in_slice(view.lock_fd, page) {
        return Ok(true);
    }
    // A page-aware writer is on the page for as long as it holds the queue
    // file (it joins the page first and leaves it last), so writers in the
    // queue file that are not on the page are writers that can only poll.
    let Some(place) = page.join() else {
        // No slot free: this writer waits as one that can only poll.
        let result = polling::wait_for_turn(view, deadline);
        if result.is_ok() {
            page.note_acquired(true);
        }
        return result.map(|()| false);
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
    result.map(|()| false)
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

/// What a hand-off page says, read without joining it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSnapshot {
    /// The page-aware writer that recorded the current hold. A holder that
    /// does not use the page (another program) or one killed while holding
    /// may leave this unset or stale: compare it with `/proc/locks`.
    pub holder_pid: Option<u32>,
    /// How long ago that writer took the lock.
    pub held_for: Option<Duration>,
    /// Waiters with a slot on the page.
    pub waiters: usize,
    /// Those waiters in arrival order (by ticket), oldest first.
    pub queue: Vec<PageWaiter>,
}

/// A waiter with a slot on the hand-off page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageWaiter {
    /// Its pid, as it recorded it.
    pub pid: u32,
    /// Its ticket: lower tickets arrived first.
    pub ticket: u64,
    /// How long it has waited, when it stamped its arrival in this boot.
    pub waited: Option<Duration>,
}

/// Reads the hand-off page of a queue file (`<db>.writer-queue`) without
/// mapping it writable or joining it, for status tools. `None` when the file
/// has no page of this layout version.
pub fn inspect(queue_file: &std::path::Path) -> Option<PageSnapshot> {
    use std::mem::offset_of;
    use std::os::unix::fs::FileExt;
    use std::os::unix::fs::OpenOptionsExt;
    // Like the writers: never through a symlink, never blocking on a FIFO.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(queue_file)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = vec![0u8; PAGE_BYTES];
    file.read_exact_at(&mut bytes, 0).ok()?;
    let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
    if u64_at(offset_of!(Header, identity)) != IDENTITY {
        return None;
    }
    let boot = boot_id();
    let this_boot = u64_at(offset_of!(Header, boot)) == (boot >> 64) as u64
        && u64_at(offset_of!(Header, boot) + 8) == boot as u64;
    // A holder recorded before a reboot is no holder now.
    let pid = if this_boot {
        u32_at(offset_of!(Header, holder_pid))
    } else {
        0
    };
    let since = u64_at(offset_of!(Header, held_since_us));
    let slots = offset_of!(Layout, slots);
    let slot_size = std::mem::size_of::<Slot>();
    let waiters = (0..SLOTS)
        .filter(|i| u64_at(slots + i * slot_size + offset_of!(Slot, ticket)) != 0)
        .count();
    let now = now_us();
    let mut queue: Vec<PageWaiter> = (0..SLOTS)
        .filter_map(|i| {
            let at = slots + i * slot_size;
            let ticket = u64_at(at + offset_of!(Slot, ticket));
            let pid = u32_at(at + offset_of!(Slot, pid));
            let since = u64_at(at + offset_of!(Slot, since_us));
            (ticket != 0 && pid != 0).then(|| PageWaiter {
                pid,
                ticket,
                waited: (this_boot && since != 0)
                    .then(|| now.checked_sub(since).map(Duration::from_micros))
                    .flatten(),
            })
        })
        .collect();
    queue.sort_by_key(|w| w.ticket);
    Some(PageSnapshot {
        holder_pid: (pid != 0).then_some(pid),
        held_for: (pid != 0)
            .then(|| now_us().checked_sub(since).map(Duration::from_micros))
            .flatten(),
        waiters,
        queue,
    })
}
