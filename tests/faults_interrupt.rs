//! The SQLite queue's waits when a person interrupts them, with real
//! processes: hand-off and polling waits, a queued statement's wait, a wait
//! for another thread of the same handle, SQLite's own busy wait for a
//! writer outside the queue, and a host's check that panics.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::faults::holder;
use common::*;
use writerlock::handoff;
use writerlock::lockfiles::queue_path;
use writerlock::wait::{Interrupt, INTERRUPT_CHECK};
use writerlock::{BusyKind, Error, Strategy, Wait, WriterQueue};

/// An interrupt raised by a flag, which records when it was asked.
#[derive(Clone)]
struct Flag {
    raised: Arc<AtomicBool>,
    asked: Arc<Mutex<Vec<Instant>>>,
}

impl Flag {
    fn new() -> Flag {
        Flag {
            raised: Arc::new(AtomicBool::new(false)),
            asked: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn interrupt(&self) -> Interrupt {
        let flag = self.clone();
        Interrupt::new(move || {
            if let Ok(mut asked) = flag.asked.lock() {
                asked.push(Instant::now());
            }
            flag.raised.load(Ordering::SeqCst)
        })
    }

    /// Raises the flag after `delay`, from another thread; returns when.
    fn raise_after(&self, delay: Duration) -> std::thread::JoinHandle<Instant> {
        let raised = self.raised.clone();
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            raised.store(true, Ordering::SeqCst);
            Instant::now()
        })
    }

    /// The median and the longest gap between two checks.
    fn gaps(&self) -> (Duration, Duration) {
        let asked = self.asked.lock().map(|a| a.clone()).unwrap_or_default();
        let mut gaps: Vec<Duration> = asked.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort();
        let median = gaps.get(gaps.len() / 2).copied().unwrap_or_default();
        (median, gaps.last().copied().unwrap_or_default())
    }
}

/// Waits for a turn held by another process until the flag is raised,
/// 300 ms in, and checks that the wait ended at once, untaken, reported as
/// interrupted, with the check asked every 10 ms or more often.
fn interrupted_wait(strategy: Strategy, statement: bool) {
    let db = Db::new();
    let pid = holder(&db.path, strategy);
    let queue = WriterQueue::with_strategy(&db.path, strategy);
    let conn = open(&db.path);
    let flag = Flag::new();
    let raiser = flag.raise_after(Duration::from_millis(300));
    let started = Instant::now();
    let outcome = if statement {
        let wait = Wait::statement(Duration::from_secs(10)).with_interrupt(flag.interrupt());
        queue.execute(
            &conn,
            "INSERT INTO publishes (n, pid, start_us, end_us) VALUES (1, 0, 0, 0)",
            &wait,
        )
    } else {
        queue.begin(&conn, &wait_secs(10.0).with_interrupt(flag.interrupt()))
    };
    let ended = Instant::now();
    let raised_at = raiser.join().expect("raiser");
    let kind = if statement {
        BusyKind::Statement
    } else {
        BusyKind::Transaction
    };
    match outcome {
        Err(Error::Interrupted { kind: k, waited }) => {
            assert_eq!(k, kind);
            assert!(waited >= Duration::from_millis(290), "waited {waited:?}");
        }
        other => panic!("expected an interrupted wait, got {other:?}"),
    }
    let late = ended.saturating_duration_since(raised_at);
    let (median, longest) = flag.gaps();
    eprintln!(
        "{strategy:?} {}: ended {:.1} ms after the interrupt, {:.2} s in; checks every \
         {:.1} ms (median), {:.1} ms at most",
        if statement {
            "statement"
        } else {
            "transaction"
        },
        late.as_secs_f64() * 1e3,
        (ended - started).as_secs_f64(),
        median.as_secs_f64() * 1e3,
        longest.as_secs_f64() * 1e3
    );
    assert!(late < Duration::from_millis(100), "ended {late:?} late");
    // The code sleeps at most INTERRUPT_CHECK between checks; a loaded
    // machine may wake it a little late.
    assert!(
        median <= INTERRUPT_CHECK + Duration::from_millis(5),
        "checks every {median:?}"
    );
    assert!(!queue.holding(), "an interrupted wait took the turn");
    assert_eq!(kill9(pid), 128 + libc::SIGKILL);
    assert_eq!(db.count(), 0, "an interrupted statement was written");
    // The handle serves the next turn as before.
    queue
        .begin(&conn, &wait_secs(5.0))
        .expect("a turn after the interruption");
    queue.rollback(&conn).expect("rollback");
}

fn an_interrupt_ends_a_handoff_wait() {
    interrupted_wait(Strategy::Handoff, false);
}

fn an_interrupt_ends_a_polling_wait() {
    interrupted_wait(Strategy::Poll, false);
}

fn an_interrupt_ends_a_queued_statements_wait() {
    interrupted_wait(Strategy::Handoff, true);
}

/// A thread waiting for another thread's turn on the same handle.
fn an_interrupt_ends_a_wait_for_another_thread() {
    let db = Db::new();
    let queue = Arc::new(WriterQueue::new(&db.path));
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let owner = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            queue
                .take(BusyKind::Transaction, &wait_secs(5.0))
                .expect("take");
            held_tx.send(()).expect("send");
            let _ = done_rx.recv_timeout(Duration::from_secs(20));
            queue.release().expect("release");
        })
    };
    held_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the owner thread took the turn");
    let flag = Flag::new();
    let raiser = flag.raise_after(Duration::from_millis(300));
    let outcome = queue.take(
        BusyKind::Statement,
        &Wait::statement(Duration::from_secs(10)).with_interrupt(flag.interrupt()),
    );
    let ended = Instant::now();
    let late = ended.saturating_duration_since(raiser.join().expect("raiser"));
    assert!(
        matches!(
            outcome,
            Err(Error::Interrupted {
                kind: BusyKind::Statement,
                ..
            })
        ),
        "{outcome:?}"
    );
    eprintln!(
        "thread wait: ended {:.1} ms after the interrupt",
        late.as_secs_f64() * 1e3
    );
    assert!(late < Duration::from_millis(100), "ended {late:?} late");
    done_tx.send(()).expect("send");
    owner.join().expect("owner");
    queue
        .take(BusyKind::Transaction, &wait_secs(5.0))
        .expect("a turn after the interruption");
    queue.release().expect("release");
}

