//! `writerlock status` against real holders and waiters: the queue's own (`writerlock hold`,
//! which takes the turn through the core and runs BEGIN IMMEDIATE), and util-linux `flock`
//! processes outside the queue.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn status_json(db: &str) -> serde_json::Value {
    run_json(&["status", db, "--json"])
}

fn pids(v: &serde_json::Value) -> BTreeSet<u32> {
    v.as_array()
        .expect("an array of pids")
        .iter()
        .map(|p| p.as_u64().expect("a pid") as u32)
        .collect()
}

/// The pids of the waiters in a status document's `queue`.
fn queue_pids(status: &serde_json::Value) -> BTreeSet<u32> {
    status["queue"]
        .as_array()
        .expect("the queue")
        .iter()
        .map(|w| w["pid"].as_u64().expect("a pid") as u32)
        .collect()
}

/// Waits for a child and asserts it succeeded.
fn finish(mut child: Child, what: &str) {
    let status = child.wait().expect("wait for a child");
    assert!(status.success(), "{what} exited with {status}");
}

#[test]
fn counts_a_real_holder_and_its_waiters_then_nobody() {
    let dir = TempDir::new("status-queue");
    let db = dir.file("site.db");

    let mut holder = command(&["hold", &db, "--for", "60s", "--until-eof"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the holder");
    let mut lines = BufReader::new(holder.stdout.take().expect("holder stdout")).lines();
    let first = lines
        .next()
        .expect("the holder's first line")
        .expect("read");
    assert_eq!(first, format!("holding {}", holder.id()));
    let held_at = Instant::now();

    // Waiters join one after another, so their arrival order is known.
    let mut waiters: Vec<Child> = Vec::new();
    for n in 1..=3 {
        waiters.push(
            command(&["hold", &db, "--for", "0s", "--wait", "60s"])
                .stdout(Stdio::null())
                .spawn()
                .expect("start a waiter"),
        );
        eventually(Duration::from_secs(20), "the waiter queued", || {
            (status_json(&db)["waiting"] == n).then_some(())
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    let waiter_pids: BTreeSet<u32> = waiters.iter().map(Child::id).collect();

    let status = eventually(Duration::from_secs(20), "three waiters queued", || {
        let s = status_json(&db);
        (s["waiting"] == 3).then_some(s)
    });
    let upper = held_at.elapsed().as_secs_f64() + 0.5;
    assert_eq!(status["lock_file"]["exists"], true);
    assert_eq!(status["queue_file"]["exists"], true);
    let h = &status["holder"];
    assert_eq!(h["pid"], holder.id());
    assert_eq!(h["alive"], true);
    let cmd = h["command"].as_str().expect("the holder's command line");
    assert!(cmd.contains("hold") && cmd.contains("--until-eof"), "{cmd}");
    // The queue's writers stamp their acquisition on the hand-off page: the hold is known.
    assert_eq!(h["held_for_source"], "handoff-page", "{status}");
    let held = h["held_for_s"].as_f64().expect("a known hold time");
    assert!(
        held >= 0.0 && held <= upper,
        "held {held} s, upper bound {upper} s"
    );
    assert_eq!(queue_pids(&status), waiter_pids);
    // Oldest first, from the hand-off page: arrival order, command and time waited.
    let queue = status["queue"].as_array().expect("the queue");
    let order: Vec<u32> = queue
        .iter()
        .map(|w| w["pid"].as_u64().expect("pid") as u32)
        .collect();
    let started: Vec<u32> = waiters.iter().map(Child::id).collect();
    assert_eq!(order, started, "not oldest first: {status}");
    let waited: Vec<f64> = queue
        .iter()
        .map(|w| w["waited_s"].as_f64().expect("a known wait from the page"))
        .collect();
    assert!(
        waited.windows(2).all(|w| w[0] > w[1]),
        "the oldest waited longest: {waited:?}"
    );
    for w in queue {
        assert!(w["ticket"].as_u64().is_some(), "{w}");
        let cmd = w["command"].as_str().expect("a waiter's command");
        assert!(cmd.contains("hold") && cmd.contains("--wait 60s"), "{cmd}");
    }
    assert_eq!(status["filesystem"]["kind"], "local");
    assert!(status["filesystem"]["warning"].is_null());

    let text = run_ok(&["status", &db]);
    assert!(
        text.contains(&format!("held by pid {}", holder.id())),
        "{text}"
    );
    assert!(
        text.contains("waiting      3 writers, oldest first:"),
        "{text}"
    );
    let first_waiter = text
        .lines()
        .position(|l| l.trim_start().starts_with(&format!("pid {}", started[0])))
        .expect("the oldest waiter's line");
    let last_waiter = text
        .lines()
        .position(|l| l.trim_start().starts_with(&format!("pid {}", started[2])))
        .expect("the newest waiter's line");
    assert!(first_waiter < last_waiter, "{text}");

    // Release: the waiters take their turns and leave; then nobody holds or waits.
    drop(holder.stdin.take());
    assert_eq!(
        lines.next().expect("the holder's last line").expect("read"),
        "released"
    );
    finish(holder, "the holder");
    for w in waiters {
        finish(w, "a waiter");
    }
    let status = status_json(&db);
    assert!(status["holder"].is_null(), "{status}");
    assert_eq!(status["waiting"], 0);
    let text = run_ok(&["status", &db]);
    assert!(text.contains("free: nobody holds it"), "{text}");
    assert!(text.contains("waiting      nobody"), "{text}");
}

fn util_flock() -> &'static str {
    let found = std::process::Command::new("flock")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "the flock program (util-linux) is missing: install it with `apt-get install -y \
         util-linux`"
    );
    "flock"
}

/// `flock MODE FILE cat`: holds the lock until its stdin closes.
fn flock_process(mode: &str, file: &str) -> Child {
    std::process::Command::new(util_flock())
        .args([mode, file, "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start flock")
}

#[test]
fn sees_an_outside_flock_holder_with_an_unknown_hold_time() {
    let dir = TempDir::new("status-flock");
    let db = dir.file("site.db");
    std::fs::write(&db, b"").expect("create the database file");
    let lock = format!("{db}.writer-lock");
    let queue = format!("{db}.writer-queue");

    let mut holder = flock_process("-x", &lock);
    // Without the page, the older process is listed first.
    let first = flock_process("-s", &queue);
    std::thread::sleep(Duration::from_millis(300));
    let mut waiters = vec![first, flock_process("-s", &queue)];
    let waiter_pids: BTreeSet<u32> = waiters.iter().map(Child::id).collect();

    let status = eventually(
        Duration::from_secs(20),
        "the flock holder and waiters",
        || {
            let s = status_json(&db);
            (s["holder"]["pid"] == holder.id() && s["waiting"] == 2).then_some(s)
        },
    );
    let h = &status["holder"];
    let cmd = h["command"].as_str().expect("command line");
    assert!(cmd.starts_with("flock -x") && cmd.ends_with("cat"), "{cmd}");
    // util-linux flock stamps nothing: the time is unknown, bounded by the process's age.
    assert!(h["held_for_s"].is_null(), "{status}");
    assert!(h["held_for_source"]
        .as_str()
        .is_some_and(|s| s.starts_with("unknown")));
    assert!(h["process_age_s"].as_f64().is_some_and(|a| a >= 0.0));
    assert_eq!(queue_pids(&status), waiter_pids);
    assert_eq!(
        status["queue"][0]["pid"],
        waiters[0].id(),
        "oldest process first: {status}"
    );
    assert_eq!(status["queue"][1]["pid"], waiters[1].id(), "{status}");
    assert!(
        status["queue"][0]["waited_s"].is_null(),
        "no page, no known wait: {status}"
    );
    assert!(status["queue"][0]["command"]
        .as_str()
        .is_some_and(|c| c.starts_with("flock -s")));
    let text = run_ok(&["status", &db]);
    assert!(text.contains("waiting at most"), "{text}");
    assert!(text.contains("held for an unknown time"), "{text}");
    assert!(text.contains("so at most that"), "{text}");
    assert!(text.contains("2 writers"), "{text}");

    drop(holder.stdin.take());
    finish(holder, "flock -x");
    for w in &mut waiters {
        drop(w.stdin.take());
    }
    for w in waiters {
        finish(w, "flock -s");
    }
    let status = status_json(&db);
    assert!(status["holder"].is_null(), "{status}");
    assert_eq!(status["waiting"], 0);
}

#[test]
fn says_when_the_lock_files_do_not_exist_yet() {
    let dir = TempDir::new("status-nofiles");
    let db = dir.file("fresh.db");
    std::fs::write(&db, b"").expect("create the database file");
    let status = status_json(&db);
    assert_eq!(status["lock_file"]["exists"], false);
    assert_eq!(status["queue_file"]["exists"], false);
    assert!(status["holder"].is_null());
    assert_eq!(status["waiting"], 0);
    let text = run_ok(&["status", &db]);
    assert!(
        text.contains("no writer has used the queue on this database yet")
            && text.contains(&format!("{db}.writer-lock does not exist")),
        "{text}"
    );
    // status only reads: it never creates the lock files.
    assert!(!std::path::Path::new(&format!("{db}.writer-lock")).exists());
    assert!(!std::path::Path::new(&format!("{db}.writer-queue")).exists());
}

#[test]
fn a_missing_database_is_one_clear_line() {
    let dir = TempDir::new("status-missing");
    let db = dir.file("nothing-here.db");
    let out = run(&["status", &db]);
    let line = assert_one_line_error(&out);
    assert!(
        line.contains("no database at") && line.contains(&db),
        "{line}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_tmpfs_database_is_local() {
    let shm = std::path::Path::new("/dev/shm");
    assert!(shm.is_dir(), "/dev/shm is missing: this test needs a tmpfs");
    let db = shm.join(format!("writerlock-cli-status-{}.db", std::process::id()));
    std::fs::write(&db, b"").expect("create a database on tmpfs");
    let status = status_json(&db.display().to_string());
    let _ = std::fs::remove_file(&db);
    assert_eq!(status["filesystem"]["name"], "tmpfs");
    assert_eq!(status["filesystem"]["kind"], "local");
    assert!(status["filesystem"]["warning"].is_null());
}

#[test]
fn a_lock_passed_to_a_child_names_the_process_that_still_has_it() {
    let dir = TempDir::new("status-orphan");
    let db = dir.file("site.db");
    std::fs::write(&db, b"").expect("create the database file");
    let lock = format!("{db}.writer-lock");
    // util-linux flock takes the lock, then forks `cat`, which inherits the locked
    // descriptor. Killing flock leaves the lock with cat, while /proc/locks still names
    // flock's pid.
    let mut holder = flock_process("-x", &lock);
    let flock_pid = holder.id();
    eventually(Duration::from_secs(20), "the flock holder", || {
        (status_json(&db)["holder"]["pid"] == flock_pid).then_some(())
    });
    let stdin = holder.stdin.take();
    holder.kill().expect("kill flock");
    let _ = holder.wait();
    let status = status_json(&db);
    let h = &status["holder"];
    assert_eq!(h["pid"], flock_pid, "{status}");
    assert_eq!(h["alive"], false, "{status}");
    let open_in = pids(&h["descriptor_open_in"]);
    assert_eq!(open_in.len(), 1, "{status}");
    let child = *open_in.iter().next().expect("one pid");
    let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).expect("the child's cmdline");
    assert_eq!(cmdline, b"cat\0");
    let text = run_ok(&["status", &db]);
    assert!(
        text.contains("the process that took the lock has exited")
            && text.contains(&format!("pid {child}")),
        "{text}"
    );
    // Closing cat's stdin ends it, and with it the lock.
    drop(stdin);
    eventually(Duration::from_secs(10), "the lock released", || {
        status_json(&db)["holder"].is_null().then_some(())
    });
}

#[test]
fn a_directory_or_a_file_that_is_not_sqlite_exits_non_zero() {
    let dir = TempDir::new("status-not-sqlite");
    let text = dir.file("notes.txt");
    std::fs::write(&text, "these are notes, not a database\n").expect("write");
    let out = run(&["status", dir.path().to_str().expect("utf-8")]);
    let line = assert_one_line_error(&out);
    assert!(
        line.contains("is not a SQLite database: it is a directory"),
        "{line}"
    );
    let out = run(&["status", &text]);
    let line = assert_one_line_error(&out);
    assert!(
        line.contains("first bytes are not SQLite's header"),
        "{line}"
    );
    // An empty file is a database nobody wrote yet: still a status.
    let empty = dir.file("empty.db");
    std::fs::write(&empty, "").expect("write");
    run_ok(&["status", &empty]);
}

#[test]
fn json_errors_are_a_json_object_with_the_same_text() {
    let dir = TempDir::new("status-json-error");
    for args in [
        vec!["status", dir.path().to_str().expect("utf-8"), "--json"],
        vec!["status", "--json", "--no-such-flag"],
    ] {
        println!("writerlock {args:?}");
        assert_json_error(&run(&args));
    }
}

#[test]
fn names_the_command_of_a_writer_outside_the_queue() {
    let dir = TempDir::new("status-outside");
    let db = dir.file("site.db");
    let setup = rusqlite::Connection::open(&db).expect("open");
    setup
        .execute_batch("CREATE TABLE t (x INTEGER)")
        .expect("a table");
    drop(setup);
    // A sqlite3 shell left inside BEGIN IMMEDIATE: SQLite's write lock, no queue.
    let mut shell = std::process::Command::new("sqlite3")
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the sqlite3 shell (apt-get install -y sqlite3)");
    {
        use std::io::Write;
        let stdin = shell.stdin.as_mut().expect("stdin");
        stdin
            .write_all(b"BEGIN IMMEDIATE;\nINSERT INTO t VALUES (1);\n")
            .expect("write to the shell");
        stdin.flush().expect("flush");
    }
    let status = eventually(Duration::from_secs(20), "the shell's write lock", || {
        let s = status_json(&db);
        (s["outside"].as_array().is_some_and(|o| !o.is_empty())).then_some(s)
    });
    assert_eq!(status["outside"][0]["pid"], shell.id(), "{status}");
    let cmd = status["outside"][0]["command"]
        .as_str()
        .expect("its command");
    assert!(
        cmd.starts_with("sqlite3 ") && cmd.ends_with("site.db"),
        "{cmd}"
    );
    let text = run_ok(&["status", &db]);
    assert!(
        text.contains(&format!("pid {}", shell.id())) && text.contains("sqlite3 "),
        "{text}"
    );
    drop(shell.stdin.take());
    finish(shell, "the sqlite3 shell");
}

#[test]
fn the_json_document_names_each_fact_once() {
    let dir = TempDir::new("status-fields");
    let db = dir.file("site.db");
    rusqlite::Connection::open(&db)
        .and_then(|c| c.execute_batch("CREATE TABLE t (x INTEGER)"))
        .expect("a SQLite database");
    let status = status_json(&db);
    let keys: BTreeSet<&str> = status
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    // The waiters are `queue` (with pid, command, wait) and the writers outside the queue
    // `outside` (with pid and command): no second field repeats their pids.
    let expected: BTreeSet<&str> = [
        "database",
        "lock_file",
        "queue_file",
        "holder",
        "waiting",
        "queue",
        "blocked",
        "outside",
        "filesystem",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, expected, "{status}");
}
