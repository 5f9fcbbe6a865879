//! The SQLite queue when its writers are stopped or killed, with real
//! processes: waiters killed with kill -9 while every page slot was taken,
//! a stopped waiter at the head of the line, and a kill -9 storm while
//! others write.

mod common;

use std::time::{Duration, Instant};

use common::faults::{grant, holder, Bytes};
use common::*;
use writerlock::handoff::{self, SLOTS};
use writerlock::lockfiles::queue_path;
use writerlock::{BusyKind, Strategy, WriterQueue};

/// Writers in a hot loop for `run`: commits made. With `stopped`, a waiter
/// that became head of the line is stopped (SIGSTOP) before they start.
fn hot_loop_commits(
    writers: usize,
    run: Duration,
    stopped: bool,
) -> (i64, Option<libc::pid_t>, Db) {
    let db = Db::new();
    // WAL without syncs: the rate measures the queue, not the disk.
    open(&db.path)
        .execute_batch("PRAGMA journal_mode=WAL")
        .expect("WAL");
    let holder_pid = holder(&db.path, Strategy::Handoff);
    let mut head = None;
    if stopped {
        let path = db.path.clone();
        let pid = fork(move || {
            let queue = WriterQueue::new(&path);
            let conn = open(&path);
            if queue.begin(&conn, &wait_secs(30.0)).is_err() {
                return 1;
            }
            let ok = conn
                .execute(
                    "INSERT INTO publishes (n, pid, start_us, end_us) VALUES (-1, 0, 0, 0)",
                    [],
                )
                .is_ok();
            i32::from(!ok || queue.commit(&conn).is_err()) * 2
        });
        let queue_file = queue_path(&db.path);
        let until = Instant::now() + Duration::from_secs(10);
        while handoff::inspect(&queue_file).map_or(0, |s| s.waiters) < 1 {
            assert!(Instant::now() < until, "the head did not join");
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: stopping our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        head = Some(pid);
    }
    let pipe = Pipe::new();
    let path = db.path.as_path();
    let pids: Vec<_> = (0..writers)
        .map(|_| {
            fork(|| {
                let queue = WriterQueue::new(path);
                let conn = open(path);
                if conn.execute_batch("PRAGMA synchronous=OFF").is_err() {
                    return 3;
                }
                pipe.send(1);
                let until = Instant::now() + Duration::from_millis(300) + run;
                while Instant::now() < until {
                    if queue.begin(&conn, &wait_secs(10.0)).is_err() {
                        return 1;
                    }
                    let ok = conn
                        .execute(
                            "INSERT INTO publishes (n, pid, start_us, end_us) VALUES (1, 0, 0, 0)",
                            [],
                        )
                        .is_ok();
                    if !ok || queue.commit(&conn).is_err() {
                        return 2;
                    }
                }
                0
            })
        })
        .collect();
    for _ in 0..writers {
        assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(kill9(holder_pid), 128 + libc::SIGKILL);
    for pid in pids {
        assert_eq!(wait(pid), 0, "a writer failed");
    }
    let conn = open(&db.path);
    let commits: i64 = conn
        .query_row("SELECT count(*) FROM publishes WHERE n = 1", [], |r| {
            r.get(0)
        })
        .expect("count");
    (commits, head, db)
}

/// Slots of waiters killed with kill -9 while every slot was taken are
/// reclaimed: the next writer joins the page (instead of polling for good)
/// and clears the dead from the line.
fn slots_of_killed_waiters_are_reclaimed() {
    let db = Db::new();
    let pid = holder(&db.path, Strategy::Handoff);
    let path = db.path.as_path();
    let waiters: Vec<_> = (0..SLOTS)
        .map(|_| {
            fork(move || {
                let queue = WriterQueue::new(path);
                i32::from(queue.take(BusyKind::Transaction, &wait_secs(60.0)).is_err())
            })
        })
        .collect();
    let queue_file = queue_path(&db.path);
    let until = Instant::now() + Duration::from_secs(60);
    while handoff::inspect(&queue_file).map_or(0, |s| s.waiters) < SLOTS {
        assert!(
            Instant::now() < until,
            "the waiters did not all join the page"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Stopped first, so that none reaps another while they are killed.
    for &w in &waiters {
        // SAFETY: signalling our own children.
        unsafe { libc::kill(w, libc::SIGSTOP) };
    }
    for &w in &waiters {
        // SAFETY: as above.
        unsafe { libc::kill(w, libc::SIGKILL) };
    }
    for w in waiters {
        assert_eq!(wait(w), 128 + libc::SIGKILL);
    }
    assert_eq!(kill9(pid), 128 + libc::SIGKILL);
    assert_eq!(
        handoff::inspect(&queue_file).map(|s| s.waiters),
        Some(SLOTS),
        "the dead still hold their slots"
    );
    let conn = open(&db.path);
    let took = grant(&db.path, &conn);
    let left = handoff::inspect(&queue_file).map(|s| s.waiters);
    eprintln!(
        "after {SLOTS} killed waiters: granted in {:.1} ms, {left:?} slots still taken",
        took.as_secs_f64() * 1e3
    );
    assert_eq!(left, Some(0), "dead slots were not reclaimed");
}

/// A stopped waiter at the head of the line (SIGSTOP, a debugger, a frozen
/// container) costs the others less than half their rate, and gets its
/// turn when it resumes.
fn a_stopped_head_waiter_does_not_slow_the_others() {
    let run = Duration::from_millis(1000);
    let mut normal = Vec::new();
    let mut with_stopped = Vec::new();
    for _ in 0..2 {
        normal.push(hot_loop_commits(3, run, false).0);
        let (commits, head, db) = hot_loop_commits(3, run, true);
        with_stopped.push(commits);
        let head = head.expect("a stopped head");
        // Passed over, it still holds its place on the page.
        assert_eq!(
            handoff::inspect(&queue_path(&db.path)).map(|s| s.waiters),
            Some(1)
        );
        // SAFETY: resuming our own child.
        unsafe { libc::kill(head, libc::SIGCONT) };
        assert_eq!(wait(head), 0, "the stopped writer did not get its turn");
        let conn = open(&db.path);
        let its: i64 = conn
            .query_row("SELECT count(*) FROM publishes WHERE n = -1", [], |r| {
                r.get(0)
            })
            .expect("count");
        assert_eq!(its, 1);
    }
    // A passed-over waiter that dies while stopped is reaped by the next
    // writer that joins the page.
    let (_, head, db) = hot_loop_commits(1, Duration::from_millis(100), true);
    assert_eq!(kill9(head.expect("a stopped head")), 128 + libc::SIGKILL);
    let holder_pid = holder(&db.path, Strategy::Handoff);
    let path = db.path.clone();
    let waiter = fork(move || {
        let queue = WriterQueue::new(&path);
        i32::from(queue.take(BusyKind::Transaction, &wait_secs(10.0)).is_err())
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        handoff::inspect(&queue_path(&db.path)).map(|s| s.waiters),
        Some(1),
        "the dead passed-over waiter still shows on the page"
    );
    assert_eq!(kill9(holder_pid), 128 + libc::SIGKILL);
    assert_eq!(wait(waiter), 0);
    let normal_rate: i64 = normal.iter().sum();
    let stopped_rate: i64 = with_stopped.iter().sum();
    let ratio = stopped_rate as f64 / normal_rate.max(1) as f64;
    eprintln!(
        "3 writers, 1 s runs alternated: {:.0} commits/s normally ({normal:?}), {:.0} commits/s \
         with a stopped head waiter ({with_stopped:?}): {ratio:.2} of the normal rate",
        normal_rate as f64 / 2.0,
        stopped_rate as f64 / 2.0,
    );
    assert!(
        ratio >= 0.5,
        "the stopped waiter cut the rate to {ratio:.2}"
    );
}

/// A kill -9 storm: writers killed at random moments (waiting, holding,
/// mid-commit) while others write. The database stays intact, every
/// commit a writer reported is in it, and the survivors finish.
fn a_kill_9_storm_loses_no_reported_commit() {
    let db = Db::new();
    open(&db.path)
        .execute_batch("CREATE TABLE storm (v INTEGER PRIMARY KEY)")
        .expect("schema");
    let (read, write) = {
        let mut fds = [0; 2];
        // SAFETY: a fresh pipe.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        (fds[0], fds[1])
    };
    let spawn = |id: u64| {
        let path = db.path.clone();
        fork(move || {
            let queue = WriterQueue::new(&path);
            let conn = open(&path);
            if conn.execute_batch("PRAGMA synchronous=OFF").is_err() {
                return 3;
            }
            for seq in 0.. {
                let v: u64 = id * 1_000_000 + seq;
                if queue.begin(&conn, &wait_secs(20.0)).is_err() {
                    return 1;
                }
                if conn
                    .execute("INSERT INTO storm (v) VALUES (?1)", [v as i64])
                    .is_err()
                    || queue.commit(&conn).is_err()
                {
                    return 2;
                }
                // Reported only once committed; a pipe write this small is atomic.
                // SAFETY: writing 8 bytes from a local.
                unsafe { libc::write(write, v.to_ne_bytes().as_ptr().cast(), 8) };
                if seq % 7 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            0
        })
    };
    let reader = std::thread::spawn(move || {
        let mut reported = Vec::with_capacity(1 << 20);
        let mut buf = [0u8; 8];
        // SAFETY: reading into a local buffer until every writer end closed.
        while unsafe { libc::read(read, buf.as_mut_ptr().cast(), 8) } == 8 {
            reported.push(u64::from_ne_bytes(buf));
        }
        reported
    });
    let mut live: Vec<libc::pid_t> = (0..12).map(spawn).collect();
    let mut next_id = 12;
    let mut rng = Bytes(0x2545_F491_4F6C_DD1D);
    let until = Instant::now() + Duration::from_secs(2);
    let mut killed = 0;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_micros(5_000 + rng.next() % 20_000));
        let victim = live.swap_remove((rng.next() % live.len() as u64) as usize);
        assert_eq!(
            kill9(victim),
            128 + libc::SIGKILL,
            "a writer ended by itself"
        );
        killed += 1;
        live.push(spawn(next_id));
        next_id += 1;
    }
    for pid in live {
        kill9(pid);
    }
    // SAFETY: our copy of the write end; the reader then sees EOF.
    unsafe { libc::close(write) };
    let reported = reader.join().expect("reader");
    // SAFETY: closing our read end.
    unsafe { libc::close(read) };
    assert!(db.integrity_ok(), "integrity_check failed after the storm");
    let conn = open(&db.path);
    let mut stored = std::collections::HashSet::new();
    let mut stmt = conn.prepare("SELECT v FROM storm").expect("prepare");
    for v in stmt.query_map([], |r| r.get::<_, i64>(0)).expect("query") {
        stored.insert(v.expect("row") as u64);
    }
    let lost: Vec<_> = reported.iter().filter(|v| !stored.contains(v)).collect();
    eprintln!(
        "storm: {killed} writers killed, {} commits reported, {} rows, {} lost",
        reported.len(),
        stored.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "reported commits missing: {lost:?}");
    assert!(reported.len() > 100, "too few commits to tell");
    // The queue still serves a writer at once.
    let took = grant(&db.path, &conn);
    assert!(
        took < Duration::from_secs(1),
        "the next writer waited {took:?}"
    );
}

fn main() {
    run_tests(&[
        (
            "slots_of_killed_waiters_are_reclaimed",
            slots_of_killed_waiters_are_reclaimed,
        ),
        (
            "a_stopped_head_waiter_does_not_slow_the_others",
            a_stopped_head_waiter_does_not_slow_the_others,
        ),
        (
            "a_kill_9_storm_loses_no_reported_commit",
            a_kill_9_storm_loses_no_reported_commit,
        ),
    ]);
}