/// SQLite's own busy wait, for a writer outside the queue that holds the
/// database (a raw connection in another process), is interruptible too:
/// for `begin` and for a queued statement.
fn an_interrupt_ends_sqlites_busy_wait_for_an_outside_writer() {
    let db = Db::new();
    let pipe = Pipe::new();
    let path = db.path.as_path();
    let outsider = fork(|| {
        let conn = open(path);
        if conn.execute_batch("BEGIN IMMEDIATE").is_err() {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(Duration::from_secs(60));
        0
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    for statement in [false, true] {
        let queue = WriterQueue::new(&db.path);
        let conn = open(&db.path);
        let flag = Flag::new();
        let raiser = flag.raise_after(Duration::from_millis(300));
        let outcome = if statement {
            queue.execute(
                &conn,
                "INSERT INTO publishes (n, pid, start_us, end_us) VALUES (1, 0, 0, 0)",
                &Wait::statement(Duration::from_secs(10)).with_interrupt(flag.interrupt()),
            )
        } else {
            queue.begin(&conn, &wait_secs(10.0).with_interrupt(flag.interrupt()))
        };
        let late = Instant::now().saturating_duration_since(raiser.join().expect("raiser"));
        assert!(
            matches!(outcome, Err(Error::Interrupted { .. })),
            "statement {statement}: {outcome:?}"
        );
        eprintln!(
            "outside writer, statement {statement}: ended {:.1} ms after the interrupt",
            late.as_secs_f64() * 1e3
        );
        assert!(late < Duration::from_millis(100), "ended {late:?} late");
        assert!(!queue.holding());
        assert!(conn.is_autocommit(), "a transaction was left open");
    }
    kill9(outsider);
    assert_eq!(db.count(), 0);
}

/// A host's check that panics unwinds out of the wait: the handle must not
/// stay owned by the wait that no longer runs, and the page must not keep a
/// slot for it.
fn a_panicking_interrupt_check_leaves_the_handle_usable() {
    for strategy in [Strategy::Handoff, Strategy::Poll] {
        let db = Db::new();
        let pid = holder(&db.path, strategy);
        let queue = WriterQueue::with_strategy(&db.path, strategy);
        let conn = open(&db.path);
        let started = Instant::now();
        let interrupt = Interrupt::new(move || {
            if started.elapsed() > Duration::from_millis(100) {
                panic!("the host's check failed");
            }
            false
        });
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            queue.begin(&conn, &wait_secs(10.0).with_interrupt(interrupt))
        }));
        std::panic::set_hook(hook);
        assert!(unwound.is_err(), "{strategy:?}: the check's panic was lost");
        assert!(!queue.holding());
        // The unwound wait left the line: no place on the page, no shared
        // flock() on the queue file (the holder waits in neither).
        let waiters = handoff::inspect(&queue_path(&db.path)).map_or(0, |s| s.waiters);
        assert_eq!(
            waiters, 0,
            "{strategy:?}: a page slot kept for the unwound wait"
        );
        assert_eq!(
            probe_flock(&queue_path(&db.path)),
            Probe::Free,
            "{strategy:?}: the unwound wait still holds the queue file"
        );
        assert_eq!(kill9(pid), 128 + libc::SIGKILL);
        // Another process gets the free lock at once: no slot of ours
        // stands in front of it.
        let path = db.path.clone();
        let other = fork(move || {
            let queue = WriterQueue::with_strategy(&path, strategy);
            let conn = open(&path);
            let started = Instant::now();
            if queue.begin(&conn, &wait_secs(5.0)).is_err() {
                return 1;
            }
            let _ = queue.rollback(&conn);
            i32::from(started.elapsed() > Duration::from_secs(1)) * 2
        });
        assert_eq!(wait(other), 0, "{strategy:?}: another writer was held up");
        queue
            .begin(&conn, &wait_secs(2.0))
            .unwrap_or_else(|e| panic!("{strategy:?}: the handle is stuck: {e}"));
        queue.rollback(&conn).expect("rollback");
    }
}

fn main() {
    run_tests(&[
        (
            "an_interrupt_ends_a_handoff_wait",
            an_interrupt_ends_a_handoff_wait,
        ),
        (
            "an_interrupt_ends_a_polling_wait",
            an_interrupt_ends_a_polling_wait,
        ),
        (
            "an_interrupt_ends_a_queued_statements_wait",
            an_interrupt_ends_a_queued_statements_wait,
        ),
        (
            "an_interrupt_ends_a_wait_for_another_thread",
            an_interrupt_ends_a_wait_for_another_thread,
        ),
        (
            "an_interrupt_ends_sqlites_busy_wait_for_an_outside_writer",
            an_interrupt_ends_sqlites_busy_wait_for_an_outside_writer,
        ),
        (
            "a_panicking_interrupt_check_leaves_the_handle_usable",
            a_panicking_interrupt_check_leaves_the_handle_usable,
        ),
    ]);
}
