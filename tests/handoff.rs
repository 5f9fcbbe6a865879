//! The hand-off page with real processes: arrival order, killed waiters,
//! foreign page layouts, and writers that only know the driver's polling
//! protocol sharing the database with page-aware ones.

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use common::page::{field, get, get_boot, page_of_boot, put, read_page, this_boot};
use common::*;
use writerlock::handoff::{inspect, PAGE_BYTES, PAGE_IDENTITY, SLOTS};
use writerlock::lockfiles::{lock_path, queue_path};
use writerlock::{BusyKind, Strategy, Wait, WriterQueue};

fn page_publish(db: &Path, hold: Duration) -> i32 {
    let queue = WriterQueue::with_strategy(db, Strategy::Handoff);
    let conn = open(db);
    if queue.begin(&conn, &wait_secs(30.0)).is_err() {
        return 1;
    }
    if publish_body(&conn, hold).is_err() {
        return 2;
    }
    i32::from(queue.commit(&conn).is_err())
}

/// A writer that knows only the driver's files: a shared flock on the queue
/// file while it polls an exclusive flock on the lock file, then a plain
/// `BEGIN IMMEDIATE`. It never reads or writes the page.
fn flock_only_publish(db: &Path, hold: Duration) -> i32 {
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock_path(db))
        .expect("lock file");
    let queue = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(queue_path(db))
        .expect("queue file");
    unsafe { libc::flock(queue.as_raw_fd(), libc::LOCK_SH) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        if Instant::now() > deadline {
            return 3;
        }
        std::thread::sleep(Duration::from_millis(
            1 + u64::from(std::process::id() % 15),
        ));
    }
    unsafe { libc::flock(queue.as_raw_fd(), libc::LOCK_UN) };
    let conn = open(db);
    let ok = conn.busy_timeout(Duration::from_secs(10)).is_ok()
        && conn.execute_batch("BEGIN IMMEDIATE").is_ok()
        && publish_body(&conn, hold).is_ok()
        && conn.execute_batch("COMMIT").is_ok();
    unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_UN) };
    i32::from(!ok)
}

