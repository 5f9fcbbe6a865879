//! Lock files an operator removes or replaces while writers run: a cleanup
//! job's `rm`, a restore that renames a new file over one. A writer that
//! got the `flock()` of a descriptor no longer at the path excludes nobody
//! who opens the path now, so every writer checks after each `flock()` and
//! reopens; a holder on a removed lock file is still waited for (it marks
//! its turn on the queue file).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use writerlock::handoff::inspect;
use writerlock::holders::file_locks;
use writerlock::lockfiles::{lock_path, queue_path};
use writerlock::{BusyKind, Strategy, Wait, WriterQueue};

const STRATEGIES: [Strategy; 2] = [Strategy::Poll, Strategy::Handoff];

/// How an operator changes a lock file.
#[derive(Debug, Clone, Copy)]
enum Change {
    /// `rm <file>`.
    Remove,
    /// A new file renamed over it (`mv new <file>`).
    RenameOver,
}

const CHANGES: [Change; 2] = [Change::Remove, Change::RenameOver];

fn change(path: &Path, how: Change) {
    match how {
        Change::Remove => std::fs::remove_file(path).expect("rm the lock file"),
        Change::RenameOver => {
            let mut new = path.as_os_str().to_owned();
            new.push(".new");
            let new = PathBuf::from(new);
            std::fs::write(&new, b"").expect("a new file");
            std::fs::rename(&new, path).expect("rename it over the lock file");
        }
    }
}

/// Which of the two files.
fn file_of(db: &Path, queue_file: bool) -> PathBuf {
    if queue_file {
        queue_path(db)
    } else {
        lock_path(db)
    }
}

fn wait_ms(ms: u64) -> Wait {
    Wait::transaction(Duration::from_millis(ms))
}

/// Takes a turn on `queue`, holds it `hold` and records it in `log` as
/// `enter leave pid`; 0 on success.
fn recorded_turn(queue: &WriterQueue, hold: Duration, log: &Path) -> i32 {
    if let Err(err) = queue.take(BusyKind::Transaction, &wait_ms(10_000)) {
        eprintln!("pid {}: {err}", std::process::id());
        return 1;
    }
    let enter = mono_us();
    std::thread::sleep(hold);
    let leave = mono_us();
    if append_line(log, &format!("{enter} {leave} {}", std::process::id())).is_err() {
        return 2;
    }
    i32::from(!matches!(queue.release(), Ok(true)))
}

/// Writer A holds its turn; the lock file (or the queue file) is removed or
/// replaced; writer B, started after that, must not enter before A leaves.
fn a_writer_started_after_the_change_waits_for_the_holder() {
    for strategy in STRATEGIES {
        for queue_file in [false, true] {
            for how in CHANGES {
                let case = format!(
                    "{strategy:?}, {how:?} of {}",
                    file_of(Path::new("db"), queue_file).display()
                );
                let db = Db::new();
                let log = db.dir.path().join("turns");
                let held = Pipe::new();
                let a = fork(|| {
                    let queue = WriterQueue::with_strategy(&db.path, strategy);
                    if queue.take(BusyKind::Transaction, &wait_ms(5_000)).is_err() {
                        return 1;
                    }
                    let enter = mono_us();
                    held.send(1);
                    std::thread::sleep(Duration::from_millis(800));
                    let leave = mono_us();
                    if append_line(&log, &format!("{enter} {leave} {}", std::process::id()))
                        .is_err()
                    {
                        return 2;
                    }
                    i32::from(!matches!(queue.release(), Ok(true)))
                });
                assert_eq!(
                    held.recv(Duration::from_secs(10)),
                    Some(1),
                    "{case}: A holds"
                );
                change(&file_of(&db.path, queue_file), how);
                let b = fork(|| {
                    let queue = WriterQueue::with_strategy(&db.path, strategy);
                    recorded_turn(&queue, Duration::from_millis(50), &log)
                });
                assert_eq!((wait(a), wait(b)), (0, 0), "{case}");
                let turns = read_turns(&log);
                assert_eq!(turns.len(), 2, "{case}: {turns:?}");
                assert_eq!(turns[0].2, a as i64, "{case}: A went first");
                assert_no_overlap(&turns);
            }
        }
    }
}

/// A handle opened before the lock file was removed or replaced (a PHP-FPM
/// worker keeps its files between requests) notices at its next turn: it
/// waits for a writer holding the new file instead of locking the old one.
fn a_long_lived_handle_excludes_at_its_next_turn() {
    for strategy in STRATEGIES {
        for how in CHANGES {
            let case = format!("{strategy:?}, {how:?}");
            let db = Db::new();
            let log = db.dir.path().join("turns");
            let ready = Pipe::new();
            let go = Pipe::new();
            let old = fork(|| {
                let queue = WriterQueue::with_strategy(&db.path, strategy);
                // A first turn opens (and keeps) the files.
                if queue.take(BusyKind::Transaction, &wait_ms(5_000)).is_err()
                    || !matches!(queue.release(), Ok(true))
                {
                    return 1;
                }
                ready.send(1);
                if go.recv(Duration::from_secs(20)) != Some(1) {
                    return 2;
                }
                recorded_turn(&queue, Duration::from_millis(50), &log)
            });
            assert_eq!(ready.recv(Duration::from_secs(10)), Some(1), "{case}");
            change(&lock_path(&db.path), how);
            let held = Pipe::new();
            let new = fork(|| {
                let queue = WriterQueue::with_strategy(&db.path, strategy);
                if queue.take(BusyKind::Transaction, &wait_ms(5_000)).is_err() {
                    return 1;
                }
                let enter = mono_us();
                held.send(1);
                std::thread::sleep(Duration::from_millis(800));
                let leave = mono_us();
                if append_line(&log, &format!("{enter} {leave} {}", std::process::id())).is_err() {
                    return 2;
                }
                i32::from(!matches!(queue.release(), Ok(true)))
            });
            assert_eq!(
                held.recv(Duration::from_secs(10)),
                Some(1),
                "{case}: the new writer holds"
            );
            go.send(1);
            assert_eq!((wait(old), wait(new)), (0, 0), "{case}");
            let turns = read_turns(&log);
            assert_eq!(turns.len(), 2, "{case}: {turns:?}");
            assert_eq!(
                turns[0].2, new as i64,
                "{case}: the writer on the new file went first"
            );
            assert_no_overlap(&turns);
        }
    }
}

