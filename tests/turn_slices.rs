//! The hand-off slice seen from outside: a writer granted its turn keeps a
//! short slice in which it takes the turn straight back for its next
//! transaction, ahead of a waiter, before the turn passes on.

mod common;

use std::time::{Duration, Instant};

use common::*;
use writerlock::handoff::inspect;
use writerlock::lockfiles::queue_path;
use writerlock::wait::SLICE_TURNS;
use writerlock::{BusyKind, Strategy, Wait, WriterQueue};

fn turn_wait() -> Wait {
    Wait::transaction(Duration::from_secs(5))
}

/// One round: this process holds the turn, a child waits on the page, and
/// this process gives the turn back and asks again at once. Returns whether
/// it got the turn straight back (before the child had its turn).
fn takes_back_ahead_of_a_waiter(db: &Db) -> bool {
    let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
    queue
        .take(BusyKind::Transaction, &turn_wait())
        .expect("the turn");
    let granted = db.dir.path().join("granted");
    let _ = std::fs::remove_file(&granted);
    let waiter = {
        let path = db.path.clone();
        let granted = granted.clone();
        fork(move || {
            let queue = WriterQueue::with_strategy(&path, Strategy::Handoff);
            if queue.take(BusyKind::Transaction, &turn_wait()).is_err() {
                return 1;
            }
            let _ = std::fs::write(&granted, b"");
            i32::from(queue.release().is_err()) * 2
        })
    };
    until_on_page(&db.path, waiter);
    queue.release().expect("release");
    queue
        .take(BusyKind::Transaction, &turn_wait())
        .expect("the turn again");
    let ahead = !granted.exists();
    queue.release().expect("release");
    assert_eq!(wait(waiter), 0, "the waiter");
    assert!(granted.exists(), "the waiter never had its turn");
    ahead
}

/// How long the slice tests try rounds before they give up: a round can miss what it
/// looks for on a loaded machine (see each test), and a machine can stay slow for a
/// second or two (right after a build, say), so rounds run for a while rather than a
/// fixed number of times.
const ROUNDS_FOR: Duration = Duration::from_secs(15);

/// Within its slice a writer takes the turn straight back while another
/// waits; without the slice the waiter always goes first. A round can miss
/// the take-back (the waiter may look at the free lock in the instant
/// between the release and the next take: about two rounds in three on a
/// loaded machine; or the slice's 2 ms ran out while the waiter was being
/// started), so rounds run until one takes the turn back.
fn a_writer_takes_its_turn_back_within_its_slice() {
    let db = Db::new();
    let start = Instant::now();
    let mut rounds = 0;
    let mut took_back = false;
    while !took_back && (rounds < 40 || start.elapsed() < ROUNDS_FOR) {
        rounds += 1;
        took_back = takes_back_ahead_of_a_waiter(&db);
    }
    println!("rounds until one took the turn back: {rounds} (took it back: {took_back})");
    assert!(
        took_back,
        "the waiter went first in all {rounds} rounds: the slice never let the writer take its turn back"
    );
}

/// A handle reports the waiting strategy it was made with (the hosts show
/// it), hand-off by default.
fn a_handle_reports_its_strategy() {
    let db = Db::new();
    assert_eq!(WriterQueue::new(&db.path).strategy(), Strategy::Handoff);
    for strategy in [Strategy::Poll, Strategy::Handoff] {
        let queue = WriterQueue::with_strategy(&db.path, strategy);
        assert_eq!(queue.strategy(), strategy);
    }
}