/// Forks a page-aware writer that takes the turn, holds it for `hold` and
/// commits; returns once it holds the turn.
fn page_holder(db: &Path, hold: Duration) -> libc::pid_t {
    let pipe = Pipe::new();
    let pid = fork(|| {
        let queue = WriterQueue::with_strategy(db, Strategy::Handoff);
        let conn = open(db);
        if queue.begin(&conn, &wait_secs(5.0)).is_err() {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(hold);
        i32::from(queue.commit(&conn).is_err())
    });
    assert_eq!(
        pipe.recv(Duration::from_secs(10)),
        Some(1),
        "the holder did not start"
    );
    pid
}

fn writers_in_arrival_order_get_their_turns_in_that_order() {
    let db = Db::new();
    let holder = page_holder(&db.path, Duration::from_millis(600));
    // Eight writers arrive 40 ms apart while the holder holds on.
    let mut waiters = Vec::new();
    let path = db.path.as_path();
    for i in 0..8u8 {
        waiters.push(fork(move || {
            let queue = WriterQueue::with_strategy(path, Strategy::Handoff);
            let conn = open(path);
            if queue.begin(&conn, &wait_secs(20.0)).is_err() {
                return 1;
            }
            let ok = conn
                .execute(
                    "INSERT INTO publishes (n, pid, start_us, end_us) VALUES (?1, 0, ?2, ?2)",
                    rusqlite::params![i, now_us()],
                )
                .is_ok();
            std::thread::sleep(Duration::from_millis(5));
            i32::from(!ok || queue.commit(&conn).is_err())
        }));
        std::thread::sleep(Duration::from_millis(40));
    }
    assert_eq!(wait(holder), 0);
    for w in waiters {
        assert_eq!(wait(w), 0);
    }
    let conn = open(&db.path);
    let order: Vec<i64> = conn
        .prepare("SELECT n FROM publishes ORDER BY start_us")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(
        order,
        (0..8).collect::<Vec<i64>>(),
        "turns out of arrival order"
    );
}

/// A writer whose slice has turns left keeps the lock for a moment after
/// its commit, waking nobody; if it then stops writing (its handle still
/// open), the next writer must still get the turn promptly, and so must the
/// ones behind it, in order.
fn a_writer_that_stops_within_its_slice_hands_over_promptly() {
    let db = Db::new();
    let holder = page_holder(&db.path, Duration::from_millis(500));
    let path = db.path.as_path();
    let dir = db.dir.path();
    let mut waiters = Vec::new();
    for i in 0..4u8 {
        waiters.push(fork(move || {
            let queue = WriterQueue::with_strategy(path, Strategy::Handoff);
            let conn = open(path);
            if queue.begin(&conn, &wait_secs(20.0)).is_err() {
                return 1;
            }
            let ok = conn
                .execute(
                    "INSERT INTO publishes (n, pid, start_us, end_us) VALUES (?1, 0, ?2, ?2)",
                    rusqlite::params![i, now_us()],
                )
                .is_ok();
            if !ok || queue.commit(&conn).is_err() {
                return 2;
            }
            let done = now_us().to_string();
            if std::fs::write(dir.join(format!("done-{i}")), done).is_err() {
                return 3;
            }
            // Stays, handle open, long after its slice would have ended.
            std::thread::sleep(Duration::from_millis(1500));
            0
        }));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(wait(holder), 0);
    for w in waiters {
        assert_eq!(wait(w), 0);
    }
    let conn = open(&db.path);
    let turns: Vec<(i64, i64)> = conn
        .prepare("SELECT n, start_us FROM publishes ORDER BY start_us")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    let order: Vec<i64> = turns.iter().map(|t| t.0).collect();
    assert_eq!(order, vec![0, 1, 2, 3], "turns out of arrival order");
    for pair in turns.windows(2) {
        let done: i64 = std::fs::read_to_string(dir.join(format!("done-{}", pair[0].0)))
            .expect("done file")
            .trim()
            .parse()
            .expect("a time");
        let gap = Duration::from_micros((pair[1].1 - done).max(0) as u64);
        println!(
            "writer {} began {gap:?} after writer {} committed",
            pair[1].0, pair[0].0
        );
        // Expected: about 0.25 ms (the 0.1 ms come-back window, then a
        // timer's wake-up). Generous, for a loaded machine: a head that was
        // never told to watch the slice shows as its 1-20 ms poll instead.
        assert!(
            gap < Duration::from_millis(10),
            "writer {} waited {gap:?} after a writer stopped within its slice",
            pair[1].0
        );
    }
}

/// The time recorded on the line of `text` that starts with `what` (lines
/// such as `granted 1234`, appended by the writers of a test).
fn recorded_time(text: &str, what: &str) -> i64 {
    text.lines()
        .find_map(|l| l.strip_prefix(what))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no time recorded for {what:?} in {text:?}"))
}

fn a_waiter_killed_while_waiting_never_stalls_the_others() {
    let db = Db::new();
    let times = db.dir.path().join("times");
    // The holder takes the turn, holds it 500 ms without a transaction and
    // records when it let go.
    let pipe = Pipe::new();
    let holder = fork(|| {
        let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
        if queue
            .take(writerlock::BusyKind::Transaction, &wait_secs(5.0))
            .is_err()
        {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(Duration::from_millis(500));
        let released = mono_us();
        let ok = matches!(queue.release(), Ok(true));
        i32::from(!ok || append_line(&times, &format!("released {released}")).is_err())
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    // The first waiter (the head of the line) is killed and left unreaped,
    // a zombie whose pid still exists.
    let doomed = fork(|| page_publish(&db.path, Duration::ZERO));
    std::thread::sleep(Duration::from_millis(100));
    // Three writers line up behind it, 40 ms apart.
    let behind: Vec<_> = (0..3)
        .map(|i| {
            let writer = fork(|| {
                let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
                let conn = open(&db.path);
                if queue.begin(&conn, &wait_secs(30.0)).is_err() {
                    return 1;
                }
                let granted = mono_us();
                if publish_body(&conn, Duration::ZERO).is_err() || queue.commit(&conn).is_err() {
                    return 2;
                }
                i32::from(append_line(&times, &format!("granted{i} {granted}")).is_err()) * 3
            });
            std::thread::sleep(Duration::from_millis(40));
            writer
        })
        .collect();
    unsafe { libc::kill(doomed, libc::SIGKILL) };
    assert_eq!(wait(holder), 0);
    for writer in behind {
        assert_eq!(wait(writer), 0, "a writer behind a killed waiter failed");
    }
    assert_eq!(wait(doomed), 128 + libc::SIGKILL);
    assert_eq!(db.count(), 3);
    let text = std::fs::read_to_string(&times).expect("times");
    let time = |what: &str| recorded_time(&text, what);
    let granted: Vec<i64> = (0..3).map(|i| time(&format!("granted{i} "))).collect();
    assert!(
        granted.windows(2).all(|w| w[0] < w[1]),
        "the writers behind a killed waiter got their turns out of arrival order: {granted:?}"
    );
    let gap = Duration::from_micros((granted[0] - time("released ")).max(0) as u64);
    println!("the writer behind a killed waiter got the turn {gap:?} after the release");
    // Long since reaped, the dead waiter costs nothing; noticed only by the
    // 50 ms fallback for a free lock left untaken, it would cost 50 ms.
    assert!(
        gap < Duration::from_millis(30),
        "the writer behind a killed waiter got the turn {gap:?} after the release"
    );
}

fn a_holder_killed_while_holding_frees_the_lock_for_waiters() {
    let db = Db::new();
    let pipe = Pipe::new();
    let holder = fork(|| {
        let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
        let conn = open(&db.path);
        if queue.begin(&conn, &wait_secs(5.0)).is_err() {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(Duration::from_secs(60));
        0
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    let waiters: Vec<_> = (0..4)
        .map(|_| fork(|| page_publish(&db.path, Duration::from_millis(5))))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let killed_at = Instant::now();
    assert_eq!(kill9(holder), 128 + libc::SIGKILL);
    for w in waiters {
        assert_eq!(wait(w), 0);
    }
    let took = killed_at.elapsed();
    eprintln!("four waiters finished {took:?} after the holder was killed");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(db.count(), 4);
    assert!(db.integrity_ok());
}

fn a_page_with_a_foreign_layout_is_ignored_safely() {
    let db = Db::new();
    // Another build's page: a different identity word and some content.
    let mut foreign = vec![0u8; PAGE_BYTES];
    foreign[..8].copy_from_slice(&0x574C_5150_0000_0063u64.to_ne_bytes());
    foreign[8..16].copy_from_slice(&[7u8; 8]);
    std::fs::write(queue_path(&db.path), &foreign).expect("write foreign page");

    let codes = run_together(8, |_| {
        (0..3)
            .map(|_| page_publish(&db.path, Duration::from_millis(1)))
            .sum()
    });
    assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
    assert_eq!(db.count(), 24);
    for pair in db.intervals().windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlap: {pair:?}");
    }
    // The foreign page was neither rewritten nor truncated.
    let mut now = Vec::new();
    let mut f = std::fs::File::open(queue_path(&db.path)).expect("open");
    f.read_to_end(&mut now).expect("read");
    assert_eq!(now, foreign, "a foreign page was modified");

    // A short queue file of junk (shorter than a page) is extended, not
    // truncated, and works.
    let db2 = Db::new();
    let mut f = std::fs::File::create(queue_path(&db2.path)).expect("create");
    f.write_all(b"junk").expect("junk");
    f.seek(SeekFrom::Start(0)).expect("seek");
    drop(f);
    assert_eq!(page_publish(&db2.path, Duration::ZERO), 0);
    let len = std::fs::metadata(queue_path(&db2.path))
        .expect("stat")
        .len();
    assert!(len >= 4, "truncated to {len}");
}

fn page_aware_and_flock_only_writers_exclude_each_other() {
    let db = Db::new();
    let codes = run_together(24, |i| {
        (0..4)
            .map(|_| {
                if i % 2 == 0 {
                    page_publish(&db.path, Duration::from_millis(2))
                } else {
                    flock_only_publish(&db.path, Duration::from_millis(2))
                }
            })
            .sum()
    });
    assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
    assert_eq!(db.count(), 96);
    for pair in db.intervals().windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlap: {pair:?}");
    }
    assert!(db.integrity_ok());
}

fn the_driver_protocol_and_the_page_share_a_database() {
    let db = Db::new();
    let codes = run_together(16, |i| {
        let strategy = if i % 2 == 0 {
            Strategy::Handoff
        } else {
            Strategy::Poll
        };
        let queue = WriterQueue::with_strategy(&db.path, strategy);
        let conn = open(&db.path);
        (0..5)
            .map(|_| {
                if queue.begin(&conn, &wait_secs(30.0)).is_err() {
                    return 1;
                }
                if publish_body(&conn, Duration::from_millis(1)).is_err() {
                    return 2;
                }
                i32::from(queue.commit(&conn).is_err())
            })
            .sum()
    });
    assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
    assert_eq!(db.count(), 80);
    for pair in db.intervals().windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlap: {pair:?}");
    }
}

/// Header field `name` of a page read from a queue file.
fn header(page: &[u8], name: &str) -> u64 {
    get(page, field(name), 0)
}

/// The slot index of the waiter `pid` on a page, if it has one.
fn slot_of(page: &[u8], pid: libc::pid_t) -> Option<usize> {
    (0..SLOTS).find(|&i| get(page, field("pid"), i) == pid as u64)
}

/// The page a writer leaves in `<db>.writer-queue` is a protocol between
/// builds (a PHP extension and a Python module of different releases share
/// one database): it starts with "WLQP" and the layout version, carries the
/// boot its times count in, and records the holder and, after a release
/// within the slice, the 100 µs come-back window, in CLOCK_MONOTONIC
/// microseconds.
fn the_page_on_disk_follows_its_layout() {
    let db = Db::new();
    assert_eq!(PAGE_IDENTITY, 0x574C_5150_0000_0002, "WLQP, layout 2");
    assert_eq!(writerlock::handoff::LAYOUT_VERSION, 2);
    let boot = this_boot();
    // A release that comes within the turn's 2 ms slice; a loaded machine
    // may take longer between the two, so a few rounds are allowed.
    let mut checked = 0;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(5));
        let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
        let t0 = mono_us() as u64;
        queue
            .take(BusyKind::Transaction, &wait_secs(5.0))
            .expect("the turn");
        let t1 = mono_us() as u64;
        let held = read_page(&db.path);
        let t2 = mono_us() as u64;
        queue.release().expect("release");
        let t3 = mono_us() as u64;
        let left = read_page(&db.path);

        assert_eq!(
            header(&held, "identity"),
            PAGE_IDENTITY,
            "the page's identity word"
        );
        assert_eq!(get_boot(&held), boot, "the page's boot");
        assert_eq!(header(&held, "holder_pid"), u64::from(std::process::id()));
        let since = header(&held, "held_since_us");
        assert!(
            (t0..=t1).contains(&since),
            "held since {since}, taken in {t0}..{t1}"
        );
        let slice = header(&held, "slice_until_us");
        assert!(
            (t0 + 2000..=t1 + 2000).contains(&slice),
            "slice until {slice}, taken in {t0}..{t1}"
        );
        assert_eq!(
            header(&left, "holder_pid"),
            0,
            "a holder recorded after release"
        );
        if t3 - t0 >= 1500 {
            continue;
        }
        let back = header(&left, "comeback_until_us");
        assert!(
            (t2 + 100..=t3 + 100).contains(&back),
            "come-back window until {back}, released in {t2}..{t3}"
        );
        checked += 1;
    }
    println!("{checked} of 40 releases within their slice checked");
    assert!(checked > 0, "no release came within 1.5 ms of its take");
}

/// A waiter on the page holds an open-file-description lock on one byte of
/// the queue file, 1 MiB + its slot index, for as long as it waits: the
/// kernel drops it when the waiter dies, which is how the others recognise
/// a dead waiter. Probed here with `F_OFD_GETLK` through another open file.
fn a_waiter_holds_its_liveness_byte_while_it_waits() {
    let db = Db::new();
    let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
    queue
        .take(BusyKind::Transaction, &wait_secs(5.0))
        .expect("the turn");
    // Two waiters, so that slots other than the first are checked too.
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let path = db.path.clone();
        let waiter = fork(move || {
            let queue = WriterQueue::with_strategy(&path, Strategy::Handoff);
            if queue.take(BusyKind::Transaction, &wait_secs(10.0)).is_err() {
                return 1;
            }
            i32::from(queue.release().is_err()) * 2
        });
        let until = Instant::now() + Duration::from_secs(10);
        let slot = loop {
            if let Some(slot) = slot_of(&read_page(&db.path), waiter) {
                break slot;
            }
            assert!(Instant::now() < until, "the waiter never took a slot");
            std::thread::sleep(Duration::from_millis(1));
        };
        waiters.push((waiter, slot));
    }
    let file = std::fs::File::open(queue_path(&db.path)).expect("open the queue file");
    let locked_at = |at: i64| {
        // SAFETY: a zeroed flock is a valid argument; the result is checked.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = at;
        fl.l_len = 1;
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
        assert_eq!(rc, 0, "F_OFD_GETLK: {}", std::io::Error::last_os_error());
        fl.l_type != libc::F_UNLCK as libc::c_short
    };
    let slots: Vec<usize> = waiters.iter().map(|&(_, slot)| slot).collect();
    assert!(slots[0] != slots[1], "two waiters in one slot: {slots:?}");
    for &slot in &slots {
        let byte = (1 << 20) + slot as i64;
        assert!(locked_at(byte), "no liveness lock at 1 MiB + slot {slot}");
        assert!(!locked_at(slot as i64), "a lock inside the page");
    }
    queue.release().expect("release");
    for (waiter, slot) in waiters {
        assert_eq!(wait(waiter), 0, "the waiter");
        let byte = (1 << 20) + slot as i64;
        assert!(!locked_at(byte), "the liveness lock outlived the wait");
    }
}

/// A page written in another boot (its `boot` differs from this machine's
/// `boot_id`, even in one half only) has its times and holder cleared by the
/// first writer that maps it, which then stamps this boot: times of another
/// boot's CLOCK_MONOTONIC mean nothing here.
fn a_page_from_another_boot_is_taken_over_with_its_times_cleared() {
    let boot = this_boot();
    let (high, low) = ((boot >> 64) as u64, boot as u64);
    for (what, other) in [
        ("another boot", (high ^ 1, low ^ 1)),
        ("another low half", (high, low ^ 1)),
        ("another high half", (high ^ 1, low)),
    ] {
        let db = Db::new();
        let mut page = page_of_boot((u128::from(other.0) << 64) | u128::from(other.1));
        // A holder and a come-back window that, read on this boot's clock,
        // would still be running for an hour.
        let hour_ahead = mono_us() as u64 + 3_600_000_000;
        put(&mut page, field("holder_pid"), 0, 4_000_000);
        put(&mut page, field("held_since_us"), 0, 1);
        put(&mut page, field("comeback_until_us"), 0, hour_ahead);
        put(&mut page, field("slice_until_us"), 0, hour_ahead);
        std::fs::write(queue_path(&db.path), &page).expect("write the page");

        // A writer that maps it but waits on someone else's turn (a raw
        // flock on the lock file), so it records no hold of its own.
        let lock = std::fs::File::open(lock_path(&db.path))
            .or_else(|_| std::fs::File::create(lock_path(&db.path)))
            .expect("lock file");
        assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
        let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
        let busy = queue.take(
            BusyKind::Statement,
            &Wait::statement(Duration::from_millis(50)),
        );
        assert!(
            busy.is_err(),
            "{what}: the turn while another held the lock"
        );
        let seen = read_page(&db.path);
        assert_eq!(get_boot(&seen), boot, "{what}: the boot stamped");
        for field in [
            "holder_pid",
            "held_since_us",
            "comeback_until_us",
            "slice_until_us",
        ] {
            assert_eq!(
                header(&seen, field),
                0,
                "{what}: {field} kept from another boot"
            );
        }
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// A writer that maps the page while another holds the turn leaves the
/// holder's record alone: `writerlock status` and the waiters' stall check
/// read it while the holder works.
fn a_writer_mapping_the_page_leaves_the_holders_record() {
    let db = Db::new();
    let holder = page_holder(&db.path, Duration::from_millis(500));
    let before = read_page(&db.path);
    assert_eq!(header(&before, "holder_pid"), holder as u64);
    let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
    let busy = queue.take(
        BusyKind::Statement,
        &Wait::statement(Duration::from_millis(50)),
    );
    assert!(busy.is_err(), "the turn while another held it");
    let unchanged = |by: &str| {
        let now = read_page(&db.path);
        for field in ["holder_pid", "held_since_us", "slice_until_us"] {
            assert_eq!(
                header(&now, field),
                header(&before, field),
                "{field} changed by {by}"
            );
        }
    };
    unchanged("a waiter");
    // Nor does dropping that writer's handle, which held no turn.
    drop(queue);
    unchanged("dropping a handle that held no turn");
    assert_eq!(wait(holder), 0, "the holder");
}

/// Only an empty queue file, one of zero bytes up to the page's size, or
/// one that already starts with a page of this layout gets the page; any
/// other file (longer than a page, or with content, even after eight zero
/// bytes) is someone else's and is never written: its writers poll. A file
/// of exactly a page of zero bytes is a page being created and gets it.
fn only_an_empty_or_page_sized_zero_file_gets_the_page() {
    let mut junk_after_zeros = vec![0u8; 20 * 1024];
    for (i, b) in junk_after_zeros.iter_mut().enumerate().skip(8) {
        *b = (i % 251) as u8 + 1;
    }
    for (what, content) in [
        ("20 KiB of zero bytes", vec![0u8; 20 * 1024]),
        ("8 zero bytes, then 20 KiB of content", junk_after_zeros),
    ] {
        let db = Db::new();
        std::fs::write(queue_path(&db.path), &content).expect("write the queue file");
        assert_eq!(
            page_publish(&db.path, Duration::ZERO),
            0,
            "{what}: the publish"
        );
        let after = std::fs::read(queue_path(&db.path)).expect("read");
        assert!(after == content, "{what}: the queue file was written");
    }
    let db = Db::new();
    std::fs::write(queue_path(&db.path), vec![0u8; PAGE_BYTES]).expect("write the queue file");
    assert_eq!(page_publish(&db.path, Duration::ZERO), 0);
    let page = read_page(&db.path);
    assert_eq!(
        header(&page, "identity"),
        PAGE_IDENTITY,
        "a page-sized zero file got no page"
    );
}

/// The queue files' mappings of the page, as this process's maps list them.
fn page_mappings(db: &Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let name = queue_path(db);
    let name = name.to_string_lossy();
    maps.lines().filter(|l| l.ends_with(name.as_ref())).count()
}

/// A handle maps the page once and unmaps it when it is dropped: a
/// long-lived host (a PHP-FPM worker, a Python service) that makes a
/// handle per request keeps no mapping per request.
fn a_dropped_handle_unmaps_its_page() {
    let db = Db::new();
    for _ in 0..3 {
        let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
        queue
            .take(BusyKind::Transaction, &wait_secs(5.0))
            .expect("the turn");
        queue.release().expect("release");
        assert_eq!(
            page_mappings(&db.path),
            1,
            "mappings while the handle lives"
        );
        drop(queue);
        assert_eq!(
            page_mappings(&db.path),
            0,
            "mappings after the handle was dropped"
        );
    }
}

/// The holder records the CPU it took the lock on, plus one, in the
/// page's `holder_cpu` (0 means unknown): a head woken onto that CPU
/// sleeps instead of spinning. Checked with this thread pinned to one CPU.
fn the_page_records_the_holders_cpu() {
    let db = Db::new();
    // SAFETY: affinity masks of the calling thread, restored below.
    let mut before: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut before) }, 0);
    let cpu = (0..libc::CPU_SETSIZE as usize)
        .rev()
        .find(|&c| unsafe { libc::CPU_ISSET(c, &before) })
        .expect("a CPU this thread may run on");
    let mut pinned: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut pinned) };
    assert_eq!(unsafe { libc::sched_setaffinity(0, size, &pinned) }, 0);
    let queue = WriterQueue::with_strategy(&db.path, Strategy::Handoff);
    let taken = queue.take(BusyKind::Transaction, &wait_secs(5.0));
    let recorded = header(&read_page(&db.path), "holder_cpu");
    let _ = queue.release();
    unsafe { libc::sched_setaffinity(0, size, &before) };
    taken.expect("the turn");
    assert_eq!(recorded, cpu as u64 + 1, "holder_cpu, taken on CPU {cpu}");
}

