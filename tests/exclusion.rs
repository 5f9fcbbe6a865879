//! Mutual exclusion observed on the queue itself, where SQLite's own write
//! lock cannot do the work for it: writers that hold the turn without any
//! transaction, probes of `<db>.writer-lock` from other processes, holders
//! that are not inside a transaction, a program a holder started, killed
//! waiters in the hand-off line, and a COMMIT that SQLite refuses.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use writerlock::lockfiles::{lock_path, queue_path};
use writerlock::{BusyKind, Error, Strategy, Wait, WriterQueue};

const STRATEGIES: [Strategy; 2] = [Strategy::Poll, Strategy::Handoff];

fn statement_wait(ms: u64) -> Wait {
    Wait::statement(Duration::from_millis(ms))
}

/// Several processes take the turn with `take`/`release` only (no SQLite
/// at all) and record when they entered and left: no two turns overlap.
fn turns_held_without_sqlite_never_overlap() {
    for strategy in STRATEGIES {
        let db = Db::new();
        let log = db.dir.path().join("turns");
        let codes = run_together(5, |_| {
            let queue = WriterQueue::with_strategy(&db.path, strategy);
            for _ in 0..8 {
                if queue
                    .take(BusyKind::Transaction, &statement_wait(20_000))
                    .is_err()
                {
                    return 1;
                }
                let enter = mono_us();
                std::thread::sleep(Duration::from_millis(2));
                let leave = mono_us();
                let line = format!("{enter} {leave} {}", std::process::id());
                if append_line(&log, &line).is_err() {
                    return 2;
                }
                if queue.release().is_err() {
                    return 3;
                }
            }
            0
        });
        assert!(codes.iter().all(|c| *c == 0), "{strategy:?}: {codes:?}");
        let turns = read_turns(&log);
        assert_eq!(turns.len(), 40, "{strategy:?}");
        assert_no_overlap(&turns);
    }
}

/// While a turn is held, `flock(LOCK_EX|LOCK_NB)` on the lock file from
/// another process fails with EWOULDBLOCK; after the release it succeeds.
fn another_process_sees_the_turn_held_on_the_lock_file() {
    for strategy in STRATEGIES {
        let db = Db::new();
        let queue = WriterQueue::with_strategy(&db.path, strategy);
        queue
            .take(BusyKind::Transaction, &statement_wait(5_000))
            .expect("take");
        assert_eq!(probe_lock(&db.path), Probe::Held, "{strategy:?}: held");
        assert!(queue.release().expect("release"));
        assert_eq!(probe_lock(&db.path), Probe::Free, "{strategy:?}: released");

        // And the other way round: a holder in another process, the probe
        // from this one's own fresh descriptor.
        let pipe = Pipe::new();
        let holder = take_only_holder(&db.path, strategy, &pipe, Duration::from_secs(30));
        let file = std::fs::File::open(lock_path(&db.path)).expect("open the lock file");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let rc = unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) };
        let errno = std::io::Error::last_os_error().raw_os_error();
        assert_eq!(
            (rc, errno),
            (-1, Some(libc::EWOULDBLOCK)),
            "{strategy:?}: the lock file was free during another process's turn"
        );
        assert_eq!(kill9(holder), 128 + libc::SIGKILL);
        assert_eq!(
            unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) },
            0,
            "{strategy:?}: the killed holder's lock stayed"
        );
    }
}

