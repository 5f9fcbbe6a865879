//! The wait policy as hosts use it: the command line's limits and the
//! settings they name, a setting named by the host in the busy message,
//! interrupt checks that compare by identity, and a limit too long to count.

use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

use writerlock::lockfiles::lock_path;
use writerlock::wait::{
    Interrupt, CLI_BUSY_SETTING, CLI_BUSY_TIMEOUT, CLI_TRANSACTION_SETTING, CLI_TRANSACTION_WAIT,
};
use writerlock::{BusyKind, Error, Strategy, Wait, WriterQueue};

/// The command line waits 300 s for a transaction's turn and 30 s for a
/// statement's, naming Exponential's CLI settings.
#[test]
fn the_command_lines_waits_name_its_settings() {
    let t = Wait::cli_transaction();
    assert_eq!(t.limit(), CLI_TRANSACTION_WAIT);
    assert_eq!(t.limit(), Duration::from_secs(300));
    assert_eq!(t.setting(), CLI_TRANSACTION_SETTING);
    assert_eq!(t.setting(), "[DatabaseSettings] SQLiteCLITransactionWait");
    let s = Wait::cli_statement();
    assert_eq!(s.limit(), CLI_BUSY_TIMEOUT);
    assert_eq!(s.limit(), Duration::from_secs(30));
    assert_eq!(s.setting(), CLI_BUSY_SETTING);
    assert_eq!(s.setting(), "[DatabaseSettings] SQLiteCLIBusyTimeout");
}

/// A lock file held with a raw `flock()` (another program), in a temporary
/// directory that lives as long as the value.
struct HeldLock {
    dir: tempfile::TempDir,
    file: std::fs::File,
}

impl HeldLock {
    fn new() -> HeldLock {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = std::fs::File::create(lock_path(&dir.path().join("site.db"))).expect("create");
        // SAFETY: flock on a descriptor we own.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
        HeldLock { dir, file }
    }

    fn db(&self) -> std::path::PathBuf {
        self.dir.path().join("site.db")
    }
}

/// The setting a host names (its own INI key) is the one the busy message
/// quotes, word for word.
#[test]
fn the_busy_message_quotes_the_setting_the_host_named() {
    let held = HeldLock::new();
    let queue = WriterQueue::new(held.db());
    let wait = Wait::statement(Duration::from_millis(50)).with_setting("[Site] OurWriteWait");
    assert_eq!(wait.setting(), "[Site] OurWriteWait");
    let err = queue.take(BusyKind::Statement, &wait).unwrap_err();
    let Error::Busy(busy) = &err else {
        panic!("expected a busy error, got {err:?}");
    };
    assert_eq!(busy.setting, "[Site] OurWriteWait");
    let text = err.to_string();
    assert!(
        text.contains("(limit 0.05 s, [Site] OurWriteWait) and was not run; nothing was written"),
        "{text}"
    );
    drop(held.file);
}

/// Interrupt checks compare by identity: a wait equals its clone, not a
/// wait with another check; `interrupt()` gives back the one given, and a
/// wait prints its check without calling it.
#[test]
fn interrupt_checks_compare_by_identity() {
    let a = Interrupt::new(|| false);
    let b = Interrupt::new(|| false);
    assert_eq!(a, a.clone());
    assert_ne!(a, b);
    let wait = Wait::statement(Duration::from_secs(1)).with_interrupt(a.clone());
    assert_eq!(wait.interrupt(), Some(&a));
    assert_eq!(wait, wait.clone());
    assert_ne!(
        wait,
        Wait::statement(Duration::from_secs(1)).with_interrupt(b)
    );
    assert_ne!(wait, Wait::statement(Duration::from_secs(1)));
    assert_eq!(Wait::statement(Duration::from_secs(1)).interrupt(), None);
    let shown = format!("{wait:?}");
    assert!(shown.contains("Interrupt(..)"), "{shown}");
}

/// A database in a temporary directory whose turn a handle of `strategy`
/// holds (another writer, as far as every other handle is concerned).
fn held_turn(strategy: Strategy) -> (tempfile::TempDir, WriterQueue) {
    let dir = tempfile::tempdir().expect("tempdir");
    let holder = WriterQueue::with_strategy(dir.path().join("site.db"), strategy);
    holder
        .take(
            BusyKind::Transaction,
            &Wait::transaction(Duration::from_secs(5)),
        )
        .expect("the turn");
    (dir, holder)
}