/// A page-aware writer that finds the lock free while a writer that can
/// only poll (Exponential's driver, a `Strategy::Poll` handle) waits in the
/// queue file, and nobody waits on the page, stands aside for the 30 ms
/// yield: the poller, there first, gets its turn first, and the page-aware
/// writer after it, without an error.
fn a_page_aware_writer_yields_to_a_writer_that_can_only_poll() {
    let mut out_of_order = Vec::new();
    for round in 0..4 {
        let db = Db::new();
        if round % 2 == 1 {
            // A page that had four waiters once: free slots below its
            // high-water mark are no waiters.
            let mut page = page_of_boot(0);
            put(&mut page, field("high_water"), 0, 4);
            std::fs::write(queue_path(&db.path), &page).expect("write the page");
        }
        let times = db.dir.path().join("times");
        let holder = page_holder(&db.path, Duration::from_millis(300));
        let writer = |strategy: Strategy, name: &'static str| {
            let path = db.path.clone();
            let times = times.clone();
            fork(move || {
                let queue = WriterQueue::with_strategy(&path, strategy);
                if queue.take(BusyKind::Transaction, &wait_secs(10.0)).is_err() {
                    return 1;
                }
                let granted = mono_us();
                std::thread::sleep(Duration::from_millis(2));
                if queue.release().is_err() {
                    return 2;
                }
                i32::from(append_line(&times, &format!("{name} {granted}")).is_err()) * 3
            })
        };
        let poller = writer(Strategy::Poll, "poller");
        std::thread::sleep(Duration::from_millis(100));
        let page_aware = writer(Strategy::Handoff, "page");
        assert_eq!(wait(holder), 0, "the holder");
        assert_eq!(wait(poller), 0, "the poller");
        assert_eq!(wait(page_aware), 0, "the page-aware writer");
        let text = std::fs::read_to_string(&times).expect("times");
        let time = |what: &str| recorded_time(&text, what);
        if time("page ") < time("poller ") {
            out_of_order.push(round);
        }
    }
    assert!(
        out_of_order.is_empty(),
        "the page-aware writer went ahead of the poller that was there first, in rounds {out_of_order:?}"
    );
}

