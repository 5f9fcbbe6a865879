//! Who holds a database's writer lock right now and who waits, with what each process is:
//! the facts `writerlock status` and `python -m writerlock status` show, read from
//! `/proc/locks` ([`holders`]), the hand-off page ([`handoff::inspect`]), `/proc/PID` and the
//! file system ([`filesystem`]).
//!
//! How long the holder has held the lock: the kernel records no time for a `flock()`, and
//! the lock file is never written, so its mtime says nothing. The one record is the
//! hand-off page in `<db>.writer-queue`: every page-aware writer stamps the monotonic time
//! of each acquisition there. It is trusted only when the page names the pid `/proc/locks`
//! shows, and the stamp is not older than that process; otherwise the time is unknown, with
//! the holder process's age as an upper bound.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::filesystem::FileSystem;
use crate::holders::{self, WriterLocks};
use crate::{handoff, paths};

/// The locks of a lock file could not be read from `/proc/locks`.
#[derive(Debug, thiserror::Error)]
#[error("could not read the locks of {}: {source}", .path.display())]
pub struct LocksUnreadable {
    /// The lock file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Why a path given to a status tool is refused before any lock is read: what
/// `writerlock status` and `python -m writerlock status` both answer through
/// [`check_database`].
#[derive(Debug, thiserror::Error)]
pub enum NotADatabase {
    /// An in-memory database (an empty path, `:memory:`, a `file::memory:` or `mode=memory`
    /// URI): it has no lock files.
    #[error("an in-memory database has no writer lock: give the database file's path")]
    InMemory,
    /// Neither the database nor its lock file exists.
    #[error("no database at {}: check the path", .path.display())]
    Missing {
        /// The path given.
        path: PathBuf,
    },
    /// The path is not a SQLite database file.
    #[error("{} is not a SQLite database: {reason}", .path.display())]
    NotSqlite {
        /// The path given.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },
    /// The path could not be read.
    #[error("could not read {}: {source}", .path.display())]
    Unreadable {
        /// The path given.
        path: PathBuf,
        /// What the system reported.
        #[source]
        source: io::Error,
    },
}

/// The first 16 bytes of every SQLite 3 database file (`SQLite format 3` and a zero byte),
/// each byte inverted. The library never holds those 16 bytes themselves: they are how the
/// packaging tests tell a copy of SQLite linked into a binary, which this crate must never
/// carry.
const SQLITE_HEADER_INVERTED: [u8; 16] = invert(*b"SQLite format 3\0");

const fn invert(mut bytes: [u8; 16]) -> [u8; 16] {
    let mut i = 0;
    while i < bytes.len() {
        bytes[i] = !bytes[i];
        i += 1;
    }
    bytes
}

/// Whether `first` is SQLite's file header (compared through an opaque mask, so the
/// compiler cannot fold the header back into the binary).
fn is_sqlite_header(first: &[u8; 16]) -> bool {
    let mask = std::hint::black_box(0xFFu8);
    first
        .iter()
        .zip(SQLITE_HEADER_INVERTED)
        .all(|(byte, inverted)| byte ^ mask == inverted)
}

/// Checks that `db` names a SQLite database a status can be read for: not an in-memory
/// database, existing (or at least its lock file), and not a directory, a special file or a
/// file whose first bytes are not SQLite's header. An empty file is a database nobody has
/// written yet (SQLite creates them so). It reads only.
pub fn check_database(db: &Path) -> Result<(), NotADatabase> {
    if paths::is_in_memory(db) {
        return Err(NotADatabase::InMemory);
    }
    if !db.exists() && !paths::lock_path(db).exists() {
        return Err(NotADatabase::Missing {
            path: db.to_path_buf(),
        });
    }
    let not_sqlite = |reason: &str| NotADatabase::NotSqlite {
        path: db.to_path_buf(),
        reason: reason.to_string(),
    };
    let unreadable = |source| NotADatabase::Unreadable {
        path: db.to_path_buf(),
        source,
    };
    let meta = match fs::metadata(db) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(unreadable(source)),
    };
    if meta.is_dir() {
        return Err(not_sqlite(
            "it is a directory; give the database file inside it",
        ));
    }
    if !meta.is_file() {
        return Err(not_sqlite("it is not a regular file"));
    }
    if meta.len() == 0 {
        return Ok(());
    }
    let mut first = [0u8; 16];
    let read = fs::File::open(db).and_then(|f| {
        use std::io::Read;
        f.take(16).read(&mut first)
    });
    match read {
        Ok(16) if is_sqlite_header(&first) => Ok(()),
        Ok(_) => Err(not_sqlite(
            "its first bytes are not SQLite's header (\"SQLite format 3\"); check the path",
        )),
        Err(source) => Err(unreadable(source)),
    }
}

/// The process holding the writer lock.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// The pid `/proc/locks` lists (the process that took the lock).
    pub pid: u32,
    /// Whether that process still exists.
    pub alive: bool,
    /// Its command line, from `/proc/PID/cmdline`.
    pub command: Option<String>,
    /// How long it has held the lock, when the hand-off page records it.
    pub held_for: Option<Duration>,
    /// Where `held_for` comes from (`handoff-page`), or why it is unknown.
    pub held_for_source: String,
    /// How long ago the process started: an upper bound on the hold.
    pub process_age: Option<Duration>,
    /// Processes with the lock file open, when the listed pid no longer exists (the lock
    /// passed to a child over a fork).
    pub descriptor_open_in: Vec<u32>,
}

