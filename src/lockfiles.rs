//! The two lock files beside a database, opened safely across `fork()`.
//!
//! `<db>.writer-lock` carries the exclusive `flock()` of the writer whose
//! turn it is; `<db>.writer-queue` carries a shared `flock()` for every
//! writer waiting, and (with the hand-off strategy) the hand-off page.
//! Both are created if missing (with the database file's mode and, for
//! root, its owner) and never truncated or deleted. They are untrusted
//! input: the database's directory may be group-writable, or the files in
//! `/tmp`. So they are opened without following a symbolic link and without
//! blocking (a FIFO, a lease), only regular files are used, and two names
//! of one file are refused.
//!
//! `flock()` belongs to an open file description, which a forked child
//! shares with its parent: a child that unlocked an inherited descriptor
//! would free its parent's lock. So a [`LockFiles`] remembers the process
//! that opened it, and registers its descriptors with the fork handler
//! ([`crate::process`]), which closes every inherited descriptor in the
//! child as soon as it starts (closing a shared description's copy never
//! releases the lock; only the last close or an explicit unlock does),
//! however many lock files the process has open. The hand-off page is mapped
//! `MADV_DONTFORK`: a child's copy of the mapping would keep the queue
//! file's description, and its byte locks, alive after the parent died.
//!
//! The `flock()` calls (try a shared or exclusive lock, unlock) go through
//! `fs4`. What it cannot express stays on `libc`: the fork handler
//! (`pthread_atfork`, in [`crate::process`]), opening with `O_NOFOLLOW | O_NONBLOCK`, `fchmod` /
//! `fchown` of a new lock file, and, in the hand-off page, the
//! open-file-description byte locks (`F_OFD_SETLK`), `posix_fallocate`,
//! `mmap` and the futexes.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{BusyKind, Error, LockFileProblem};
use crate::wait::Deadline;

pub use crate::paths::{
    is_in_memory, lock_path, path_from_bytes, queue_path, LOCK_SUFFIX, QUEUE_SUFFIX,
};

pub use crate::process::current_pid;
use crate::process::{register, unregister};

/// One lock file, opened with `O_CLOEXEC`, read-write where possible.
#[derive(Debug)]
pub struct LockFile {
    fd: i32,
    path: PathBuf,
    /// The path as the system calls take it, for the check at each turn.
    c_path: CString,
    writable: bool,
    /// Device and inode.
    id: (libc::dev_t, libc::ino_t),
}

/// Flags every lock file is opened with: never through a symbolic link
/// (`O_NOFOLLOW`), never waiting inside `open()` for a FIFO's other end or
/// a lease's break (`O_NONBLOCK`), never inherited by a program the host
/// runs (`O_CLOEXEC`).
const OPEN_FLAGS: libc::c_int =
    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;

/// How a missing lock file is created: with the database file's
/// permissions rather than the umask, and, when the writer runs as root,
/// with the database file's owner (what SQLite does for `-wal` and `-shm`),
/// so a root cron job never locks the web server's user out.
#[derive(Debug, Clone, Copy)]
struct Like {
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Like {
    fn database(database: &Path) -> Option<Like> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(database).ok().map(|m| Like {
            mode: m.mode() & 0o666,
            uid: m.uid(),
            gid: m.gid(),
        })
    }
}

fn raw_open(path: &CString, flags: libc::c_int, mode: libc::c_uint) -> io::Result<i32> {
    // SAFETY: a valid NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(path.as_ptr(), flags | OPEN_FLAGS, mode) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

fn close_fd(fd: i32) {
    // SAFETY: a descriptor we opened and nobody else knows.
    unsafe {
        libc::close(fd);
    }
}

/// What a file that is not a regular file is, for the error.
fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "a FIFO (named pipe)",
        libc::S_IFDIR => "a directory",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFLNK => "a symbolic link",
        _ => "not a regular file",
    }
}

/// A user's name, or `uid N` when it has none.
fn user_name(uid: u32) -> String {
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into our buffers; the result is checked.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc == 0 && !found.is_null() && !pwd.pw_name.is_null() {
        // SAFETY: pw_name points into buf, NUL-terminated.
        let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
        format!("{} (uid {uid})", name.to_string_lossy())
    } else {
        format!("uid {uid}")
    }
}