/// `inspect` (what `writerlock status` shows) reads a page as written: the
/// holder and how long it has held, every waiter with a ticket counted,
/// those with a pid listed in ticket order with how long they have waited;
/// times and the holder of another boot are not shown. A symbolic link, a
/// FIFO and a foreign layout give no page, and a FIFO never blocks it.
fn inspect_reads_the_page_as_status_tools_need() {
    let dir = tempfile::tempdir().expect("tempdir");
    let boot = this_boot();
    let page_of = |boot: u128| {
        let now = mono_us() as u64;
        let mut page = page_of_boot(boot);
        put(&mut page, field("holder_pid"), 0, 4242);
        put(&mut page, field("held_since_us"), 0, now - 1_000_000);
        put(&mut page, field("high_water"), 0, 8);
        for (slot, pid, ticket, since) in [
            (3, 111, 7, now - 2_000_000),
            (5, 222, 5, 0),
            (6, 0, 9, now - 500_000),
        ] {
            put(&mut page, field("pid"), slot, pid);
            put(&mut page, field("ticket"), slot, ticket);
            put(&mut page, field("since_us"), slot, since);
        }
        page
    };
    let file = dir.path().join("site.db.writer-queue");
    std::fs::write(&file, page_of(boot)).expect("write the page");
    let seen = inspect(&file).expect("a page");
    assert_eq!(seen.holder_pid, Some(4242));
    let held = seen.held_for.expect("how long it held");
    assert!(
        held >= Duration::from_secs(1) && held < Duration::from_secs(30),
        "{held:?}"
    );
    assert_eq!(seen.waiters, 3, "waiters with a ticket");
    let listed: Vec<(u32, u64)> = seen.queue.iter().map(|w| (w.pid, w.ticket)).collect();
    assert_eq!(
        listed,
        vec![(222, 5), (111, 7)],
        "the line, in ticket order"
    );
    assert_eq!(
        seen.queue[0].waited, None,
        "a waiter that stamped no arrival"
    );
    let waited = seen.queue[1].waited.expect("how long it waited");
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(30),
        "{waited:?}"
    );

    for (what, other) in [
        ("another boot", boot ^ (1 << 64) ^ 1),
        ("another low half", boot ^ 1),
        ("another high half", boot ^ (1 << 64)),
    ] {
        std::fs::write(&file, page_of(other)).expect("write the page");
        let seen = inspect(&file).expect("a page");
        assert_eq!(seen.holder_pid, None, "{what}: a holder of another boot");
        assert_eq!(seen.held_for, None, "{what}");
        assert_eq!(seen.waiters, 3, "{what}");
        assert!(
            seen.queue.iter().all(|w| w.waited.is_none()),
            "{what}: {:?}",
            seen.queue
        );
    }

    let mut foreign = page_of(boot);
    foreign[..8].copy_from_slice(&(PAGE_IDENTITY + 1).to_ne_bytes());
    std::fs::write(&file, &foreign).expect("write the page");
    assert_eq!(inspect(&file), None, "a foreign layout");

    std::fs::write(&file, page_of(boot)).expect("write the page");
    let link = dir.path().join("link.db.writer-queue");
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    assert_eq!(inspect(&link), None, "read through a symbolic link");

    let fifo = dir.path().join("fifo.db.writer-queue");
    let c_fifo = std::ffi::CString::new(fifo.to_str().expect("a UTF-8 path")).expect("no NUL");
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0, "mkfifo");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(inspect(&fifo));
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(seen) => assert_eq!(seen, None, "a FIFO"),
        Err(_) => panic!("inspect blocked on a FIFO"),
    }
}

