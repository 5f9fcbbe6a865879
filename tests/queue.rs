//! The SQLite write queue with real processes: contention, serialization,
//! starvation, timeouts, crashes, fork, other users and writers outside the
//! queue.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use writerlock::{BusyKind, Error, Strategy, Wait, WriterQueue};

/// One publish through the queue; 0 on success.
fn queued_publish(db: &Path, queue: &WriterQueue, hold: Duration) -> i32 {
    let conn = open(db);
    if queue.begin(&conn, &wait_secs(120.0)).is_err() {
        return 1;
    }
    if publish_body(&conn, hold).is_err() {
        let _ = queue.rollback(&conn);
        return 1;
    }
    i32::from(queue.commit(&conn).is_err())
}

/// One publish with a plain deferred BEGIN and a busy timeout; 0 on success.
fn plain_publish(db: &Path, hold: Duration) -> i32 {
    let conn = open(db);
    if conn.busy_timeout(Duration::from_secs(5)).is_err() || conn.execute_batch("BEGIN").is_err() {
        return 1;
    }
    if publish_body(&conn, hold).is_err() {
        let _ = conn.execute_batch("ROLLBACK");
        return 1;
    }
    i32::from(conn.execute_batch("COMMIT").is_err())
}

fn sixty_four_processes_publish_three_times_and_all_commit() {
    let db = Db::new();
    let codes = run_together(64, |_| {
        let queue = WriterQueue::new(&db.path);
        (0..3)
            .map(|_| queued_publish(&db.path, &queue, Duration::from_millis(2)))
            .sum()
    });
    let failed: i32 = codes.iter().sum();
    assert_eq!(failed, 0, "exit codes {codes:?}");
    assert_eq!(db.count(), 192);
    assert!(db.integrity_ok());
    // Serialized: no two publishes overlap.
    for pair in db.intervals().windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlap: {pair:?}");
    }
}

fn the_same_load_with_plain_begin_loses_publishes() {
    let db = Db::new();
    let codes = run_together(64, |_| {
        (0..3)
            .map(|_| plain_publish(&db.path, Duration::from_millis(2)))
            .sum()
    });
    let failed: i32 = codes.iter().sum();
    eprintln!("plain BEGIN: {failed} of 192 publishes failed");
    assert!(
        failed > 0,
        "plain BEGIN lost nothing: the test cannot tell the queue's difference"
    );
    assert_eq!(db.count(), 192 - i64::from(failed));
}

fn forty_eight_transactions_of_300_ms_are_serialized() {
    let db = Db::new();
    let log = db.dir.path().join("turns");
    let codes = run_together(48, |_| {
        let queue = WriterQueue::new(&db.path);
        let conn = open(&db.path);
        if queue.begin(&conn, &wait_secs(120.0)).is_err() {
            return 1;
        }
        // The worker's own hold window: from the granted turn to the COMMIT.
        let enter = mono_us();
        if publish_body(&conn, Duration::from_millis(300)).is_err() {
            let _ = queue.rollback(&conn);
            return 2;
        }
        let leave = mono_us();
        if append_line(&log, &format!("{enter} {leave} {}", std::process::id())).is_err() {
            let _ = queue.rollback(&conn);
            return 3;
        }
        i32::from(queue.commit(&conn).is_err()) * 4
    });
    assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
    assert_eq!(db.count(), 48);
    let turns = read_turns(&log);
    assert_eq!(turns.len(), 48);
    assert_no_overlap(&turns);
    for (enter, leave, pid) in &turns {
        assert!(
            leave - enter >= 300_000,
            "pid {pid} held its turn {} µs, less than its 300 ms transaction",
            leave - enter
        );
    }
    // From the first turn's start to the last one's end, against the sum
    // of the hold windows: the turns follow each other closely (a hand-over
    // costs milliseconds; the bound allows 150 ms between two turns).
    let span = turns[47].1 - turns[0].0;
    let serial: i64 = turns.iter().map(|(enter, leave, _)| leave - enter).sum();
    let ratio = span as f64 / serial as f64;
    println!(
        "48 x 300 ms: {:.2} s from the first turn to the last, against a serial sum of {:.2} s \
         (ratio {ratio:.4})",
        span as f64 / 1e6,
        serial as f64 / 1e6
    );
    assert!(ratio >= 1.0, "the turns overlapped (ratio {ratio:.4})");
    assert!(
        ratio <= 1.5,
        "the turns took {ratio:.2} times their serial sum"
    );
}

