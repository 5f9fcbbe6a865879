//! Real-process helpers for the queue's integration tests: fork a child that
//! runs a closure and `_exit`s with its result, wait for it, and a pipe to
//! signal between the two.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use writerlock::handoff::inspect;
use writerlock::lockfiles::queue_path;
use writerlock::Wait;

pub mod faults;
pub mod page;
mod probe;
#[allow(unused_imports)]
pub use probe::*;

/// Forks; the child runs `f` and exits with its return value (101 on panic).
pub fn fork(f: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the child only runs `f` and then `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Waits for a child; its exit code, or 128 + the signal that ended it.
pub fn wait(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    loop {
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        assert_eq!(err.raw_os_error(), Some(libc::EINTR), "waitpid: {err}");
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// Kills a child with SIGKILL and reaps it.
pub fn kill9(pid: libc::pid_t) -> i32 {
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait(pid)
}

/// A one-way pipe for "I hold the lock now" signals between processes.
pub struct Pipe {
    read: i32,
    write: i32,
}

impl Pipe {
    pub fn new() -> Pipe {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        Pipe {
            read: fds[0],
            write: fds[1],
        }
    }

    pub fn send(&self, byte: u8) {
        assert_eq!(
            unsafe { libc::write(self.write, [byte].as_ptr().cast(), 1) },
            1
        );
    }

    /// Receives one byte, or `None` after `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<u8> {
        let mut pfd = libc::pollfd {
            fd: self.read,
            events: libc::POLLIN,
            revents: 0,
        };
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
        if rc <= 0 {
            return None;
        }
        let mut b = [0u8];
        (unsafe { libc::read(self.read, b.as_mut_ptr().cast(), 1) } == 1).then_some(b[0])
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// A temporary directory with a database holding a `publishes` table.
pub struct Db {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Db {
    pub fn new() -> Db {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("site.db");
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch(
            "CREATE TABLE publishes (n INTEGER, pid INTEGER, start_us INTEGER, end_us INTEGER);",
        )
        .expect("schema");
        Db { dir, path }
    }

    pub fn count(&self) -> i64 {
        let conn = Connection::open(&self.path).expect("open");
        conn.query_row("SELECT count(*) FROM publishes", [], |r| r.get(0))
            .expect("count")
    }

    /// `(start_us, end_us)` of every publish, in start order.
    pub fn intervals(&self) -> Vec<(i64, i64)> {
        let conn = Connection::open(&self.path).expect("open");
        let mut stmt = conn
            .prepare("SELECT start_us, end_us FROM publishes ORDER BY start_us")
            .expect("prepare");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query");
        rows.map(|r| r.expect("row")).collect()
    }

    pub fn integrity_ok(&self) -> bool {
        let conn = Connection::open(&self.path).expect("open");
        let text: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .expect("integrity_check");
        text == "ok"
    }
}

pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// One publish as a page save does it: read, hold, write.
pub fn publish_body(conn: &Connection, hold: Duration) -> rusqlite::Result<()> {
    let start = now_us();
    let n: i64 = conn.query_row("SELECT coalesce(max(n), 0) FROM publishes", [], |r| {
        r.get(0)
    })?;
    if !hold.is_zero() {
        std::thread::sleep(hold);
    }
    conn.execute(
        "INSERT INTO publishes (n, pid, start_us, end_us) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![n + 1, std::process::id(), start, now_us()],
    )?;
    Ok(())
}

/// Starts `n` children at once (they wait on a shared start time), each
/// running `f(index)`; returns their exit codes.
pub fn run_together(n: usize, f: impl Fn(usize) -> i32) -> Vec<i32> {
    let start_at = Instant::now() + Duration::from_millis(300);
    let pids: Vec<_> = (0..n)
        .map(|i| {
            let f = &f;
            fork(move || {
                let left = start_at.saturating_duration_since(Instant::now());
                std::thread::sleep(left);
                f(i)
            })
        })
        .collect();
    pids.into_iter().map(wait).collect()
}

pub fn open(path: &Path) -> Connection {
    Connection::open(path).expect("open database")
}

/// A wait of `s` seconds for a transaction's turn.
pub fn wait_secs(s: f64) -> Wait {
    Wait::transaction(Duration::from_secs_f64(s))
}

/// Whether the tests run as root (mounts, namespaces, nft rules and other
/// users' files need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Says why `test` skips (it needs root, or something the kernel or the
/// file system lacks).
pub fn skip(test: &str, why: &str) {
    println!("{test}: skipped: {why}");
}

/// Waits until `pid` has a place on the hand-off page of `db` (or panics after 10 s).
pub fn until_on_page(db: &Path, pid: libc::pid_t) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if inspect(&queue_path(db))
            .is_some_and(|page| page.queue.iter().any(|w| w.pid == pid as u32))
        {
            return;
        }
        assert!(
            Instant::now() < until,
            "pid {pid} never joined the hand-off line"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A single-threaded test runner for tests that fork: runs each test in
/// turn (or those whose names contain the first non-flag argument, leaving
/// out those whose names contain a `--skip NAME` argument, as libtest does),
/// prints libtest-style lines and the closing `N passed, N failed` line, and
/// exits non-zero on any failure.
pub fn run_tests(tests: &[(&str, fn())]) {
    let (mut filter, mut skips, mut list) = (None::<String>, Vec::<String>::new(), false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--skip" {
            skips.extend(args.next());
        } else if arg == "--list" {
            list = true;
        } else if !arg.starts_with('-') && filter.is_none() {
            filter = Some(arg);
        }
    }
    let selected: Vec<_> = tests
        .iter()
        .filter(|(name, _)| filter.as_deref().is_none_or(|f| name.contains(f)))
        .filter(|(name, _)| !skips.iter().any(|s| name.contains(s.as_str())))
        .collect();
    if list {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return;
    }
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut failed) = (0, Vec::new());
    for (name, test) in selected {
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(*test);
        let secs = started.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok ({secs:.2} s)");
            }
            Err(_) => {
                failed.push(*name);
                println!("test {name} ... FAILED ({secs:.2} s)");
            }
        }
    }
    let result = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {result}. {passed} passed; {} failed; 0 ignored; 0 measured; 0 filtered out\n",
        failed.len()
    );
    println!("{passed} passed, {} failed", failed.len());
    if !failed.is_empty() {
        for name in failed {
            println!("failed: {name}");
        }
        std::process::exit(1);
    }
}

/// Forks a process that takes a read lease on `path` (ignoring the SIGIO of
/// a lease break), says so on `pipe` (a `2` when the file system refuses a
/// lease), holds it `for_how_long` (`None`: until killed) and then lives on
/// without it for 30 s.
pub fn lease_holder(
    path: &std::path::Path,
    pipe: &Pipe,
    for_how_long: Option<Duration>,
) -> libc::pid_t {
    fork(|| {
        let Ok(file) = std::fs::File::open(path) else {
            return 1;
        };
        use std::os::fd::AsRawFd;
        // SAFETY: ignoring SIGIO (a lease break) and taking, then giving
        // up, a read lease on this child's own read-only descriptor.
        unsafe {
            libc::signal(libc::SIGIO, libc::SIG_IGN);
            if libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) != 0 {
                pipe.send(2);
                return 2;
            }
            pipe.send(1);
            if let Some(hold) = for_how_long {
                std::thread::sleep(hold);
                libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK);
            }
        }
        std::thread::sleep(Duration::from_secs(30));
        0
    })
}
