//! Who holds and who waits for a writer lock, read from `/proc/locks`.
//!
//! Linux lists every file lock there with the process that took it and the
//! file's device and inode. A `flock()` belongs to an open file description,
//! so after a fork the listed pid is the process that took the lock, which
//! may since have handed the descriptor to a child.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The kind of a lock listed in `/proc/locks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// A `flock()` lock (the queue's).
    Flock,
    /// A POSIX record lock (`fcntl`, SQLite's own).
    Posix,
    /// An open-file-description record lock.
    Ofd,
}

/// One entry of `/proc/locks` on a given file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLock {
    /// What kind of lock.
    pub kind: LockKind,
    /// Exclusive (WRITE) or shared (READ).
    pub exclusive: bool,
    /// The process that took it (`None` for OFD locks, listed as -1).
    pub pid: Option<u32>,
    /// True for a waiter blocked on the lock rather than a holder.
    pub blocked: bool,
}

impl FileLock {
    /// A held exclusive `flock()`: the writer lock's holder on a lock file.
    pub fn is_exclusive_flock(&self) -> bool {
        self.kind == LockKind::Flock && self.exclusive && !self.blocked
    }

    /// A held shared `flock()`: a waiting writer on a queue file.
    pub fn is_shared_flock(&self) -> bool {
        self.kind == LockKind::Flock && !self.exclusive && !self.blocked
    }
}

/// A database's writer lock as `/proc/locks` shows it: the exclusive `flock()` on
/// `<db>.writer-lock` and the shared ones on `<db>.writer-queue`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterLocks {
    /// The process holding the exclusive `flock()` on the lock file, if any.
    pub holder: Option<u32>,
    /// The processes holding a shared `flock()` on the queue file (the waiting writers), in
    /// the order `/proc/locks` lists them, which is not their arrival order.
    pub waiters: Vec<u32>,
    /// How many shared `flock()`s the queue file has, including those whose process is not
    /// visible here (listed without a pid).
    pub waiting: usize,
    /// The processes blocked in a blocking `flock()` on the lock file (outside the queue's
    /// protocol, which never blocks).
    pub blocked: Vec<u32>,
}

impl WriterLocks {
    /// Sorts the locks of the lock file and of the queue file ([`file_locks`] of each).
    pub fn from_locks(lock_file: &[FileLock], queue_file: &[FileLock]) -> WriterLocks {
        let waiting: Vec<&FileLock> = queue_file.iter().filter(|l| l.is_shared_flock()).collect();
        WriterLocks {
            holder: lock_file
                .iter()
                .find_map(|l| l.is_exclusive_flock().then_some(l.pid).flatten()),
            waiters: waiting.iter().filter_map(|l| l.pid).collect(),
            waiting: waiting.len(),
            blocked: lock_file
                .iter()
                .filter(|l| l.blocked)
                .filter_map(|l| l.pid)
                .collect(),
        }
    }
}

/// How many times [`file_locks`] reads `/proc/locks` at most.
const MAX_READS: usize = 8;

/// The sizes of the `read()`s of `/proc/locks`, one size per reading of the
/// whole table. The kernel walks the machine's lock list afresh for every
/// `read()` and fills it with whole lines until it holds at least the size
/// asked for (a page at most), so each size puts the walks' seams between
/// other lines.
const READ_SIZES: [usize; MAX_READS] = [4096, 1531, 2741, 3583, 1031, 2053, 3067, 3847];