impl LockFile {
    /// Opens (creating if missing, never truncating) a lock file. Falls back
    /// to read-only when the file exists but this user may not write it:
    /// `flock()` works on a read-only descriptor. Refuses anything but a
    /// regular file; a lease another process holds is waited for within
    /// the deadline, never inside `open()`.
    pub(crate) fn open(
        path: &Path,
        database: &Path,
        kind: BusyKind,
        deadline: &Deadline,
    ) -> crate::Result<LockFile> {
        let io_error = |source: io::Error| Error::LockFile {
            path: path.to_path_buf(),
            source,
        };
        let problem = |problem: LockFileProblem| Error::UnsafeLockFile {
            path: path.to_path_buf(),
            problem,
        };
        let c_path = CString::new(path.as_os_str().as_bytes().to_vec()).map_err(|_| {
            io_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path contains a NUL byte",
            ))
        })?;
        let mut created = false;
        let opened = loop {
            let err = match raw_open(&c_path, libc::O_RDWR, 0) {
                Ok(fd) => break (fd, true),
                Err(err) => err,
            };
            match err.raw_os_error() {
                Some(libc::ENOENT) if !created => {
                    created = true;
                    match LockFile::create(&c_path, Like::database(database)) {
                        Ok(fd) => break (fd, true),
                        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                        Err(e) => return Err(io_error(e)),
                    }
                }
                Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM) => {
                    match raw_open(&c_path, libc::O_RDONLY, 0) {
                        Ok(fd) => break (fd, false),
                        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                            return Err(LockFile::access_error(path, e))
                        }
                        Err(e) => return Err(LockFile::classify(path, e)),
                    }
                }
                Some(libc::EWOULDBLOCK) => {
                    // A lease: O_NONBLOCK started its break instead of
                    // waiting up to the kernel's lease-break-time (45 s).
                    if deadline.passed() {
                        return Err(problem(LockFileProblem::Leased));
                    }
                    if !deadline.sleep(Duration::from_millis(5)) {
                        return Err(Error::Interrupted {
                            kind,
                            waited: deadline.waited(),
                        });
                    }
                }
                _ => return Err(LockFile::classify(path, err)),
            }
        };
        let (fd, writable) = opened;
        // SAFETY: fstat into a zeroed struct; checked.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            let err = io::Error::last_os_error();
            close_fd(fd);
            return Err(io_error(err));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            close_fd(fd);
            return Err(problem(LockFileProblem::NotRegular {
                kind: kind_of(st.st_mode),
            }));
        }
        register(fd);
        Ok(LockFile {
            fd,
            path: path.to_path_buf(),
            c_path,
            writable,
            id: (st.st_dev, st.st_ino),
        })
    }

    /// Creates a missing lock file like the database file (see [`Like`]).
    fn create(path: &CString, like: Option<Like>) -> io::Result<i32> {
        let mode = like.map_or(0o666, |l| l.mode);
        let fd = raw_open(path, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, mode)?;
        if let Some(like) = like {
            // SAFETY: plain system calls on the descriptor just created.
            // Best effort: a file that keeps the umask's mode still works
            // for this user.
            unsafe {
                libc::fchmod(fd, like.mode);
                if libc::geteuid() == 0 {
                    libc::fchown(fd, like.uid, like.gid);
                }
            }
        }
        Ok(fd)
    }

    /// The error for an `open()` failure that says what the file is.
    fn classify(path: &Path, err: io::Error) -> Error {
        let problem = match err.raw_os_error() {
            Some(libc::ELOOP) => Some(LockFileProblem::SymbolicLink),
            Some(libc::EISDIR) => Some(LockFileProblem::NotRegular {
                kind: "a directory",
            }),
            Some(libc::ENXIO) | Some(libc::EOPNOTSUPP) => {
                std::fs::symlink_metadata(path).ok().map(|m| {
                    use std::os::unix::fs::MetadataExt;
                    LockFileProblem::NotRegular {
                        kind: kind_of(m.mode() as libc::mode_t),
                    }
                })
            }
            _ => None,
        };
        match problem {
            Some(problem) => Error::UnsafeLockFile {
                path: path.to_path_buf(),
                problem,
            },
            None => Error::LockFile {
                path: path.to_path_buf(),
                source: err,
            },
        }
    }

    /// The error for a lock file this user may not open at all: who owns
    /// it, its mode, who we are.
    fn access_error(path: &Path, source: io::Error) -> Error {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(path) {
            Ok(meta) => Error::LockFileAccess {
                path: path.to_path_buf(),
                owner: user_name(meta.uid()),
                mode: meta.mode() & 0o7777,
                // SAFETY: no arguments.
                user: user_name(unsafe { libc::geteuid() }),
                source,
            },
            Err(_) => Error::LockFile {
                path: path.to_path_buf(),
                source,
            },
        }
    }

    /// Whether the open descriptor is still the file at its path: the file
    /// still has a link, and the path names it (same device and inode, not
    /// followed through a symbolic link). False once an operator removed
    /// the file (`rm`) or renamed another over it: a `flock()` on this
    /// descriptor then excludes nobody who opens the path now.
    pub fn is_current(&self) -> bool {
        // One lstat() of the path against the identity fstat() read at open: the descriptor
        // keeps its inode alive, so no other file can take its number meanwhile, and a path
        // that names it means the file still has that link. (A descriptor closed behind the
        // queue's back still compares as the file it was; the `flock()` on it reports the
        // error.)
        // SAFETY: lstat into a zeroed struct; result checked.
        let mut named: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::lstat(self.c_path.as_ptr(), &mut named) } != 0 {
            return false;
        }
        (named.st_dev, named.st_ino) == self.id
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
    /// the fork handler closed it already and emptied the table. Nor is it
    /// looked up in the table: the number may name another file by now,
    /// even a descriptor another handle opened in this child and registered,
    /// which must stay registered so that this child's own children close it.
    fn forget(self) {}
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