/// A handle whose hand-off slice is still open (its last turn given back microseconds ago)
/// takes its next turn without waiting first: the lock file replaced in between, and the
/// new file held by a writer that only `flock()`s it, that next turn must wait for that
/// writer (and say busy when its limit runs out), never enter on the old file.
fn a_handle_within_its_slice_notices_a_replaced_lock_file() {
    use std::os::unix::io::AsRawFd;
    for strategy in STRATEGIES {
        for how in CHANGES {
            let case = format!("{strategy:?}, {how:?}");
            let db = Db::new();
            let queue = WriterQueue::with_strategy(&db.path, strategy);
            let short = Wait::statement(Duration::from_millis(300));
            queue
                .take(BusyKind::Statement, &short)
                .expect("a first turn");
            assert!(matches!(queue.release(), Ok(true)), "{case}");
            // Within the slice (2 ms): replace the lock file, and lock the new one as a
            // writer that knows only the lock file would.
            change(&lock_path(&db.path), how);
            let new = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(lock_path(&db.path))
                .expect("open the new lock file");
            // SAFETY: flock() on a descriptor this test owns.
            assert_eq!(unsafe { libc::flock(new.as_raw_fd(), libc::LOCK_EX) }, 0);
            let started = Instant::now();
            let got = queue.take(BusyKind::Statement, &short);
            assert!(
                matches!(got, Err(writerlock::Error::Busy(_))),
                "{case}: entered on the old lock file while the new one was held: {got:?}"
            );
            assert!(started.elapsed() >= Duration::from_millis(250), "{case}");
            drop(new);
            queue
                .take(BusyKind::Statement, &short)
                .unwrap_or_else(|e| panic!("{case}: the free new lock file: {e}"));
            assert!(matches!(queue.release(), Ok(true)), "{case}");
        }
    }
}

/// Whether a process with `pid` holds a shared `flock()` on the file at `path`.
fn waits_on(path: &Path, pid: libc::pid_t) -> bool {
    file_locks(path)
        .unwrap_or_default()
        .iter()
        .any(|l| l.is_shared_flock() && l.pid == Some(pid as u32))
}

/// A handle opened before the queue file was removed or replaced waits, at
/// its next turn, on the queue file at the path (where the others and
/// `writerlock status` look for waiters) and, with the hand-off strategy,
/// on the new file's hand-off page.
fn a_long_lived_handle_waits_on_the_new_queue_file() {
    for strategy in STRATEGIES {
        for how in CHANGES {
            let case = format!("{strategy:?}, {how:?}");
            let db = Db::new();
            let ready = Pipe::new();
            let go = Pipe::new();
            let old = fork(|| {
                let queue = WriterQueue::with_strategy(&db.path, strategy);
                if queue.take(BusyKind::Transaction, &wait_ms(5_000)).is_err()
                    || !matches!(queue.release(), Ok(true))
                {
                    return 1;
                }
                ready.send(1);
                if go.recv(Duration::from_secs(20)) != Some(1) {
                    return 2;
                }
                match queue.take(BusyKind::Transaction, &wait_ms(20_000)) {
                    Ok(_) => 0,
                    Err(_) => 3,
                }
            });
            assert_eq!(ready.recv(Duration::from_secs(10)), Some(1), "{case}");
            change(&queue_path(&db.path), how);
            // Another process holds the turn, so the old handle must wait.
            let holder = WriterQueue::with_strategy(&db.path, strategy);
            holder
                .take(BusyKind::Transaction, &wait_ms(5_000))
                .expect("the turn");
            go.send(1);
            let until = Instant::now() + Duration::from_secs(5);
            while !waits_on(&queue_path(&db.path), old) {
                assert!(
                    Instant::now() < until,
                    "{case}: the waiting handle holds nothing on the queue file at the path"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            if strategy == Strategy::Handoff {
                let page = inspect(&queue_path(&db.path)).expect("a hand-off page");
                assert!(
                    page.queue.iter().any(|w| w.pid == old as u32),
                    "{case}: the waiter is not on the new file's page: {page:?}"
                );
            }
            assert!(holder.release().expect("release"));
            assert_eq!(wait(old), 0, "{case}");
        }
    }
}

fn main() {
    run_tests(&[
        (
            "a_writer_started_after_the_change_waits_for_the_holder",
            a_writer_started_after_the_change_waits_for_the_holder,
        ),
        (
            "a_long_lived_handle_excludes_at_its_next_turn",
            a_long_lived_handle_excludes_at_its_next_turn,
        ),
        (
            "a_long_lived_handle_waits_on_the_new_queue_file",
            a_long_lived_handle_waits_on_the_new_queue_file,
        ),
        (
            "a_handle_within_its_slice_notices_a_replaced_lock_file",
            a_handle_within_its_slice_notices_a_replaced_lock_file,
        ),
    ]);
}