/// A handle made to poll never joins the hand-off page, even with the queue
/// file writable and a turn held by a hand-off writer: it waits by polling
/// alone, and still gets the turn when the holder gives it back.
fn a_polling_handle_never_joins_the_page() {
    let db = Db::new();
    let holder = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
    holder
        .take(BusyKind::Transaction, &turn_wait())
        .expect("the turn");
    assert!(
        inspect(&queue_path(&db.path)).is_some(),
        "the holder mapped no page"
    );
    let pipe = Pipe::new();
    let poller = fork(|| {
        let queue = WriterQueue::with_strategy(&db.path, Strategy::Poll);
        pipe.send(1);
        if queue.take(BusyKind::Transaction, &turn_wait()).is_err() {
            return 1;
        }
        i32::from(queue.release().is_err()) * 2
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    // The poller is waiting: for 200 ms, it never shows on the page.
    let until = Instant::now() + Duration::from_millis(200);
    let mut on_page = false;
    while Instant::now() < until && !on_page {
        on_page = inspect(&queue_path(&db.path))
            .is_some_and(|p| p.queue.iter().any(|w| w.pid == poller as u32));
        std::thread::sleep(Duration::from_millis(2));
    }
    holder.release().expect("release");
    assert_eq!(wait(poller), 0, "the poller's turn");
    assert!(!on_page, "a polling handle joined the hand-off page");
}

/// One round: this process holds the turn, a child waits on the page, and
/// this process gives the turn back and takes it again `turns` times as fast
/// as it can. Returns how many of those takes came before the child's turn.
fn turns_taken_back_ahead_of_a_waiter(db: &Db, turns: usize) -> usize {
    let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
    queue
        .take(BusyKind::Transaction, &turn_wait())
        .expect("the turn");
    let granted_at = db.dir.path().join("granted_at");
    let _ = std::fs::remove_file(&granted_at);
    let waiter = {
        let path = db.path.clone();
        let granted_at = granted_at.clone();
        fork(move || {
            let queue = WriterQueue::with_strategy(&path, Strategy::Handoff);
            if queue.take(BusyKind::Transaction, &turn_wait()).is_err() {
                return 1;
            }
            let at = mono_us();
            let _ = queue.release();
            i32::from(std::fs::write(&granted_at, at.to_string()).is_err())
        })
    };
    until_on_page(&db.path, waiter);
    let mut taken = Vec::with_capacity(turns);
    for _ in 0..turns {
        queue.release().expect("release");
        queue
            .take(BusyKind::Transaction, &turn_wait())
            .expect("the turn again");
        taken.push(mono_us());
    }
    queue.release().expect("release");
    assert_eq!(wait(waiter), 0, "the waiter");
    let granted: i64 = std::fs::read_to_string(&granted_at)
        .expect("the waiter's turn")
        .parse()
        .expect("a time");
    taken.iter().filter(|&&t| t < granted).count()
}

/// A slice ends after 64 turns taken back, even with time left: a writer
/// committing in a tight loop takes the turn back at most 64 times before a
/// waiter gets it. A round can end sooner (the slice's 2 ms ran out on a
/// loaded machine, or the waiter looked between a release and a take), so
/// rounds run until one reaches the count; none may pass it.
fn a_slice_ends_after_sixty_four_turns() {
    assert_eq!(SLICE_TURNS, 64);
    let db = Db::new();
    let mut counts = Vec::new();
    let start = Instant::now();
    while (counts.len() < 40 || start.elapsed() < ROUNDS_FOR)
        && !counts.iter().any(|&n| n >= SLICE_TURNS as usize)
    {
        counts.push(turns_taken_back_ahead_of_a_waiter(&db, 100));
        std::thread::sleep(Duration::from_millis(3));
    }
    println!("turns taken back ahead of a waiter, by round: {counts:?}");
    assert!(
        counts.iter().all(|&n| n <= SLICE_TURNS as usize),
        "a slice took the turn back more than {SLICE_TURNS} times: {counts:?}"
    );
    assert!(
        counts.contains(&(SLICE_TURNS as usize)),
        "no slice reached its {SLICE_TURNS} turns in {} rounds (each ended by its 2 ms first): {counts:?}",
        counts.len()
    );
}

fn main() {
    run_tests(&[
        (
            "a_slice_ends_after_sixty_four_turns",
            a_slice_ends_after_sixty_four_turns,
        ),
        (
            "a_writer_takes_its_turn_back_within_its_slice",
            a_writer_takes_its_turn_back_within_its_slice,
        ),
        (
            "a_handle_reports_its_strategy",
            a_handle_reports_its_strategy,
        ),
        (
            "a_polling_handle_never_joins_the_page",
            a_polling_handle_never_joins_the_page,
        ),
    ]);
}
