//! The two lock files beside a database, opened safely across `fork()`.
//!
//! `<db>.writer-lock` carries the exclusive `flock()` of the writer whose
//! turn it is; `<db>.writer-queue` carries a shared `flock()` for every
//! writer waiting, and (with the hand-off strategy) the hand-off page.
//! Both are created if missing and never truncated or deleted.
//!
//! `flock()` belongs to an open file description, which a forked child
//! shares with its parent: a child that unlocked an inherited descriptor
//! would free its parent's lock. So a [`LockFiles`] remembers the process
//! that opened it, and a fork handler closes every inherited descriptor in
//! the child as soon as it starts (closing a shared description's copy never
//! releases the lock; only the last close or an explicit unlock does). The
//! handler touches only atomics, so a lock another thread held at fork time
//! cannot deadlock it.
//!
//! The `flock()` calls (try a shared or exclusive lock, unlock) go through
//! `fs4`. What it cannot express stays on `libc`: the fork handler
//! (`pthread_atfork`), opening with `O_NOFOLLOW | O_NONBLOCK`, `fchmod` /
//! `fchown` of a new lock file, and, in the hand-off page, the
//! open-file-description byte locks (`F_OFD_SETLK`), `posix_fallocate`,
//! `mmap` and the futexes.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Once;

/// Suffix of the file whose exclusive `flock()` is the writer's turn.
pub const LOCK_SUFFIX: &str = ".writer-lock";
/// Suffix of the file whose shared `flock()`s are the waiting writers.
pub const QUEUE_SUFFIX: &str = ".writer-queue";

/// The lock file's path for a database: `<db>.writer-lock`.
pub fn lock_path(database: &Path) -> PathBuf {
    with_suffix(database, LOCK_SUFFIX)
}

/// The queue file's path for a database: `<db>.writer-queue`.
pub fn queue_path(database: &Path) -> PathBuf {
    with_suffix(database, QUEUE_SUFFIX)
}

fn with_suffix(database: &Path, suffix: &str) -> PathBuf {
    let mut name: OsString = database.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// True for databases that live in memory and need no queue: an empty path,
/// `:memory:` and SQLite's `file::memory:` / `mode=memory` URIs.
pub fn is_in_memory(database: &Path) -> bool {
    let text = database.as_os_str().as_bytes();
    text.is_empty()
        || text == b":memory:"
        || text.starts_with(b"file::memory:")
        || (text.starts_with(b"file:") && windows_contains(text, b"mode=memory"))
}

fn windows_contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

const REGISTRY_SLOTS: usize = 512;
/// Descriptors the fork handler closes in a child.
static REGISTRY: [AtomicI32; REGISTRY_SLOTS] = [const { AtomicI32::new(-1) }; REGISTRY_SLOTS];
static ATFORK: Once = Once::new();
/// This process's id, cached (glibc no longer caches `getpid()`, and the
/// queue asks on every call); 0 until first asked, reset in a forked child
/// by the fork handler.
static PID: AtomicU32 = AtomicU32::new(0);

extern "C" fn close_inherited_in_child() {
    PID.store(0, Ordering::SeqCst);
    for slot in REGISTRY.iter() {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: close is async-signal-safe; the descriptor is a copy of
            // the parent's, which keeps its own, so the parent's lock stays.
            unsafe {
                libc::close(fd);
            }
        }
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

fn register(fd: i32) {
    ensure_fork_handler();
    for slot in REGISTRY.iter() {
        if slot
            .compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
    // Registry full: the child still never unlocks the descriptor (the pid
    // check), it only closes it at the handle's next use instead of at once.
}

fn unregister(fd: i32) {
    for slot in REGISTRY.iter() {
        if slot
            .compare_exchange(fd, -1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

/// The calling process's id, from a cache the fork handler resets in a child
/// (the handler is registered before the first answer, so no fork can leave
/// a child with its parent's id).
pub(crate) fn current_pid() -> u32 {
    let pid = PID.load(Ordering::Acquire);
    if pid != 0 {
        return pid;
    }
    ensure_fork_handler();
    let pid = std::process::id();
    PID.store(pid, Ordering::Release);
    pid
}

/// One lock file, opened with `O_CLOEXEC`, read-write where possible.
#[derive(Debug)]
pub struct LockFile {
    fd: i32,
    path: PathBuf,
    writable: bool,
}

impl LockFile {
    /// Opens (creating if missing, never truncating) a lock file. Falls back
    /// to read-only when the file exists but this user may not write it:
    /// `flock()` works on a read-only descriptor.
    pub fn open(path: &Path) -> io::Result<LockFile> {
        let c_path = CString::new(path.as_os_str().as_bytes().to_vec()).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte")
        })?;
        let mode: libc::c_uint = 0o666;
        // SAFETY: c_path is a valid NUL-terminated string.
        let mut fd = unsafe {
            libc::open(
                c_path.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOCTTY,
                mode,
            )
        };
        let mut writable = true;
        if fd < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM) => {
                    // SAFETY: as above.
                    fd = unsafe {
                        libc::open(
                            c_path.as_ptr(),
                            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY,
                        )
                    };
                    if fd < 0 {
                        return Err(err);
                    }
                    writable = false;
                }
                _ => return Err(err),
            }
        }
        register(fd);
        Ok(LockFile {
            fd,
            path: path.to_path_buf(),
            writable,
        })
    }

    /// The raw descriptor.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file was opened read-write.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Closes the descriptor after the owning process unlocked it.
    fn close(self) {
        unregister(self.fd);
        // SAFETY: fd is ours and open.
        unsafe {
            libc::close(self.fd);
        }
    }

    /// Forgets the descriptor without touching it: in a forked child, where
    /// the fork handler closed it already (the number may name another file
    /// by now).
    fn forget(self) {
        unregister(self.fd);
    }
}

/// What a non-blocking `flock()` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flock {
    /// The lock was taken.
    Taken,
    /// Someone else holds a conflicting lock.
    Held,
}