/// An interactive writer (30 one-row transactions, 20 ms apart) against a
/// process that commits and begins again at once; the interactive writer's
/// waits, sorted.
fn hot_loop_against_interactive(strategy: Strategy) -> Vec<Duration> {
    let db = Db::new();
    let pipe = Pipe::new();
    let stop = db.dir.path().join("stop");
    let hot = fork(|| {
        let queue = WriterQueue::with_strategy(&db.path, strategy);
        let conn = open(&db.path);
        // A safety net only: the parent stops it long before.
        let until = Instant::now() + Duration::from_secs(30);
        pipe.send(1);
        let mut commits = 0u32;
        while Instant::now() < until && !stop.exists() {
            if queue.begin(&conn, &wait_secs(30.0)).is_err() {
                return 1;
            }
            let _ = publish_body(&conn, Duration::from_millis(5));
            if queue.commit(&conn).is_err() {
                return 1;
            }
            commits += 1;
        }
        // A hot loop that hardly ran would prove nothing.
        i32::from(commits < 30) * 2
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    std::thread::sleep(Duration::from_millis(300));
    let queue = WriterQueue::with_strategy(&db.path, strategy);
    let conn = open(&db.path);
    let mut waits = Vec::new();
    for _ in 0..30 {
        let before = Instant::now();
        queue
            .begin(&conn, &wait_secs(5.0))
            .expect("the interactive writer got its turn within its wait");
        waits.push(before.elapsed());
        publish_body(&conn, Duration::from_millis(1)).expect("write");
        queue.commit(&conn).expect("commit");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&stop, b"").expect("stop file");
    assert_eq!(
        wait(hot),
        0,
        "{strategy:?}: the hot loop failed or hardly ran"
    );
    waits.sort();
    waits
}

fn a_commit_begin_hot_loop_does_not_starve_an_interactive_writer() {
    for strategy in [Strategy::Poll, Strategy::Handoff] {
        let waits = hot_loop_against_interactive(strategy);
        let median = waits[waits.len() / 2];
        let longest = waits[waits.len() - 1];
        println!(
            "{strategy:?}: interactive writer against a hot loop waited {:.1} ms (median), \
             {:.1} ms (p90), {:.1} ms at most",
            median.as_secs_f64() * 1e3,
            waits[waits.len() * 9 / 10].as_secs_f64() * 1e3,
            longest.as_secs_f64() * 1e3
        );
        // The target is 50 ms; the median keeps a loaded machine's
        // occasional late wake-up out of it.
        assert!(
            median <= Duration::from_millis(50),
            "{strategy:?}: median wait {median:?} against a hot loop"
        );
        assert!(
            longest < Duration::from_secs(1),
            "{strategy:?}: one wait took {longest:?} against a hot loop"
        );
    }
}

/// Forks a child that takes the turn, signals, and holds it until killed or
/// for `hold`.
fn holder(db: &Path, pipe: &Pipe, hold: Duration) -> libc::pid_t {
    fork(|| {
        let queue = WriterQueue::new(db);
        let conn = open(db);
        if queue.begin(&conn, &wait_secs(10.0)).is_err() {
            return 1;
        }
        let _ = publish_body(&conn, Duration::ZERO);
        pipe.send(1);
        std::thread::sleep(hold);
        i32::from(queue.commit(&conn).is_err())
    })
}

fn a_writer_that_waits_out_its_limit_gets_the_exact_message_and_writes_nothing() {
    let db = Db::new();
    let pipe = Pipe::new();
    let pid = holder(&db.path, &pipe, Duration::from_secs(30));
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    let before = Instant::now();
    let err = queue
        .begin(&conn, &wait_secs(1.0))
        .expect_err("must time out");
    let elapsed = before.elapsed();
    let busy = err.busy().expect("a busy error").clone();
    assert_eq!(busy.kind, BusyKind::Transaction);
    assert_eq!(busy.holder_pid, Some(pid as u32));
    assert!(busy.waited >= Duration::from_secs(1), "{:?}", busy.waited);
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    // The measured wait, as the message rounds it, within a generous bound.
    let shown = assert_measured(
        &err.to_string(),
        "database is busy: the transaction could not start within 1 s (waited {} s, \
         [DatabaseSettings] SQLiteTransactionWait), another write held the lock all that time; \
         nothing was written",
        1.0,
        3.0,
    );
    assert_eq!(
        format!("{shown:.1}"),
        format!("{:.1}", busy.waited.as_secs_f64())
    );
    assert!(!queue.holding());
    assert!(conn.is_autocommit(), "no transaction was left open");

    // A single statement gets the statement message.
    let err = queue
        .execute(
            &conn,
            "INSERT INTO publishes (n) VALUES (-1)",
            &Wait::statement(Duration::from_millis(500)),
        )
        .expect_err("must time out");
    assert_measured(
        &err.to_string(),
        "database is busy: the statement waited {} s for another write to end (limit 0.5 s, \
         [DatabaseSettings] SQLiteBusyTimeout) and was not run; nothing was written",
        0.5,
        2.5,
    );
    assert_eq!(kill9(pid), 128 + libc::SIGKILL);
    assert_eq!(db.count(), 0, "nothing was written");
}

fn killing_a_holder_frees_the_lock_at_once() {
    let db = Db::new();
    // Some committed rows first.
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    for _ in 0..5 {
        queue.begin(&conn, &wait_secs(5.0)).expect("begin");
        publish_body(&conn, Duration::ZERO).expect("write");
        queue.commit(&conn).expect("commit");
    }
    let pipe = Pipe::new();
    let pid = holder(&db.path, &pipe, Duration::from_secs(60));
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    assert_eq!(kill9(pid), 128 + libc::SIGKILL);
    let before = Instant::now();
    queue
        .begin(&conn, &wait_secs(5.0))
        .expect("the next writer proceeds");
    let waited = before.elapsed();
    publish_body(&conn, Duration::ZERO).expect("write");
    queue.commit(&conn).expect("commit");
    eprintln!("after kill -9 of the holder the next writer waited {waited:?}");
    assert!(waited < Duration::from_millis(500), "{waited:?}");
    assert!(db.integrity_ok());
    assert_eq!(
        db.count(),
        6,
        "every committed row is there, the killed one is not"
    );
}

fn a_forked_child_never_frees_its_parents_lock() {
    let db = Db::new();
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    queue.begin(&conn, &wait_secs(5.0)).expect("parent begins");
    publish_body(&conn, Duration::ZERO).expect("write");

    // The child does everything it can with the inherited handle.
    let child = fork(|| {
        let mut code = 0;
        if queue.holding() {
            code |= 1; // the child must not believe it holds the parent's turn
        }
        if queue.release().unwrap_or(true) {
            code |= 2;
        }
        let child_conn = open(&db.path);
        match queue.begin(&child_conn, &wait_secs(1.0)) {
            Err(Error::Busy(_)) => {}
            _ => code |= 4,
        }
        // Dropping the inherited handle in the child must not unlock either.
        // SAFETY: this process `_exit`s right after, so the copy is the only
        // one ever dropped here.
        drop(unsafe { std::ptr::read(&queue) });
        code
    });
    assert_eq!(wait(child), 0, "child saw the wrong state");
    // Seen from another process, after the child exited: still held.
    assert_eq!(
        probe_lock(&db.path),
        Probe::Held,
        "the child freed its parent's lock"
    );

    // A third process cannot get the lock while the parent's transaction runs.
    let third = fork(|| {
        let q = WriterQueue::new(&db.path);
        let c = open(&db.path);
        match q.begin(&c, &wait_secs(1.0)) {
            Err(Error::Busy(_)) => 0,
            _ => 1,
        }
    });
    assert_eq!(
        wait(third),
        0,
        "a third process got the lock during the parent's turn"
    );

    // A child that outlives an idle moment still cannot free the lock, even
    // if it exits while the parent holds on.
    let lingering = fork(|| {
        std::thread::sleep(Duration::from_millis(200));
        0
    });
    assert_eq!(wait(lingering), 0);
    assert_eq!(
        probe_lock(&db.path),
        Probe::Held,
        "a child that exited freed its parent's lock"
    );
    assert!(queue.holding());
    queue.commit(&conn).expect("parent commits");
    assert_eq!(
        probe_lock(&db.path),
        Probe::Free,
        "the commit freed the lock"
    );

    // Afterwards the child can take its own turn with the inherited handle.
    let child = fork(|| {
        let c = open(&db.path);
        if queue.begin(&c, &wait_secs(5.0)).is_err() {
            return 1;
        }
        let _ = publish_body(&c, Duration::ZERO);
        i32::from(queue.commit(&c).is_err())
    });
    assert_eq!(wait(child), 0);
    assert_eq!(db.count(), 2);
}

fn a_parent_that_exits_after_forking_leaves_no_lock_behind() {
    let db = Db::new();
    let pipe = Pipe::new();
    let grandchild_file = db.dir.path().join("grandchild");
    // Middle process: takes the lock, forks a long-lived child that never
    // touches the handle, then dies without committing.
    let middle = fork(|| {
        let queue = WriterQueue::new(&db.path);
        let conn = open(&db.path);
        if queue.begin(&conn, &wait_secs(5.0)).is_err() {
            return 1;
        }
        // Once fork() has returned in the child, the fork handler has closed
        // the inherited lock files there; until then the child still shares
        // them, so the middle process dies only after the child said so.
        let running = Pipe::new();
        let grandchild = fork(|| {
            running.send(1);
            std::thread::sleep(Duration::from_secs(5));
            0
        });
        if running.recv(Duration::from_secs(10)) != Some(1) {
            return 3;
        }
        if std::fs::write(&grandchild_file, grandchild.to_string()).is_err() {
            return 2;
        }
        pipe.send(1);
        unsafe { libc::_exit(0) };
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    assert_eq!(wait(middle), 0);
    let grandchild: libc::pid_t = std::fs::read_to_string(&grandchild_file)
        .expect("the grandchild's pid")
        .parse()
        .expect("a pid");
    // The child lives on; seen from another process, the lock is free.
    assert_eq!(
        unsafe { libc::kill(grandchild, 0) },
        0,
        "the child is alive"
    );
    let probe = probe_lock(&db.path);
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    let before = Instant::now();
    let began = queue.begin(&conn, &wait_secs(2.0));
    let waited = before.elapsed();
    unsafe { libc::kill(grandchild, libc::SIGKILL) };
    assert_eq!(probe, Probe::Free, "the child kept its dead parent's lock");
    began.expect("the lock was freed with the parent, not kept by its child");
    assert!(waited < Duration::from_secs(1), "{waited:?}");
    queue.rollback(&conn).expect("rollback");
}

fn a_lock_file_this_user_cannot_write_still_queues() {
    let db = Db::new();
    let root = unsafe { libc::geteuid() } == 0;
    // Lock files created by "another user": as root, files owned by root
    // that the helper (running as nobody) may not write; otherwise, files
    // made read-only.
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    queue
        .begin(&conn, &wait_secs(5.0))
        .expect("create the lock files");
    queue.rollback(&conn).expect("rollback");
    for suffix in [".writer-lock", ".writer-queue"] {
        let mut p = db.path.as_os_str().to_owned();
        p.push(suffix);
        let mode = if root { 0o644 } else { 0o444 };
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .expect("chmod");
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(db.dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::fs::set_permissions(&db.path, std::fs::Permissions::from_mode(0o666)).expect("chmod");

    let become_other = move || {
        if root {
            // nobody
            unsafe {
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    return false;
                }
            }
        }
        true
    };

    // The parent holds the turn; the other user's writer must be refused.
    queue.begin(&conn, &wait_secs(5.0)).expect("parent holds");
    let refused = fork(|| {
        if !become_other() {
            return 10;
        }
        let q = WriterQueue::new(&db.path);
        let c = open(&db.path);
        match q.begin(&c, &wait_secs(1.0)) {
            Err(Error::Busy(_)) => {}
            Err(e) => {
                eprintln!("other user: {e}");
                return 2;
            }
            Ok(()) => return 1,
        }
        // The turn alone, without SQLite's write lock to refuse it too.
        match q.take(
            BusyKind::Statement,
            &Wait::statement(Duration::from_millis(300)),
        ) {
            Err(Error::Busy(_)) => 0,
            Err(e) => {
                eprintln!("other user: {e}");
                4
            }
            Ok(_) => 3,
        }
    });
    assert_eq!(wait(refused), 0, "the read-only lock file did not exclude");
    assert_eq!(probe_lock(&db.path), Probe::Held);
    queue.rollback(&conn).expect("rollback");

    // Once free, the other user's writer takes its turn and writes.
    let writes = fork(|| {
        if !become_other() {
            return 10;
        }
        let q = WriterQueue::new(&db.path);
        let c = open(&db.path);
        if let Err(e) = q.begin(&c, &wait_secs(5.0)) {
            eprintln!("other user: {e}");
            return 2;
        }
        if publish_body(&c, Duration::ZERO).is_err() {
            return 3;
        }
        i32::from(q.commit(&c).is_err())
    });
    assert_eq!(wait(writes), 0);
    assert_eq!(db.count(), 1);
}

fn a_raw_connection_outside_the_queue_is_waited_for() {
    let db = Db::new();
    let pipe = Pipe::new();
    let outsider = fork(|| {
        let c = open(&db.path);
        if c.execute_batch("BEGIN IMMEDIATE; INSERT INTO publishes (n) VALUES (0)")
            .is_err()
        {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(Duration::from_secs(2));
        i32::from(c.execute_batch("COMMIT").is_err())
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    let before = Instant::now();
    queue
        .begin(&conn, &wait_secs(5.0))
        .expect("waited for the outsider");
    let waited = before.elapsed();
    publish_body(&conn, Duration::ZERO).expect("write");
    queue.commit(&conn).expect("commit");
    assert_eq!(wait(outsider), 0);
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    assert_eq!(db.count(), 2);

    // The same outsider, held past the limit, gives the busy message.
    let outsider = fork(|| {
        let c = open(&db.path);
        if c.execute_batch("BEGIN IMMEDIATE").is_err() {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(Duration::from_secs(3));
        i32::from(c.execute_batch("ROLLBACK").is_err())
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    let err = queue.begin(&conn, &wait_secs(1.0)).expect_err("busy");
    let text = err.to_string();
    assert_measured(
        &text,
        "database is busy: the transaction could not start within 1 s (waited {} s, \
         [DatabaseSettings] SQLiteTransactionWait), another write held the lock all that time; \
         nothing was written",
        1.0,
        3.0,
    );
    assert_eq!(err.busy().and_then(|b| b.holder_pid), Some(outsider as u32));
    assert_eq!(
        err.busy().and_then(|b| b.outside_pid),
        Some(outsider as u32)
    );
    assert!(!queue.holding(), "the turn was given back");
    assert_eq!(wait(outsider), 0);
}

fn two_handles_in_one_process_exclude_each_other() {
    // Two handles in one process exclude each other like two processes: the second,
    // in another thread, waits. (In the same thread it is refused at once, see
    // two_handles_nested_in_one_thread_are_refused_at_once.)
    let db = Db::new();
    let a = WriterQueue::new(&db.path);
    let b = WriterQueue::new(&db.path);
    let ca = open(&db.path);
    let in_b = |f: &(dyn Fn() -> writerlock::Result<()> + Sync)| {
        std::thread::scope(|s| s.spawn(f).join().expect("thread"))
    };
    a.begin(&ca, &wait_secs(5.0)).expect("a begins");
    let err = in_b(&|| {
        let cb = open(&db.path);
        b.begin(&cb, &wait_secs(1.0))
    })
    .expect_err("b must wait");
    assert!(err.busy().is_some(), "{err}");
    // The turn alone, where SQLite's own write lock does not refuse b too.
    let err = in_b(&|| {
        b.take(
            BusyKind::Statement,
            &Wait::statement(Duration::from_millis(300)),
        )
        .map(|_| ())
    })
    .expect_err("b must not get the turn");
    assert!(err.busy().is_some(), "{err}");
    a.commit(&ca).expect("commit");
    a.take(
        BusyKind::Statement,
        &Wait::statement(Duration::from_millis(300)),
    )
    .expect("a takes the turn alone");
    let err = in_b(&|| {
        b.take(
            BusyKind::Statement,
            &Wait::statement(Duration::from_millis(300)),
        )
        .map(|_| ())
    })
    .expect_err("b must wait for a's turn without a transaction");
    assert!(err.busy().is_some(), "{err}");
    assert!(a.release().expect("release"));
    let cb = open(&db.path);
    b.begin(&cb, &wait_secs(1.0)).expect("b begins after a");
    b.rollback(&cb).expect("rollback");
}

fn one_handle_shared_by_threads_never_grants_two_turns() {
    let db = Db::new();
    let queue = WriterQueue::new(&db.path);
    let inside = std::sync::atomic::AtomicU32::new(0);
    let max_inside = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let conn = open(&db.path);
                for _ in 0..20 {
                    queue.begin(&conn, &wait_secs(30.0)).expect("begin");
                    let now = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                    publish_body(&conn, Duration::from_millis(1)).expect("write");
                    inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    queue.commit(&conn).expect("commit");
                }
            });
        }
    });
    assert_eq!(max_inside.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(db.count(), 80);
    // The same thread asking twice is told so, not deadlocked.
    let conn = open(&db.path);
    let other = open(&db.path);
    queue.begin(&conn, &wait_secs(5.0)).expect("begin");
    assert!(matches!(
        queue.begin(&other, &wait_secs(1.0)),
        Err(Error::AlreadyHolding)
    ));
    queue.rollback(&conn).expect("rollback");
}

fn commit_without_a_turn_and_a_failed_begin_leak_nothing() {
    let db = Db::new();
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    assert!(matches!(queue.commit(&conn), Err(Error::NotHolding)));
    assert!(matches!(queue.rollback(&conn), Err(Error::NotHolding)));
    // A connection already in a transaction is refused before queueing.
    conn.execute_batch("BEGIN").expect("begin");
    assert!(matches!(
        queue.begin(&conn, &wait_secs(1.0)),
        Err(Error::InTransaction)
    ));
    conn.execute_batch("ROLLBACK").expect("rollback");
    // A file that is not a database: BEGIN IMMEDIATE fails, the turn is back.
    let junk = db.dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).expect("write junk");
    let jq = WriterQueue::new(&junk);
    let jc = open(&junk);
    let err = jq.begin(&jc, &wait_secs(1.0)).expect_err("not a database");
    assert_eq!(
        err.to_string(),
        "the transaction could not start: file is not a database; nothing was written"
    );
    assert!(!jq.holding());
    // A database in a missing directory: a clear error naming the lock file.
    let missing = WriterQueue::new(db.dir.path().join("no/such/dir/x.db"));
    let err = missing
        .take(BusyKind::Transaction, &wait_secs(1.0))
        .expect_err("missing dir");
    assert!(
        err.to_string().contains("no/such/dir/x.db.writer-lock"),
        "{err}"
    );
    // In-memory databases need no queue.
    let mem = WriterQueue::new(":memory:");
    let mc = rusqlite::Connection::open_in_memory().expect("memory");
    mem.begin(&mc, &wait_secs(1.0)).expect("memory begin");
    mem.commit(&mc).expect("memory commit");
}

fn a_transaction_the_host_ends_gives_the_turn_back() {
    let db = Db::new();
    let conn = open(&db.path);
    conn.busy_timeout(Duration::from_millis(7_000))
        .expect("busy timeout");
    let queue = WriterQueue::new(&db.path);
    let other = WriterQueue::new(&db.path);
    let busy_timeout = |c: &rusqlite::Connection| -> i64 {
        c.query_row("PRAGMA busy_timeout", [], |r| r.get(0))
            .expect("busy timeout")
    };

    // Through the connection's own handle the queue sets SQLite's commit and rollback
    // hooks: the caller's own COMMIT, or ROLLBACK, gives the turn back at once.
    // SAFETY: the connection outlives the handle.
    let handle = unsafe { writerlock::SqliteHandle::new(conn.handle()) }.expect("a handle");
    for ending in ["COMMIT", "ROLLBACK"] {
        queue.begin(&handle, &wait_secs(5.0)).expect("begin");
        conn.execute_batch("INSERT INTO publishes (n) VALUES (1)")
            .expect("insert");
        conn.execute_batch(ending).expect(ending);
        assert!(
            !queue.holding(),
            "the turn was kept after the host's {ending}"
        );
        other
            .take(
                BusyKind::Transaction,
                &Wait::transaction(Duration::from_millis(200)),
            )
            .unwrap_or_else(|e| panic!("the turn is not free after {ending}: {e}"));
        other.release().expect("release");
        assert_eq!(
            busy_timeout(&conn),
            7_000,
            "the caller's busy timeout is back"
        );
    }
    // A COMMIT that SQLite refuses (a deferred foreign key) keeps the transaction, and the
    // turn with it, until it ends.
    conn.execute_batch(
        "PRAGMA foreign_keys = ON; CREATE TABLE parent (id INTEGER PRIMARY KEY); \
         CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)",
    )
    .expect("schema");
    queue.begin(&handle, &wait_secs(5.0)).expect("begin");
    conn.execute_batch("INSERT INTO child VALUES (7)")
        .expect("insert");
    assert!(
        conn.execute_batch("COMMIT").is_err(),
        "the foreign key fails"
    );
    assert!(queue.holding(), "a refused COMMIT keeps the turn");
    assert!(other
        .take(
            BusyKind::Transaction,
            &Wait::transaction(Duration::from_millis(100))
        )
        .is_err());
    conn.execute_batch("ROLLBACK").expect("rollback");
    assert!(!queue.holding());
    drop(handle);

    // Where the queue sets no hooks (a rusqlite connection, whose users may set their
    // own), the turn ends at the next begin, which works.
    queue.begin(&conn, &wait_secs(5.0)).expect("begin");
    conn.execute_batch("INSERT INTO publishes (n) VALUES (2); COMMIT")
        .expect("the caller's own commit");
    queue
        .begin(&conn, &wait_secs(5.0))
        .expect("the next begin works");
    conn.execute_batch("INSERT INTO publishes (n) VALUES (3)")
        .expect("insert");
    queue.commit(&conn).expect("commit");
    assert_eq!(busy_timeout(&conn), 7_000);
    // Rows 1 (committed by the host), 2 and 3; the rolled-back one is not there.
    assert_eq!(db.count(), 3);
}

fn two_handles_nested_in_one_thread_are_refused_at_once() {
    let db = Db::new();
    let q1 = WriterQueue::new(&db.path);
    let q2 = WriterQueue::new(&db.path);
    let c1 = open(&db.path);
    let c2 = open(&db.path);
    q1.begin(&c1, &wait_secs(5.0)).expect("q1 begins");
    let before = Instant::now();
    let err = q2.begin(&c2, &wait_secs(3.0)).expect_err("nested begin");
    let took = before.elapsed();
    assert!(
        matches!(&err, Error::HeldThroughAnotherHandle { database } if database == &db.path),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(&format!(
            "this thread already holds the writer turn of {} through another writer queue handle",
            db.path.display()
        )),
        "{err}"
    );
    assert!(
        took < Duration::from_secs(2),
        "refused after {took:?}, not at once"
    );
    println!("a nested begin on a second handle was refused after {took:?}");
    let err = q2
        .take(BusyKind::Statement, &wait_secs(3.0))
        .expect_err("nested take");
    assert!(
        matches!(err, Error::HeldThroughAnotherHandle { .. }),
        "{err:?}"
    );
    // Another thread still waits for the turn, as another process would.
    std::thread::scope(|s| {
        let waited = s.spawn(|| {
            let started = Instant::now();
            let err = q2
                .take(
                    BusyKind::Transaction,
                    &Wait::transaction(Duration::from_millis(1000)),
                )
                .expect_err("another thread waits");
            (started.elapsed(), err)
        });
        let (elapsed, err) = waited.join().expect("thread");
        assert!(err.busy().is_some(), "{err:?}");
        assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    });
    q1.commit(&c1).expect("commit");
    q2.begin(&c2, &wait_secs(3.0))
        .expect("q2 begins once q1 is done");
    q2.commit(&c2).expect("commit");
    // A handle dropped while holding leaves nothing behind that refuses the next.
    let q3 = WriterQueue::new(&db.path);
    q3.begin(&c1, &wait_secs(3.0)).expect("q3");
    drop(q3);
    c1.execute_batch("ROLLBACK").expect("rollback");
    q2.begin(&c2, &wait_secs(3.0))
        .expect("q2 after a dropped q3");
    q2.rollback(&c2).expect("rollback");
}

fn single_statements_queue_and_reads_do_not() {
    let db = Db::new();
    let pipe = Pipe::new();
    let pid = holder(&db.path, &pipe, Duration::from_millis(800));
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    let queue = WriterQueue::new(&db.path);
    let conn = open(&db.path);
    // A read runs at once even while a writer holds the turn.
    let before = Instant::now();
    queue
        .execute(
            &conn,
            "SELECT count(*) FROM publishes",
            &Wait::statement(Duration::from_secs(5)),
        )
        .expect("read");
    assert!(before.elapsed() < Duration::from_millis(300));
    // A write waits for the holder, then runs.
    queue
        .execute(
            &conn,
            "INSERT INTO publishes (n) VALUES (99)",
            &Wait::statement(Duration::from_secs(5)),
        )
        .expect("queued write");
    assert!(
        queue.last_wait() >= Duration::from_millis(300),
        "{:?}",
        queue.last_wait()
    );
    assert!(!queue.holding());
    assert_eq!(wait(pid), 0);
    assert_eq!(db.count(), 2);
}

fn main() {
    run_tests(&[
        (
            "two_handles_nested_in_one_thread_are_refused_at_once",
            two_handles_nested_in_one_thread_are_refused_at_once,
        ),
        (
            "a_transaction_the_host_ends_gives_the_turn_back",
            a_transaction_the_host_ends_gives_the_turn_back,
        ),
        (
            "sixty_four_processes_publish_three_times_and_all_commit",
            sixty_four_processes_publish_three_times_and_all_commit,
        ),
        (
            "the_same_load_with_plain_begin_loses_publishes",
            the_same_load_with_plain_begin_loses_publishes,
        ),
        (
            "forty_eight_transactions_of_300_ms_are_serialized",
            forty_eight_transactions_of_300_ms_are_serialized,
        ),
        (
            "a_commit_begin_hot_loop_does_not_starve_an_interactive_writer",
            a_commit_begin_hot_loop_does_not_starve_an_interactive_writer,
        ),
        (
            "a_writer_that_waits_out_its_limit_gets_the_exact_message_and_writes_nothing",
            a_writer_that_waits_out_its_limit_gets_the_exact_message_and_writes_nothing,
        ),
        (
            "killing_a_holder_frees_the_lock_at_once",
            killing_a_holder_frees_the_lock_at_once,
        ),
        (
            "a_forked_child_never_frees_its_parents_lock",
            a_forked_child_never_frees_its_parents_lock,
        ),
        (
            "a_parent_that_exits_after_forking_leaves_no_lock_behind",
            a_parent_that_exits_after_forking_leaves_no_lock_behind,
        ),
        (
            "a_lock_file_this_user_cannot_write_still_queues",
            a_lock_file_this_user_cannot_write_still_queues,
        ),
        (
            "a_raw_connection_outside_the_queue_is_waited_for",
            a_raw_connection_outside_the_queue_is_waited_for,
        ),
        (
            "two_handles_in_one_process_exclude_each_other",
            two_handles_in_one_process_exclude_each_other,
        ),
        (
            "one_handle_shared_by_threads_never_grants_two_turns",
            one_handle_shared_by_threads_never_grants_two_turns,
        ),
        (
            "commit_without_a_turn_and_a_failed_begin_leak_nothing",
            commit_without_a_turn_and_a_failed_begin_leak_nothing,
        ),
        (
            "single_statements_queue_and_reads_do_not",
            single_statements_queue_and_reads_do_not,
        ),
    ]);
}