/// A writer waiting for the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiter {
    /// Its pid.
    pub pid: u32,
    /// Its command line, from `/proc/PID/cmdline`.
    pub command: Option<String>,
    /// How long it has waited, when the hand-off page has its arrival.
    pub waited: Option<Duration>,
    /// Its ticket on the hand-off page (arrival order), when it has one.
    pub ticket: Option<u64>,
    /// How long ago the process started: an upper bound on its wait when the page does not
    /// have it.
    pub process_age: Option<Duration>,
}

/// A process, with its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its pid.
    pub pid: u32,
    /// Its command line, from `/proc/PID/cmdline`.
    pub command: Option<String>,
}

/// The writer lock of one database, now.
#[derive(Debug, Clone, PartialEq)]
pub struct LockStatus {
    /// `<db>.writer-lock`.
    pub lock_file: PathBuf,
    /// Whether it exists.
    pub lock_exists: bool,
    /// `<db>.writer-queue`.
    pub queue_file: PathBuf,
    /// Whether it exists.
    pub queue_exists: bool,
    /// The holder, if any.
    pub holder: Option<Holder>,
    /// How many writers wait (shared flocks on the queue file, including those whose
    /// process is not visible here).
    pub waiting: usize,
    /// The waiters oldest first: in arrival order from the hand-off page where they have a
    /// slot there, then those without one (a writer using Exponential's driver protocol
    /// alone), oldest process first.
    pub queue: Vec<Waiter>,
    /// Processes blocked in a blocking `flock()` on the lock file (outside the queue's
    /// protocol, which never blocks).
    pub blocked: Vec<u32>,
    /// Processes holding SQLite's own write lock on the database, its `-wal` or `-shm`,
    /// other than the queue's holder: writers outside the queue.
    pub outside: Vec<Process>,
    /// The file system the database is on.
    pub filesystem: FileSystem,
}

/// Reads the writer lock of the database at `db`. It reads only: it never creates the lock
/// files. Locks are per machine: the answer is this machine's.
pub fn inspect(db: &Path) -> Result<LockStatus, LocksUnreadable> {
    let lock_file = paths::lock_path(db);
    let queue_file = paths::queue_path(db);
    let (lock_exists, queue_exists) = (lock_file.exists(), queue_file.exists());
    let locks = |path: &Path, exists: bool| {
        if !exists {
            return Ok(Vec::new());
        }
        holders::file_locks(path).map_err(|source| LocksUnreadable {
            path: path.to_path_buf(),
            source,
        })
    };
    let found = WriterLocks::from_locks(
        &locks(&lock_file, lock_exists)?,
        &locks(&queue_file, queue_exists)?,
    );
    let outside = holders::sqlite_writers(db, found.holder.as_slice())
        .into_iter()
        .map(|pid| Process {
            pid,
            command: cmdline(pid),
        })
        .collect();
    Ok(LockStatus {
        holder: found
            .holder
            .map(|pid| describe_holder(pid, &lock_file, &queue_file)),
        waiting: found.waiting,
        queue: order_waiters(&found.waiters, &queue_file),
        blocked: found.blocked,
        outside,
        filesystem: FileSystem::of_database(db),
        lock_file,
        lock_exists,
        queue_file,
        queue_exists,
    })
}

/// The waiters `/proc/locks` shows (shared flocks on the queue file), oldest first: those
/// with a slot on the hand-off page in ticket order with the time they waited, then the
/// others (no page: Exponential's driver protocol, another program), oldest process first.
fn order_waiters(flock_waiters: &[u32], queue_path: &Path) -> Vec<Waiter> {
    let page = handoff::inspect(queue_path)
        .map(|p| p.queue)
        .unwrap_or_default();
    let mut out: Vec<Waiter> = Vec::new();
    for w in &page {
        if flock_waiters.contains(&w.pid) && !out.iter().any(|o| o.pid == w.pid) {
            out.push(Waiter {
                pid: w.pid,
                command: cmdline(w.pid),
                waited: w.waited,
                ticket: Some(w.ticket),
                process_age: process_age(w.pid),
            });
        }
    }
    let mut rest: Vec<Waiter> = flock_waiters
        .iter()
        .filter(|pid| !out.iter().any(|o| o.pid == **pid))
        .map(|&pid| Waiter {
            pid,
            command: cmdline(pid),
            waited: None,
            ticket: None,
            process_age: process_age(pid),
        })
        .collect();
    rest.dedup_by_key(|w| w.pid);
    // Oldest process first; unknown ages last.
    rest.sort_by_key(|w| std::cmp::Reverse(w.process_age));
    out.extend(rest);
    out
}