/// Which `flock()` to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// `LOCK_EX`: the writer's turn (or a probe of the queue file).
    Exclusive,
    /// `LOCK_SH`: a waiting writer on the queue file.
    Shared,
}

/// A `File` view of a descriptor owned elsewhere, for fs4's calls; never
/// closes it.
fn borrowed(fd: i32) -> ManuallyDrop<File> {
    // SAFETY: the descriptor stays open for the duration of the call (its
    // LockFile outlives every wait), and ManuallyDrop never closes it.
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })
}

/// A non-blocking `flock()` (through fs4), retried when a signal
/// interrupts it.
pub fn try_flock(fd: i32, mode: LockMode) -> io::Result<Flock> {
    let file = borrowed(fd);
    loop {
        let tried = match mode {
            LockMode::Exclusive => fs4::FileExt::try_lock(&*file),
            LockMode::Shared => fs4::FileExt::try_lock_shared(&*file),
        };
        match tried {
            Ok(()) => return Ok(Flock::Taken),
            Err(fs4::TryLockError::WouldBlock) => return Ok(Flock::Held),
            Err(fs4::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(fs4::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Drops this descriptor's `flock()` (through fs4).
pub fn unlock(fd: i32) -> io::Result<()> {
    fs4::FileExt::unlock(&*borrowed(fd))
}

/// The pair of lock files of one queue handle, bound to the process that
/// opened them.
#[derive(Debug)]
pub struct LockFiles {
    /// `<db>.writer-lock`.
    pub lock: LockFile,
    /// `<db>.writer-queue`.
    pub queue: LockFile,
    pid: u32,
}

impl LockFiles {
    /// Opens both files for `database`.
    pub fn open(database: &Path) -> crate::Result<LockFiles> {
        let lock_path = lock_path(database);
        let lock = LockFile::open(&lock_path).map_err(|source| crate::Error::LockFile {
            path: lock_path,
            source,
        })?;
        let queue_path = queue_path(database);
        let queue = match LockFile::open(&queue_path) {
            Ok(queue) => queue,
            Err(source) => {
                lock.close();
                return Err(crate::Error::LockFile {
                    path: queue_path,
                    source,
                });
            }
        };
        Ok(LockFiles {
            lock,
            queue,
            pid: current_pid(),
        })
    }

    /// True when these descriptors were opened by the calling process.
    pub fn owned_here(&self) -> bool {
        self.pid == current_pid()
    }

    /// Gives the files up. In the process that opened them they are
    /// unlocked (if `holding`) and closed; in a forked child the inherited
    /// descriptors are only forgotten, never unlocked.
    pub fn discard(self, holding: bool) {
        if self.owned_here() {
            if holding {
                let _ = unlock(self.lock.fd());
            }
            self.lock.close();
            self.queue.close();
        } else {
            self.lock.forget();
            self.queue.forget();
        }
    }
}

/// A path from bytes, for the C and script bindings.
pub fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes() {
        let db = Path::new("var/storage/sqlite3/exponential.db");
        assert_eq!(
            lock_path(db),
            Path::new("var/storage/sqlite3/exponential.db.writer-lock")
        );
        assert_eq!(
            queue_path(db),
            Path::new("var/storage/sqlite3/exponential.db.writer-queue")
        );
    }

    #[test]
    fn memory_databases() {
        assert!(is_in_memory(Path::new("")));
        assert!(is_in_memory(Path::new(":memory:")));
        assert!(is_in_memory(Path::new("file::memory:?cache=shared")));
        assert!(is_in_memory(Path::new("file:x?mode=memory")));
        assert!(!is_in_memory(Path::new("/tmp/x.db")));
    }
}