/// A limit too long to add to the clock (`Duration::MAX`) waits, as a very
/// long limit does: the writer gets the turn when the holder gives it back.
#[test]
fn a_limit_too_long_to_count_still_waits_for_the_turn() {
    for strategy in [Strategy::Handoff, Strategy::Poll] {
        let (dir, holder) = held_turn(strategy);
        let db = dir.path().join("site.db");
        let started = Instant::now();
        let waiter = std::thread::spawn({
            let db = db.clone();
            move || {
                let queue = WriterQueue::with_strategy(&db, strategy);
                let took = queue.take(BusyKind::Statement, &Wait::statement(Duration::MAX));
                let _ = queue.release();
                took.map(|_| ())
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        holder.release().expect("release");
        let outcome = waiter.join().expect("the waiter");
        assert!(outcome.is_ok(), "{strategy:?}: {outcome:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "{strategy:?}"
        );
    }
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A writer waiting for its turn sleeps between its looks at the lock: over
/// a 600 ms wait that ends busy it uses a small part of a CPU, in either
/// strategy, with or without an interrupt check (a PHP worker or a Python
/// script waiting must not spin on a core the holder needs).
#[test]
fn a_waiting_writer_sleeps_rather_than_spins() {
    for strategy in [Strategy::Handoff, Strategy::Poll] {
        for with_check in [false, true] {
            let (dir, holder) = held_turn(strategy);
            let db = dir.path().join("site.db");
            let waiter = std::thread::spawn({
                let db = db.clone();
                move || {
                    let queue = WriterQueue::with_strategy(&db, strategy);
                    let mut wait = Wait::statement(Duration::from_millis(600));
                    if with_check {
                        wait = wait.with_interrupt(Interrupt::new(|| false));
                    }
                    let cpu = thread_cpu();
                    let outcome = queue.take(BusyKind::Statement, &wait);
                    (outcome.is_err(), thread_cpu() - cpu)
                }
            });
            let (busy, cpu) = waiter.join().expect("the waiter");
            holder.release().expect("release");
            assert!(busy, "{strategy:?}: the turn while another held it");
            println!(
                "{strategy:?}, interrupt check {with_check}: {cpu:?} of CPU over a 600 ms wait"
            );
            assert!(
                cpu < Duration::from_millis(100),
                "{strategy:?}, interrupt check {with_check}: {cpu:?} of CPU over a 600 ms wait"
            );
        }
    }
}

/// Threads sharing one handle wait for each other's turn; when the one in
/// front gives up (its limit ran out, or its interrupt check ended it), the
/// next is woken at once and goes on waiting for the lock itself, rather
/// than sleeping out its own limit: it gets the turn when the holder gives
/// it back.
#[test]
fn a_thread_behind_a_wait_that_gave_up_is_woken_at_once() {
    for how in ["limit", "interrupt", "panic"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("site.db");
        let holder = WriterQueue::new(&db);
        holder
            .take(
                BusyKind::Transaction,
                &Wait::transaction(Duration::from_secs(5)),
            )
            .expect("the turn");
        let queue = WriterQueue::new(&db);
        let (first, second) = std::thread::scope(|s| {
            let first = s.spawn(|| {
                let started = Instant::now();
                let wait = match how {
                    "limit" => Wait::statement(Duration::from_millis(300)),
                    "interrupt" => Wait::statement(Duration::from_secs(5)).with_interrupt(
                        Interrupt::new(move || started.elapsed() > Duration::from_millis(300)),
                    ),
                    _ => Wait::statement(Duration::from_secs(5)).with_interrupt(Interrupt::new(
                        move || {
                            if started.elapsed() > Duration::from_millis(300) {
                                panic!("the host's check failed");
                            }
                            false
                        },
                    )),
                };
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    queue.take(BusyKind::Statement, &wait).map(|_| ())
                }))
                // A panic counts as a wait that gave up, as the others do.
                .unwrap_or(Err(Error::AlreadyHolding))
            });
            std::thread::sleep(Duration::from_millis(100));
            let second = s.spawn(|| {
                let started = Instant::now();
                let outcome = queue.take(
                    BusyKind::Transaction,
                    &Wait::transaction(Duration::from_secs(8)),
                );
                let took = started.elapsed();
                if outcome.is_ok() {
                    let _ = queue.release();
                }
                (outcome.map(|_| ()), took)
            });
            std::thread::sleep(Duration::from_millis(600));
            holder.release().expect("release");
            (
                first.join().expect("first thread"),
                second.join().expect("second thread"),
            )
        });
        assert!(first.is_err(), "{how}: the first thread's turn: {first:?}");
        let (outcome, took) = second;
        println!("{how}: the second thread had its turn after {took:?}");
        assert!(outcome.is_ok(), "{how}: {outcome:?}");
        assert!(
            took < Duration::from_millis(3000),
            "{how}: the second thread slept {took:?} after the first gave up"
        );
    }
}