fn describe_holder(pid: u32, lock_path: &Path, queue_path: &Path) -> Holder {
    let alive = Path::new(&format!("/proc/{pid}")).exists();
    let age = if alive { process_age(pid) } else { None };
    let (held_for, source) = match page_hold(queue_path, pid) {
        PageHold::Since(held) if age.is_none_or(|a| held <= a + Duration::from_secs(1)) => {
            (Some(held), "handoff-page".to_string())
        }
        PageHold::Since(_) => (
            None,
            "unknown: the hand-off page's last acquisition predates the holder process".to_string(),
        ),
        PageHold::NotRecorded => (
            None,
            "unknown: the holder did not record its acquisition on the hand-off page (it \
             takes the flock without the page)"
                .to_string(),
        ),
        PageHold::NoPage => (
            None,
            "unknown: the kernel keeps no time for a flock() and the queue file has no \
             hand-off page"
                .to_string(),
        ),
    };
    Holder {
        pid,
        alive,
        command: if alive { cmdline(pid) } else { None },
        held_for,
        held_for_source: source,
        process_age: age,
        descriptor_open_in: if alive {
            Vec::new()
        } else {
            processes_with_open(lock_path)
        },
    }
}

/// `/proc/PID/cmdline`, arguments joined by spaces (quoted where they contain blanks).
pub fn cmdline(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| {
            let s = String::from_utf8_lossy(a).into_owned();
            if s.is_empty() || s.contains(char::is_whitespace) {
                format!("'{}'", s.replace('\'', "'\\''"))
            } else {
                s
            }
        })
        .collect();
    (!args.is_empty()).then(|| args.join(" "))
}

/// How long ago the process started, from `/proc/PID/stat` (start time in clock ticks
/// since boot) and `/proc/uptime`.
pub fn process_age(pid: u32) -> Option<Duration> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // Fields after the command: state is field 3, starttime field 22.
    let start_ticks: f64 = after_comm.split_whitespace().nth(19)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    let uptime: f64 = fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let age = uptime - start_ticks / hz as f64;
    (age >= 0.0).then(|| Duration::from_secs_f64(age))
}

/// Processes that have `path` open, from `/proc/*/fd`.
fn processes_with_open(path: &Path) -> Vec<u32> {
    let Ok(meta) = fs::metadata(path) else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return pids;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        if fds.flatten().any(|fd| {
            fs::metadata(fd.path()).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
        }) {
            pids.push(pid);
        }
    }
    pids
}

/// What the hand-off page says about the current hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PageHold {
    /// The holder recorded its acquisition on the page: held this long.
    Since(Duration),
    /// The page names no holder, or another one (the holder takes the flock
    /// without the page, or a writer killed while holding left a stale stamp).
    NotRecorded,
    /// No page (a short queue file, or a foreign layout).
    NoPage,
}

/// Reads the hold time from the hand-off page, trusting it only when the page names the
/// same pid `/proc/locks` shows.
fn page_hold(queue_path: &Path, holder: u32) -> PageHold {
    match handoff::inspect(queue_path) {
        None => PageHold::NoPage,
        Some(page) => match (page.holder_pid, page.held_for) {
            (Some(pid), Some(held)) if pid == holder => PageHold::Since(held),
            _ => PageHold::NotRecorded,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_databases_are_refused_in_every_form() {
        for db in [
            "",
            ":memory:",
            "file::memory:?cache=shared",
            "file:x.db?mode=memory",
        ] {
            assert!(
                matches!(check_database(Path::new(db)), Err(NotADatabase::InMemory)),
                "{db:?}"
            );
        }
    }

    #[test]
    fn paths_that_are_not_databases_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing.db");
        let err = check_database(&missing).expect_err("missing");
        assert_eq!(
            err.to_string(),
            format!("no database at {}: check the path", missing.display())
        );
        let err = check_database(dir.path()).expect_err("a directory");
        assert!(matches!(err, NotADatabase::NotSqlite { .. }), "{err}");
        let text = dir.path().join("text.db");
        fs::write(&text, "not a database").expect("write");
        let err = check_database(&text).expect_err("text");
        assert!(err.to_string().contains("first bytes"), "{err}");
        let empty = dir.path().join("empty.db");
        fs::write(&empty, "").expect("write");
        check_database(&empty).expect("an empty file is a database nobody wrote yet");
    }
}