/// `/proc/locks`, read in `read()`s of `size` bytes.
fn read_table(size: usize) -> io::Result<String> {
    use std::io::Read;
    let mut file = fs::File::open("/proc/locks")?;
    let mut table = Vec::new();
    let mut chunk = vec![0u8; size];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => table.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(table).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The locks on the file at `path`, as `/proc/locks` lists them now.
///
/// The kernel hands `/proc/locks` out at most a page (about 80 locks) per
/// `read()` and walks the machine's lock list afresh for each, so while
/// other processes lock and unlock, a table longer than one `read()` skips
/// or repeats locks that sit at a seam between two walks, even locks held
/// all along: a held writer lock read as free. A table that came in one
/// `read()` came from one walk and is taken as it is. A longer one is read
/// again with the seams elsewhere ([`READ_SIZES`]) until two readings in a
/// row agree whole; if the machine's locks never stand still that long,
/// this file's locks are those any reading saw, so that a lock held
/// throughout is not missing (one taken or dropped meanwhile may appear).
pub fn file_locks(path: &Path) -> io::Result<Vec<FileLock>> {
    let meta = fs::metadata(path)?;
    let mine = |table: &str| parse(table, meta.dev(), meta.ino());
    let mut last = read_table(READ_SIZES[0])?;
    if last.len() < READ_SIZES[0] {
        return Ok(mine(&last));
    }
    let mut seen = mine(&last);
    for &size in &READ_SIZES[1..] {
        let next = read_table(size)?;
        if next == last {
            return Ok(mine(&next));
        }
        for lock in mine(&next) {
            if !seen.contains(&lock) {
                seen.push(lock);
            }
        }
        last = next;
    }
    Ok(seen)
}

fn parse(table: &str, dev: u64, ino: u64) -> Vec<FileLock> {
    let major = libc::major(dev) as u64;
    let minor = libc::minor(dev) as u64;
    let mut locks = Vec::new();
    for line in table.lines() {
        let mut fields = line.split_whitespace().skip(1).peekable();
        let blocked = fields.peek() == Some(&"->");
        if blocked {
            fields.next();
        }
        let fields: Vec<&str> = fields.collect();
        if fields.len() < 5 {
            continue;
        }
        let kind = match fields[0] {
            "FLOCK" => LockKind::Flock,
            "POSIX" => LockKind::Posix,
            "OFDLCK" => LockKind::Ofd,
            _ => continue,
        };
        let mut id = fields[4].split(':');
        let (Some(maj), Some(min), Some(inode)) = (id.next(), id.next(), id.next()) else {
            continue;
        };
        let same = u64::from_str_radix(maj, 16).ok() == Some(major)
            && u64::from_str_radix(min, 16).ok() == Some(minor)
            && inode.parse::<u64>().ok() == Some(ino);
        if !same {
            continue;
        }
        locks.push(FileLock {
            kind,
            exclusive: fields[2] == "WRITE",
            pid: fields[3]
                .parse::<i64>()
                .ok()
                .filter(|p| *p > 0)
                .map(|p| p as u32),
            blocked,
        });
    }
    locks
}

/// The process holding the exclusive `flock()` on `path`, if any.
pub fn flock_holder(path: &Path) -> Option<u32> {
    file_locks(path)
        .ok()?
        .into_iter()
        .find_map(|l| l.is_exclusive_flock().then_some(l.pid).flatten())
}

/// How many holders of a shared `flock()` on `path` there are (waiting writers
/// on a queue file).
pub fn shared_flocks(path: &Path) -> usize {
    file_locks(path)
        .map(|locks| locks.iter().filter(|l| l.is_shared_flock()).count())
        .unwrap_or(0)
}

/// Processes other than `except` holding an exclusive POSIX lock on the
/// database or its `-wal`/`-shm` files: SQLite's RESERVED lock and beyond, or
/// a WAL write lock, that is, writers inside or outside the queue.
pub fn sqlite_writers(database: &Path, except: &[u32]) -> Vec<u32> {
    let mut pids = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        let Ok(locks) = file_locks(Path::new(&name)) else {
            continue;
        };
        for l in locks {
            if l.kind == LockKind::Posix && l.exclusive && !l.blocked {
                if let Some(pid) = l.pid.filter(|p| !except.contains(p)) {
                    if !pids.contains(&pid) {
                        pids.push(pid);
                    }
                }
            }
        }
    }
    pids
}

/// For a busy message: the process holding the database's writer turn
/// (else a writer outside the queue), and a process holding SQLite's own
/// write lock outside the queue (not the turn's holder), both other than
/// `me`. Behind a writer outside the queue the turn's holder only waits in
/// its busy handler; the second answer names the one it waits for.
pub fn holder_and_outside_writer(database: &Path, me: u32) -> (Option<u32>, Option<u32>) {
    let turn = flock_holder(&crate::paths::lock_path(database));
    let mut except = vec![me];
    except.extend(turn);
    let outside = sqlite_writers(database, &except).first().copied();
    (turn.or(outside).filter(|p| *p != me), outside)
}

