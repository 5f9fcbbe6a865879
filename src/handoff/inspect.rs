//! The read-only inspector: what a queue file's page says, read without
//! mapping it writable or joining it, for status tools.

use std::time::Duration;

use super::layout::{Header, Layout, Slot, IDENTITY, PAGE_BYTES, SLOTS};
use super::sys::{boot_id, now_us};

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
