//! The page's layout: its identifying word, its size, the header and the
//! slots as `#[repr(C)]` structures of atomics, and every field's offset
//! ([`FIELDS`]) for tools and tests that read or craft pages.

use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::Duration;

/// The page's identifying word: "WLQP" and the layout version. A page whose
/// word differs is a foreign layout and is ignored (the writer polls).
pub const LAYOUT_VERSION: u32 = 2;
const MAGIC: u64 = 0x574C_5150;
pub(super) const IDENTITY: u64 = (MAGIC << 32) | LAYOUT_VERSION as u64;
/// Bytes the page takes at the start of the queue file.
pub const PAGE_BYTES: usize = 16 * 1024;
/// Waiters the page can hold; more wait by polling.
pub const SLOTS: usize = 254;
/// Where the per-slot liveness bytes start in the queue file.
pub(super) const LIVENESS_BASE: i64 = 1 << 20;

#[repr(C, align(64))]
pub(super) struct Header {
    pub(super) identity: AtomicU64,
    pub(super) next_ticket: AtomicU64,
    /// CLOCK_MONOTONIC microseconds of the last acquisition or release.
    pub(super) active_at_us: AtomicU64,
    /// CLOCK_MONOTONIC microseconds when the current holder took the lock.
    pub(super) held_since_us: AtomicU64,
    /// CLOCK_MONOTONIC microseconds until which the holder's slice is open
    /// (0: none). Releases after it wake the head.
    pub(super) slice_until_us: AtomicU64,
    /// A release within a slice: until when (CLOCK_MONOTONIC µs) the head
    /// leaves the free lock to the writer coming back (0: none).
    pub(super) comeback_until_us: AtomicU64,
    /// Bumped by every page-aware writer that takes the lock (a futex word
    /// for yielding writers).
    pub(super) acquired: AtomicU32,
    /// Writers sleeping on `acquired`.
    pub(super) yielders: AtomicU32,
    /// One past the highest slot index ever claimed (bounds the scans).
    pub(super) high_water: AtomicU32,
    /// The pid of the page-aware writer holding the lock (0: none recorded).
    pub(super) holder_pid: AtomicU32,
    /// The CPU that writer last took the lock on, plus one (0: unknown). A
    /// head woken onto the same CPU sleeps instead of spinning, which would
    /// only take the CPU from the holder.
    pub(super) holder_cpu: AtomicU32,
    /// The boot (`/proc/sys/kernel/random/boot_id`) whose CLOCK_MONOTONIC
    /// the stored times count in, in two halves (zero: unknown). A writer
    /// mapping a page of another boot clears the times first. Added in the
    /// header's spare bytes: writers that predate it leave it zero, which
    /// only costs a reset of the times.
    pub(super) boot: [AtomicU64; 2],
}

#[repr(C, align(64))]
pub(super) struct Slot {
    /// Futex word: bumped to wake this slot's waiter.
    pub(super) word: AtomicU32,
    /// The waiter's pid; 0 when the slot is free.
    pub(super) pid: AtomicU32,
    /// The waiter's ticket; 0 until published.
    pub(super) ticket: AtomicU64,
    /// Set with a wake-up that says the holder's slice ends within a few
    /// turns: the head stays running (spins) instead of sleeping again.
    pub(super) ending: AtomicU32,
    /// The CPU the waiter last went to sleep on, plus one (0: unknown).
    pub(super) cpu: AtomicU32,
    /// Set by a waiter that took a free lock this waiter left untaken for
    /// [`STALL_AFTER`](super::turn::STALL_AFTER) (stopped, frozen, swapped out): the others pass it
    /// over until it runs again and clears this, keeping its ticket.
    pub(super) skipped: AtomicU32,
    /// When the waiter drew its ticket (`CLOCK_MONOTONIC` microseconds of
    /// the page's boot), for status tools; 0 when unknown (older writers).
    pub(super) since_us: AtomicU64,
}

#[repr(C)]
pub(super) struct Layout {
    pub(super) header: Header,
    pub(super) slots: [Slot; SLOTS],
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

/// The time left in a window that ends at `until` (CLOCK_MONOTONIC µs), if
/// it is open now. A window longer than `max`, its own maximum, was not
/// written on this clock (another boot, another time namespace, a crafted
/// page) and counts as closed.
pub(super) fn window_left(until: u64, now: u64, max: Duration) -> Option<Duration> {
    let left = until.checked_sub(now).filter(|left| *left > 0)?;
    (left <= max.as_micros() as u64).then(|| Duration::from_micros(left))
}
