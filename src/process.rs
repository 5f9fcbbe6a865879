//! This process: its id, cached, and the fork handler that keeps a forked
//! child off its parent's locks.
//!
//! `flock()` belongs to an open file description, which a forked child
//! shares with its parent: a child that unlocked an inherited descriptor
//! would free its parent's lock. So every lock file's descriptor is
//! registered here when it opens, and a fork handler
//! (`pthread_atfork`) closes every registered descriptor in the child as
//! soon as it starts (closing a shared description's copy never releases
//! the lock; only the last close or an explicit unlock does). The handler
//! touches only atomics (its registry only grows, in the parent), so a lock
//! another thread held at fork time cannot deadlock it. It also forgets the
//! cached process id ([`current_pid`]), which the lock files, the hand-off
//! page and the Postgres connection compare with their owner's, and
//! re-seeds the child's poll pauses ([`crate::wait`]), which would
//! otherwise repeat the parent's.

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::Once;

/// Descriptors the fork handler closes in a child: a list of chunks of
/// slots that only grows. A chunk is allocated in the process that opens a
/// lock file (never in the fork handler) and never freed, so the handler
/// walks the list with atomic loads alone: no allocation, no lock, nothing
/// another thread could have held at fork time. A slot holds a descriptor
/// or -1.
struct Chunk {
    slots: [AtomicI32; CHUNK_SLOTS],
    next: AtomicPtr<Chunk>,
}

const CHUNK_SLOTS: usize = 512;

impl Chunk {
    const fn new() -> Chunk {
        Chunk {
            slots: [const { AtomicI32::new(-1) }; CHUNK_SLOTS],
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn next(&self) -> Option<&'static Chunk> {
        // SAFETY: a non-null `next` points to a leaked chunk, never freed.
        unsafe { self.next.load(Ordering::Acquire).as_ref() }
    }
}

static REGISTRY: Chunk = Chunk::new();
static ATFORK: Once = Once::new();
/// This process's id, cached (glibc no longer caches `getpid()`, and the
/// queue asks on every call); 0 until first asked, reset in a forked child
/// by the fork handler.
static PID: AtomicU32 = AtomicU32::new(0);

/// Every chunk of the registry, first to last.
fn chunks() -> impl Iterator<Item = &'static Chunk> {
    std::iter::successors(Some(&REGISTRY), |chunk| chunk.next())
}

extern "C" fn close_inherited_in_child() {
    PID.store(0, Ordering::SeqCst);
    let mut chunk = Some(&REGISTRY);
    while let Some(current) = chunk {
        for slot in current.slots.iter() {
            let fd = slot.swap(-1, Ordering::SeqCst);
            if fd >= 0 {
                // SAFETY: close is async-signal-safe; the descriptor is a copy
                // of the parent's, which keeps its own, so the parent's lock
                // stays.
                unsafe {
                    libc::close(fd);
                }
            }
        }
        chunk = current.next();
    }
    crate::wait::reseed();
}

fn ensure_fork_handler() {
    ATFORK.call_once(|| {
        // SAFETY: registering a handler that only touches atomics and close().
        unsafe {
            libc::pthread_atfork(None, None, Some(close_inherited_in_child));
        }
    });
}

/// Adds a descriptor to those the fork handler closes in a child, and
/// installs the handler on first use.
pub(crate) fn register(fd: i32) {
    ensure_fork_handler();
    for chunk in chunks() {
        for slot in chunk.slots.iter() {
            if slot
                .compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return;
            }
        }
    }
    // Every slot taken: a new chunk, the descriptor in it before it is
    // linked (a fork from now on closes it), appended at the end.
    let new: &'static Chunk = Box::leak(Box::new(Chunk::new()));
    new.slots[0].store(fd, Ordering::SeqCst);
    let mut last = &REGISTRY;
    loop {
        match last.next.compare_exchange(
            std::ptr::null_mut(),
            (new as *const Chunk).cast_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return,
            // SAFETY: a non-null `next` points to a leaked chunk.
            Err(next) => last = unsafe { &*next },
        }
    }
}

/// Takes a descriptor off that list, before its owner closes it.
pub(crate) fn unregister(fd: i32) {
    for chunk in chunks() {
        for slot in chunk.slots.iter() {
            if slot
                .compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// The calling process's id, from a cache the fork handler resets in a child
/// (the handler is registered before the first answer, so no fork can leave
/// a child with its parent's id).
pub fn current_pid() -> u32 {
    let pid = PID.load(Ordering::Acquire);
    if pid != 0 {
        return pid;
    }
    ensure_fork_handler();
    let pid = std::process::id();
    PID.store(pid, Ordering::Release);
    pid
}