/// The byte of the queue file (past the hand-off page and its waiters'
/// liveness bytes) whose open-file-description lock this library's writers
/// hold for as long as they hold the turn: exclusive where the queue file
/// is writable, shared where it could only be opened read-only. A writer
/// that got the `flock()` of a lock file but finds this byte held by
/// another writer knows that one holds the turn through a lock file that
/// was removed or replaced since, and waits for it.
pub const TURN_BYTE: i64 = (1 << 20) + 4096;

fn turn_byte_lock(fd: i32, kind: libc::c_int) -> io::Result<Flock> {
    // SAFETY: a zeroed flock is a valid argument; the result is checked.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = TURN_BYTE;
    fl.l_len = 1;
    loop {
        if unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl) } == 0 {
            return Ok(Flock::Taken);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EACCES) => return Ok(Flock::Held),
            Some(libc::EINTR) => {}
            _ => return Err(err),
        }
    }
}

impl LockFiles {
    /// Whether both descriptors are still the files at their paths (see
    /// [`LockFile::is_current`]).
    pub fn are_current(&self) -> bool {
        self.lock.is_current() && self.queue.is_current()
    }

    /// Marks the turn as held on the queue file's [`TURN_BYTE`]; `Held`
    /// when another writer holds the turn (through a lock file no longer
    /// at its path).
    pub(crate) fn mark_turn(&self) -> io::Result<Flock> {
        let kind = if self.queue.writable {
            libc::F_WRLCK
        } else {
            libc::F_RDLCK
        };
        turn_byte_lock(self.queue.fd, kind)
    }

    /// Removes the mark of [`LockFiles::mark_turn`].
    pub(crate) fn unmark_turn(&self) {
        let _ = turn_byte_lock(self.queue.fd, libc::F_UNLCK);
    }

    /// Opens both files for `database`, waiting at most until `deadline`
    /// (a lease another process holds). Two paths that name one file are
    /// refused: every writer would wait for itself.
    pub(crate) fn open(
        database: &Path,
        kind: BusyKind,
        deadline: &Deadline,
    ) -> crate::Result<LockFiles> {
        let lock = LockFile::open(&lock_path(database), database, kind, deadline)?;
        let queue = match LockFile::open(&queue_path(database), database, kind, deadline) {
            Ok(queue) => queue,
            Err(err) => {
                lock.close();
                return Err(err);
            }
        };
        if lock.id == queue.id {
            let err = Error::UnsafeLockFile {
                path: queue.path.clone(),
                problem: LockFileProblem::SameFile {
                    other: lock.path.clone(),
                },
            };
            lock.close();
            queue.close();
            return Err(err);
        }
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
                self.unmark_turn();
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