fn main() {
    run_tests(&[
        (
            "writers_in_arrival_order_get_their_turns_in_that_order",
            writers_in_arrival_order_get_their_turns_in_that_order,
        ),
        (
            "a_writer_that_stops_within_its_slice_hands_over_promptly",
            a_writer_that_stops_within_its_slice_hands_over_promptly,
        ),
        (
            "a_waiter_killed_while_waiting_never_stalls_the_others",
            a_waiter_killed_while_waiting_never_stalls_the_others,
        ),
        (
            "a_holder_killed_while_holding_frees_the_lock_for_waiters",
            a_holder_killed_while_holding_frees_the_lock_for_waiters,
        ),
        (
            "a_page_with_a_foreign_layout_is_ignored_safely",
            a_page_with_a_foreign_layout_is_ignored_safely,
        ),
        (
            "page_aware_and_flock_only_writers_exclude_each_other",
            page_aware_and_flock_only_writers_exclude_each_other,
        ),
        (
            "the_driver_protocol_and_the_page_share_a_database",
            the_driver_protocol_and_the_page_share_a_database,
        ),
        (
            "the_page_on_disk_follows_its_layout",
            the_page_on_disk_follows_its_layout,
        ),
        (
            "a_waiter_holds_its_liveness_byte_while_it_waits",
            a_waiter_holds_its_liveness_byte_while_it_waits,
        ),
        (
            "only_an_empty_or_page_sized_zero_file_gets_the_page",
            only_an_empty_or_page_sized_zero_file_gets_the_page,
        ),
        (
            "a_dropped_handle_unmaps_its_page",
            a_dropped_handle_unmaps_its_page,
        ),
        (
            "the_page_records_the_holders_cpu",
            the_page_records_the_holders_cpu,
        ),
        (
            "a_page_from_another_boot_is_taken_over_with_its_times_cleared",
            a_page_from_another_boot_is_taken_over_with_its_times_cleared,
        ),
        (
            "a_writer_mapping_the_page_leaves_the_holders_record",
            a_writer_mapping_the_page_leaves_the_holders_record,
        ),
        (
            "a_page_aware_writer_yields_to_a_writer_that_can_only_poll",
            a_page_aware_writer_yields_to_a_writer_that_can_only_poll,
        ),
        (
            "inspect_reads_the_page_as_status_tools_need",
            inspect_reads_the_page_as_status_tools_need,
        ),
    ]);
}