/// The process holding a write lock on the database: the queue's holder
/// first, else a writer outside the queue ([`sqlite_writers`]), other than
/// this process.
pub fn database_holder(database: &Path) -> Option<u32> {
    flock_holder(&crate::paths::lock_path(database)).or_else(|| {
        sqlite_writers(database, &[crate::process::current_pid()])
            .first()
            .copied()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn parses_proc_locks_lines() {
        let dev = libc::makedev(0xfd, 0x01);
        let table = "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 4243 fd:01:1234 0 EOF\n\
                     2: FLOCK  ADVISORY  READ 77 fd:01:1234 0 EOF\n\
                     3: POSIX  ADVISORY  WRITE 88 fd:01:999 0 EOF\n\
                     4: OFDLCK ADVISORY  READ -1 fd:01:1234 0 EOF\n";
        let locks = parse(table, dev, 1234);
        assert_eq!(locks.len(), 4);
        assert_eq!(locks[0].pid, Some(4242));
        assert!(locks[0].exclusive && !locks[0].blocked);
        assert!(locks[1].blocked);
        assert!(!locks[2].exclusive);
        assert_eq!(locks[3].pid, None);
    }

    /// Every how many locks of [`churning_locks`] one is exclusive and kept.
    const STEADY_EVERY: usize = 30;

    /// Takes `count` `flock()`s on files of `dir`: every [`STEADY_EVERY`]-th
    /// exclusive and kept (returned with its path), the others shared and
    /// dropped and taken again by a thread until `stop`, so that
    /// `/proc/locks` runs over several pages and changes all the time.
    fn churning_locks(
        dir: &Path,
        count: usize,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> (
        Vec<(std::path::PathBuf, fs::File)>,
        std::thread::JoinHandle<()>,
    ) {
        let (mut steady, mut churned) = (Vec::new(), Vec::new());
        for i in 0..count {
            let path = dir.join(format!("lock-{i}"));
            let file = fs::File::create(&path).expect("create");
            let kept = i % STEADY_EVERY == 0;
            let how = if kept { libc::LOCK_EX } else { libc::LOCK_SH };
            // SAFETY: flock() on a descriptor this test owns.
            assert_eq!(unsafe { libc::flock(file.as_raw_fd(), how) }, 0);
            if kept {
                steady.push((path, file));
            } else {
                churned.push(file);
            }
        }
        let churn = std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for file in &churned {
                    // SAFETY: flock() on descriptors this thread owns.
                    unsafe {
                        libc::flock(file.as_raw_fd(), libc::LOCK_UN);
                        libc::flock(file.as_raw_fd(), libc::LOCK_SH);
                    }
                }
            }
        });
        (steady, churn)
    }

    #[test]
    fn held_locks_are_seen_while_other_locks_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (steady, churn) = churning_locks(dir.path(), 300, stop.clone());
        let held = |locks: &[FileLock]| locks.iter().any(|l| l.is_exclusive_flock());
        // Each round reads every kept lock once through `file_locks`, and
        // once as one plain read of the whole table would (the control:
        // it shows that the churn does make seams that miss held locks).
        let (mut missed, mut plain_missed, mut rounds) = (Vec::new(), 0, 0);
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(2)
            || (plain_missed == 0 && start.elapsed() < std::time::Duration::from_secs(6))
        {
            rounds += 1;
            for (path, _held) in &steady {
                if !held(&file_locks(path).expect("read /proc/locks")) {
                    missed.push(path.clone());
                }
                let meta = fs::metadata(path).expect("stat");
                let table = fs::read_to_string("/proc/locks").expect("read /proc/locks");
                if !held(&parse(&table, meta.dev(), meta.ino())) {
                    plain_missed += 1;
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        churn.join().expect("churn thread");
        let readings = rounds * steady.len();
        eprintln!(
            "{readings} readings of {} held locks among 300 changing: plain reads missed one \
             {plain_missed} times, file_locks {} times",
            steady.len(),
            missed.len()
        );
        assert!(
            missed.is_empty(),
            "held locks missing from {} of {readings} readings: {missed:?}",
            missed.len()
        );
    }

    #[test]
    fn writer_locks_sort_holder_waiters_and_blocked() {
        let dev = libc::makedev(0xfd, 0x01);
        // The lock file: a holder, a writer blocked in flock() outside the queue, and a
        // POSIX lock that is nobody's turn.
        let lock_file = parse(
            "1: FLOCK  ADVISORY  WRITE 10 fd:01:1 0 EOF
             1: -> FLOCK  ADVISORY  WRITE 11 fd:01:1 0 EOF
             2: POSIX  ADVISORY  WRITE 12 fd:01:1 0 EOF
",
            dev,
            1,
        );
        // The queue file: two waiters, one whose process is not visible here, and a
        // blocked exclusive flock, which is no waiter.
        let queue_file = parse(
            "3: FLOCK  ADVISORY  READ 20 fd:01:2 0 EOF
             4: FLOCK  ADVISORY  READ -1 fd:01:2 0 EOF
             5: FLOCK  ADVISORY  READ 21 fd:01:2 0 EOF
             5: -> FLOCK  ADVISORY  WRITE 22 fd:01:2 0 EOF
",
            dev,
            2,
        );
        let found = WriterLocks::from_locks(&lock_file, &queue_file);
        assert_eq!(found.holder, Some(10));
        assert_eq!(found.blocked, vec![11]);
        assert_eq!(found.waiters, vec![20, 21]);
        assert_eq!(
            found.waiting, 3,
            "the waiter without a visible pid counts too"
        );
        assert_eq!(WriterLocks::from_locks(&[], &[]), WriterLocks::default());
    }
}
