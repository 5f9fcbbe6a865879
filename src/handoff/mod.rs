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
//! already carry it. `tests/faults_page.rs` writes arbitrary pages and asks for
//! a free lock.
//!
//! Layout (version [`LAYOUT_VERSION`], 16 KiB): a 128-byte header, then 254
//! slots of 64 bytes, one per waiting writer. A waiter claims a free slot,
//! draws a ticket from the header's counter and sleeps on its slot's futex
//! word; only the waiter with the lowest live ticket (the head) tries the
//! lock.
//!
//! A writer that got its turn in arrival order keeps a *slice* (see
//! [`crate::slice`]): a release within it announces that the writer is
//! coming back (for [`COMEBACK`]) instead of waking the head, so the head
//! neither steals the turn between two of the holder's transactions nor
//! costs the holder a wake-up per commit. While a slice is open the head
//! checks every [`COMEBACK`] on its own, so a holder that leaves early hands
//! over within about that long; the release that ends a slice wakes the
//! head at once. Each claimed slot is backed by an open-file-description lock on
//! one byte of the queue file (beyond the page), which the kernel drops when
//! the waiter dies, so a `kill -9`'d waiter is recognised and skipped.

mod inspect;
mod layout;
mod page;
mod sys;
mod turn;

pub use crate::slice::COMEBACK;
pub use inspect::{inspect, PageSnapshot, PageWaiter};
pub use layout::{
    Field, FIELDS, HEADER_BYTES, LAYOUT_VERSION, PAGE_BYTES, PAGE_IDENTITY, SLOTS, SLOT_BYTES,
};
pub use page::Page;
pub(crate) use page::PageRef;
pub use sys::boot_id;
pub(crate) use turn::{take_back_in_slice, wait_for_turn};