/// Checks that SQLite itself is free: a raw connection starts and ends a
/// Forks a process that takes the turn on `db` with `take` alone (no
/// SQLite anywhere), holds it for `hold` and gives it back; returns its pid
/// once it holds the turn.
fn take_only_holder(db: &Path, strategy: Strategy, pipe: &Pipe, hold: Duration) -> libc::pid_t {
    let holder = fork(|| {
        let queue = WriterQueue::with_strategy(db, strategy);
        if queue
            .take(BusyKind::Transaction, &statement_wait(5_000))
            .is_err()
        {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(hold);
        i32::from(!matches!(queue.release(), Ok(true)))
    });
    assert_eq!(
        pipe.recv(Duration::from_secs(10)),
        Some(1),
        "the holder took the turn"
    );
    holder
}

/// write transaction without waiting.
fn assert_sqlite_free(db: &Path) {
    let raw = open(db);
    raw.busy_timeout(Duration::ZERO).expect("busy timeout");
    raw.execute_batch("BEGIN IMMEDIATE; ROLLBACK")
        .expect("SQLite's own write lock is free");
}

const TRANSACTION_BUSY: &str = "database is busy: the transaction could not start within 1 s \
     (waited {} s, [DatabaseSettings] SQLiteTransactionWait), another write held the lock all \
     that time; nothing was written";
const STATEMENT_BUSY: &str = "database is busy: the statement waited {} s for another write to \
     end (limit 0.3 s, [DatabaseSettings] SQLiteBusyTimeout) and was not run; nothing was written";

/// Queued writers against `holder` (a process holding the turn outside any
/// SQLite transaction): refused with `Busy` after their limits, the exact
/// messages, the holder named, SQLite free all along, nothing written.
fn refused_by_a_holder_outside_sqlite(db: &Path, holder: libc::pid_t) {
    let conn = open(db);
    for strategy in STRATEGIES {
        let queue = WriterQueue::with_strategy(db, strategy);
        let err = queue
            .take(BusyKind::Statement, &statement_wait(300))
            .expect_err("the turn is held");
        let busy = err.busy().expect("a busy error");
        assert_eq!(busy.holder_pid, Some(holder as u32), "{strategy:?}");
        assert_measured(&err.to_string(), STATEMENT_BUSY, 0.3, 2.3);
        let err = queue
            .execute(
                &conn,
                "INSERT INTO publishes (n) VALUES (-1)",
                &statement_wait(300),
            )
            .expect_err("the turn is held");
        assert_measured(&err.to_string(), STATEMENT_BUSY, 0.3, 2.3);
        assert!(!queue.holding());
        assert_sqlite_free(db);
    }
    let queue = WriterQueue::new(db);
    let err = queue
        .begin(&conn, &Wait::transaction(Duration::from_secs(1)))
        .expect_err("the turn is held");
    assert_eq!(
        err.busy().and_then(|b| b.holder_pid),
        Some(holder as u32),
        "{err}"
    );
    assert_measured(&err.to_string(), TRANSACTION_BUSY, 1.0, 3.0);
    assert!(conn.is_autocommit(), "no transaction was left open");
    assert!(!queue.holding());
    assert_sqlite_free(db);
}

/// A writer waits for, and after its limit is refused by, a process that
/// holds the turn with `take` and has no SQLite transaction at all.
fn a_queued_writer_waits_for_a_turn_held_outside_any_transaction() {
    let db = Db::new();
    let pipe = Pipe::new();
    let holder = take_only_holder(
        &db.path,
        Strategy::default(),
        &pipe,
        Duration::from_secs(30),
    );
    refused_by_a_holder_outside_sqlite(&db.path, holder);
    assert_eq!(kill9(holder), 128 + libc::SIGKILL);
    assert_eq!(db.count(), 0, "nothing was written");

    // A holder that releases after 400 ms is waited for, not refused.
    let holder = take_only_holder(
        &db.path,
        Strategy::default(),
        &pipe,
        Duration::from_millis(400),
    );
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    queue
        .begin(&conn, &Wait::transaction(Duration::from_secs(10)))
        .expect("the writer waited for the holder");
    assert!(
        queue.last_wait() >= Duration::from_millis(300),
        "the writer did not wait for the holder: {:?}",
        queue.last_wait()
    );
    publish_body(&conn, Duration::ZERO).expect("write");
    queue.commit(&conn).expect("commit");
    assert_eq!(wait(holder), 0);
    assert_eq!(db.count(), 1);
}

/// The driver protocol's raw `flock(LOCK_EX)` on the lock file, from a
/// program that never opens the database, is waited for the same way.
fn a_queued_writer_waits_for_a_raw_flock_on_the_lock_file() {
    let db = Db::new();
    let pipe = Pipe::new();
    let raw_holder = |hold: Duration| {
        fork(|| {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(lock_path(&db.path))
                .expect("lock file");
            let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
            if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
                return 1;
            }
            pipe.send(1);
            std::thread::sleep(hold);
            unsafe { libc::flock(fd, libc::LOCK_UN) };
            0
        })
    };
    let holder = raw_holder(Duration::from_secs(30));
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    refused_by_a_holder_outside_sqlite(&db.path, holder);
    assert_eq!(kill9(holder), 128 + libc::SIGKILL);

    let holder = raw_holder(Duration::from_millis(400));
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    let queue = WriterQueue::new(&db.path);
    let waited = queue
        .take(BusyKind::Statement, &statement_wait(10_000))
        .expect("the writer waited for the raw holder");
    assert!(waited >= Duration::from_millis(300), "waited {waited:?}");
    assert!(queue.release().expect("release"));
    assert_eq!(wait(holder), 0);
}

/// Where the descriptors of a process point (the targets of `/proc/PID/fd`).
fn open_files(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|entry| entry.ok())
                .filter_map(|entry| std::fs::read_link(entry.path()).ok())
                .map(|target| target.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A holder starts a program (fork + exec through `std::process::Command`)
/// and dies while the program lives on: the program has none of the lock
/// files open and the next writer gets the turn at once.
fn a_program_started_by_a_holder_never_keeps_the_turn() {
    for killed in [false, true] {
        let db = Db::new();
        let pipe = Pipe::new();
        let spawned = db.dir.path().join("spawned");
        let holder = fork(|| {
            let queue = WriterQueue::new(&db.path);
            if queue
                .take(BusyKind::Transaction, &statement_wait(5_000))
                .is_err()
            {
                return 1;
            }
            let Ok(child) = std::process::Command::new("sleep").arg("30").spawn() else {
                return 2;
            };
            if std::fs::write(&spawned, child.id().to_string()).is_err() {
                return 3;
            }
            pipe.send(1);
            if !killed {
                // Dies holding the turn, without releasing it.
                unsafe { libc::_exit(0) };
            }
            std::thread::sleep(Duration::from_secs(30));
            0
        });
        assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
        let program: u32 = std::fs::read_to_string(&spawned)
            .expect("the program's pid")
            .parse()
            .expect("a pid");
        let files = open_files(program);
        let leaked: Vec<_> = files
            .iter()
            .filter(|f| f.contains(".writer-lock") || f.contains(".writer-queue"))
            .collect();
        if killed {
            assert_eq!(kill9(holder), 128 + libc::SIGKILL);
        } else {
            assert_eq!(wait(holder), 0);
        }
        // The program outlives its parent.
        assert_eq!(unsafe { libc::kill(program as libc::pid_t, 0) }, 0);
        let probe = probe_lock(&db.path);
        let queue = WriterQueue::new(&db.path);
        let taken = queue.take(BusyKind::Statement, &statement_wait(500));
        unsafe { libc::kill(program as libc::pid_t, libc::SIGKILL) };
        assert_eq!(
            probe,
            Probe::Free,
            "killed {killed}: the turn stayed held by the program (it has {leaked:?} open)"
        );
        assert!(
            leaked.is_empty(),
            "killed {killed}: the program holds {leaked:?}"
        );
        let waited = taken.expect("the next writer gets the turn at once");
        assert!(waited < Duration::from_millis(500), "{waited:?}");
        assert!(queue.release().expect("release"));
    }
}

/// Forty hand-overs, each behind a waiter killed with SIGKILL while it
/// was first in the hand-off line: the next writer gets the turn within
/// milliseconds of the release, not after the 50 ms a free lock left
/// untaken needs before anyone behind may take it.
fn a_killed_waiter_costs_the_hand_off_line_milliseconds() {
    const ROUNDS: usize = 40;
    let db = Db::new();
    let log = db.dir.path().join("granted");
    let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
    let mut costs = Vec::new();
    for round in 0..ROUNDS {
        queue
            .take(BusyKind::Transaction, &statement_wait(10_000))
            .expect("take");
        let path = db.path.as_path();
        // The first in line, killed while it waits.
        let doomed = fork(|| {
            let q = WriterQueue::with_strategy(path, Strategy::Handoff);
            i32::from(
                q.take(BusyKind::Transaction, &statement_wait(30_000))
                    .is_err(),
            )
        });
        until_on_page(&db.path, doomed);
        // The next in line, which records when it got the turn.
        let next = fork(|| {
            let q = WriterQueue::with_strategy(path, Strategy::Handoff);
            if q.take(BusyKind::Transaction, &statement_wait(30_000))
                .is_err()
            {
                return 1;
            }
            let granted = mono_us();
            let ok = append_line(&log, &format!("{round} {granted}")).is_ok();
            i32::from(!ok || q.release().is_err())
        });
        until_on_page(&db.path, next);
        assert_eq!(kill9(doomed), 128 + libc::SIGKILL);
        // Long enough for the next one's look at those ahead (every 20 ms).
        std::thread::sleep(Duration::from_millis(40));
        let released = mono_us();
        assert!(queue.release().expect("release"));
        assert_eq!(wait(next), 0, "round {round}");
        let text = std::fs::read_to_string(&log).expect("log");
        let granted: i64 = text
            .lines()
            .find_map(|l| {
                l.split_once(' ')
                    .filter(|(r, _)| r.parse::<usize>().ok() == Some(round))
                    .map(|(_, t)| t.parse().expect("a time"))
            })
            .expect("the round's grant");
        costs.push(Duration::from_micros((granted - released).max(0) as u64));
    }
    costs.sort();
    let median = costs[ROUNDS / 2];
    let total: Duration = costs.iter().sum();
    println!(
        "{ROUNDS} hand-overs behind a killed waiter: median {:.2} ms, p90 {:.2} ms, \
         longest {:.2} ms, total {:.1} ms",
        median.as_secs_f64() * 1e3,
        costs[ROUNDS * 9 / 10].as_secs_f64() * 1e3,
        costs[ROUNDS - 1].as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3
    );
    // The bound is the point: a dead head noticed only by the 50 ms
    // fallback costs at least 50 ms a hand-over.
    assert!(
        median < Duration::from_millis(10),
        "a hand-over behind a killed waiter took {median:?} (median)"
    );
    assert!(
        total < Duration::from_millis(1500),
        "{ROUNDS} hand-overs took {total:?}"
    );
}

/// A COMMIT that SQLite refuses (a deferred foreign key) leaves the
/// transaction open, and the turn stays held until the ROLLBACK: another
/// process's probe finds the lock file held, then free.
fn a_refused_commit_keeps_the_turn_until_rollback() {
    for strategy in STRATEGIES {
        let db = Db::new();
        let conn = open(&db.path);
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE pages (id INTEGER PRIMARY KEY);
             CREATE TABLE links (page INTEGER REFERENCES pages (id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .expect("schema");
        let queue = WriterQueue::with_strategy(&db.path, strategy);
        queue
            .begin(&conn, &Wait::transaction(Duration::from_secs(5)))
            .expect("begin");
        conn.execute("INSERT INTO links (page) VALUES (42)", [])
            .expect("a deferred violation is accepted until COMMIT");
        let err = queue.commit(&conn).expect_err("SQLite refuses the COMMIT");
        assert!(
            matches!(
                err,
                Error::Sqlite {
                    statement: "COMMIT",
                    ..
                }
            ),
            "{strategy:?}: {err}"
        );
        assert!(!conn.is_autocommit(), "the transaction stays open");
        assert_eq!(
            probe_lock(&db.path),
            Probe::Held,
            "{strategy:?}: the turn was given back with the transaction still open"
        );
        assert!(queue.holding(), "{strategy:?}: the handle gave its turn up");
        let other = WriterQueue::with_strategy(&db.path, strategy);
        assert!(
            other
                .take(BusyKind::Statement, &statement_wait(200))
                .is_err(),
            "{strategy:?}: another writer got the turn"
        );
        queue.rollback(&conn).expect("rollback");
        assert!(conn.is_autocommit());
        assert!(!queue.holding());
        assert_eq!(
            probe_lock(&db.path),
            Probe::Free,
            "{strategy:?}: after rollback"
        );
        let links: i64 = conn
            .query_row("SELECT count(*) FROM links", [], |r| r.get(0))
            .expect("count");
        assert_eq!(links, 0);
    }
}

/// A waiting writer holds a shared `flock()` on `<db>.writer-queue` while it
/// waits (what Exponential's driver protocol reads to yield to waiters):
/// another process's exclusive probe of the queue file fails then, and
/// succeeds once the waiter has its turn and has left the line.
fn a_waiting_writer_is_seen_on_the_queue_file() {
    for strategy in [Strategy::Poll, Strategy::Handoff] {
        let db = Db::new();
        let pipe = Pipe::new();
        let holder = take_only_holder(&db.path, strategy, &pipe, Duration::from_secs(30));
        let queue_file = queue_path(&db.path);
        assert_eq!(
            probe_flock(&queue_file),
            Probe::Free,
            "{strategy:?}: nobody waits yet"
        );
        let waiter = fork(|| {
            let queue = WriterQueue::with_strategy(&db.path, strategy);
            if queue
                .take(BusyKind::Transaction, &statement_wait(10_000))
                .is_err()
            {
                return 1;
            }
            pipe.send(2);
            std::thread::sleep(Duration::from_secs(30));
            0
        });
        let until = Instant::now() + Duration::from_secs(5);
        while probe_flock(&queue_file) == Probe::Free {
            assert!(
                Instant::now() < until,
                "{strategy:?}: the waiting writer holds nothing on the queue file"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(kill9(holder), 128 + libc::SIGKILL);
        assert_eq!(
            pipe.recv(Duration::from_secs(10)),
            Some(2),
            "{strategy:?}: the waiter's turn"
        );
        assert_eq!(
            probe_flock(&queue_file),
            Probe::Free,
            "{strategy:?}: the writer holding its turn is still in the line"
        );
        assert_eq!(kill9(waiter), 128 + libc::SIGKILL);
    }
}

/// A program holding `<db>.writer-queue` exclusively (a writer does so only
/// for a probe's microseconds) cannot keep a writer past its limit: the wait
/// for the turn ends busy at its limit, not interrupted and not later.
fn a_queue_file_held_exclusively_cannot_outlast_the_limit() {
    for strategy in [Strategy::Poll, Strategy::Handoff] {
        let db = Db::new();
        let queue = WriterQueue::with_strategy(&db.path, strategy);
        queue
            .take(BusyKind::Statement, &statement_wait(5_000))
            .expect("create the lock files");
        queue.release().expect("release");
        let pipe = Pipe::new();
        let path = queue_path(&db.path);
        let holder = fork(|| {
            let Ok(file) = std::fs::File::open(&path) else {
                return 1;
            };
            // SAFETY: flock() on this child's own descriptor.
            if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) } != 0 {
                return 2;
            }
            pipe.send(1);
            std::thread::sleep(Duration::from_secs(30));
            0
        });
        assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
        let (tx, rx) = std::sync::mpsc::channel();
        let db_path = db.path.clone();
        std::thread::spawn(move || {
            let queue = WriterQueue::with_strategy(&db_path, strategy);
            let started = Instant::now();
            let outcome = queue.take(BusyKind::Statement, &statement_wait(300));
            let _ = tx.send((outcome.map(|_| ()), started.elapsed()));
        });
        let (outcome, waited) = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{strategy:?}: the wait outlived its 300 ms limit by 5 s"));
        assert_eq!(kill9(holder), 128 + libc::SIGKILL);
        let err = outcome.expect_err("a turn taken while another program held the queue file");
        assert!(matches!(err, Error::Busy(_)), "{strategy:?}: {err:?}");
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_millis(2_300),
            "{strategy:?}: waited {waited:?} for a 300 ms limit"
        );
    }
}

/// Behind a writer outside the queue (its own `BEGIN IMMEDIATE`), the
/// turn's holder waits in its connection's busy handler; a writer that gives
/// up behind both is told the fixed text, then which process holds SQLite's
/// write lock outside the queue, and the error carries both pids.
fn a_busy_message_names_the_writer_outside_the_queue() {
    let db = Db::new();
    let pipe = Pipe::new();
    let outside = fork(|| {
        let conn = open(&db.path);
        if conn
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO publishes (n) VALUES (-2)")
            .is_err()
        {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(Duration::from_secs(30));
        0
    });
    assert_eq!(
        pipe.recv(Duration::from_secs(10)),
        Some(1),
        "the outside writer began"
    );
    let queued = fork(|| {
        let conn = open(&db.path);
        let queue = WriterQueue::new(&db.path);
        i32::from(
            queue
                .begin(&conn, &Wait::transaction(Duration::from_secs(30)))
                .is_err(),
        )
    });
    let until = Instant::now() + Duration::from_secs(10);
    while writerlock::holders::flock_holder(&lock_path(&db.path)) != Some(queued as u32) {
        assert!(
            Instant::now() < until,
            "the queued writer never took its turn"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let conn = open(&db.path);
    let queue = WriterQueue::new(&db.path);
    let err = queue
        .begin(&conn, &Wait::transaction(Duration::from_secs(1)))
        .expect_err("both writers are ahead");
    assert_eq!(kill9(queued), 128 + libc::SIGKILL);
    assert_eq!(kill9(outside), 128 + libc::SIGKILL);
    let busy = err.busy().expect("a busy error");
    assert_eq!(busy.holder_pid, Some(queued as u32), "the turn's holder");
    assert_eq!(
        busy.outside_pid,
        Some(outside as u32),
        "the writer outside the queue"
    );
    let text = err.to_string();
    let sentence = format!(
        ". Process {outside} holds SQLite's write lock on the database outside the queue \
         (a transaction begun without taking the writer turn), so every queued writer waits \
         for it; make that program write through the queue"
    );
    let fixed = text
        .strip_suffix(&sentence)
        .unwrap_or_else(|| panic!("the message does not name the outside writer: {text}"));
    assert_measured(fixed, TRANSACTION_BUSY, 1.0, 3.0);
}

fn main() {
    run_tests(&[
        (
            "a_busy_message_names_the_writer_outside_the_queue",
            a_busy_message_names_the_writer_outside_the_queue,
        ),
        (
            "a_queue_file_held_exclusively_cannot_outlast_the_limit",
            a_queue_file_held_exclusively_cannot_outlast_the_limit,
        ),
        (
            "a_waiting_writer_is_seen_on_the_queue_file",
            a_waiting_writer_is_seen_on_the_queue_file,
        ),
        (
            "turns_held_without_sqlite_never_overlap",
            turns_held_without_sqlite_never_overlap,
        ),
        (
            "another_process_sees_the_turn_held_on_the_lock_file",
            another_process_sees_the_turn_held_on_the_lock_file,
        ),
        (
            "a_queued_writer_waits_for_a_turn_held_outside_any_transaction",
            a_queued_writer_waits_for_a_turn_held_outside_any_transaction,
        ),
        (
            "a_queued_writer_waits_for_a_raw_flock_on_the_lock_file",
            a_queued_writer_waits_for_a_raw_flock_on_the_lock_file,
        ),
        (
            "a_program_started_by_a_holder_never_keeps_the_turn",
            a_program_started_by_a_holder_never_keeps_the_turn,
        ),
        (
            "a_killed_waiter_costs_the_hand_off_line_milliseconds",
            a_killed_waiter_costs_the_hand_off_line_milliseconds,
        ),
        (
            "a_refused_commit_keeps_the_turn_until_rollback",
            a_refused_commit_keeps_the_turn_until_rollback,
        ),
    ]);
}
