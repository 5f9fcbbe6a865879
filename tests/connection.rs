//! The queue and the connection it drives: the connection's database must be
//! the queue's (by device and inode, checked at each turn's start), a queue
//! can be made from the connection, relative paths are fixed when the queue
//! is made, and the caller's busy timeout comes back when the turn ends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;
use writerlock::{Error, RawSqlite, SqliteSession, Wait, WriterQueue};

fn database() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ledger.db");
    let conn = Connection::open(&path).expect("open");
    conn.execute_batch("CREATE TABLE t (x INTEGER)")
        .expect("schema");
    (dir, path)
}

fn wait() -> Wait {
    Wait::transaction(Duration::from_secs(2))
}

fn busy_ms(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA busy_timeout", [], |r| r.get(0))
        .expect("busy_timeout")
}

fn lock_file(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".writer-lock");
    PathBuf::from(name)
}

#[test]
fn a_queue_for_another_file_is_refused_naming_both_paths() {
    let (dir, path) = database();
    let typo = dir.path().join("typo.db");
    let queue = WriterQueue::new(&typo);
    let conn = Connection::open(&path).expect("open");
    let err = queue.begin(&conn, &wait()).expect_err("wrong database");
    assert!(
        matches!(&err, Error::WrongDatabase { queue_database, connection_database }
            if queue_database == &typo && connection_database == &path),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&*typo.to_string_lossy()) && text.contains(&*path.to_string_lossy()),
        "{text}"
    );
    assert!(!queue.holding());
    // Nothing was started and no stray lock file was made next to the typo.
    assert!(!lock_file(&typo).exists());
    assert!(!typo.exists());
    let err = queue
        .execute(
            &conn,
            "INSERT INTO t VALUES (1)",
            &Wait::statement(Duration::from_secs(1)),
        )
        .expect_err("wrong database");
    assert!(matches!(err, Error::WrongDatabase { .. }), "{err:?}");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("count");
    assert_eq!(n, 0);
    // A C caller's sqlite3* is checked the same way.
    let raw = unsafe { RawSqlite::from_handle(conn.handle()) }.expect("handle");
    assert!(matches!(
        queue.begin(&raw, &wait()),
        Err(Error::WrongDatabase { .. })
    ));
}

#[test]
fn in_memory_queues_and_file_connections_do_not_mix() {
    let (_dir, path) = database();
    let memory = Connection::open_in_memory().expect("memory");
    let file_queue = WriterQueue::new(&path);
    let err = file_queue
        .begin(&memory, &wait())
        .expect_err("memory connection");
    assert!(
        err.to_string()
            .contains("the connection's database is an in-memory or temporary database"),
        "{err}"
    );
    let memory_queue = WriterQueue::new(":memory:");
    let file = Connection::open(&path).expect("open");
    assert!(matches!(
        memory_queue.begin(&file, &wait()),
        Err(Error::WrongDatabase { .. })
    ));
    memory_queue.begin(&memory, &wait()).expect("memory begin");
    memory_queue.commit(&memory).expect("memory commit");
}

#[test]
fn the_same_file_under_another_name_is_accepted() {
    let (dir, path) = database();
    let link = dir.path().join("link.db");
    std::fs::hard_link(&path, &link).expect("hard link");
    let conn = Connection::open(&link).expect("open");
    let queue = WriterQueue::new(&path);
    queue.begin(&conn, &wait()).expect("same inode");
    conn.execute("INSERT INTO t VALUES (1)", [])
        .expect("insert");
    queue.commit(&conn).expect("commit");
    // A second turn on the same connection uses the cached answer.
    queue.begin(&conn, &wait()).expect("again");
    queue.rollback(&conn).expect("rollback");
}

#[test]
fn a_queue_made_from_the_connection_serves_its_file() {
    let (_dir, path) = database();
    let conn = Connection::open(&path).expect("open");
    let queue = WriterQueue::for_connection(&conn).expect("for_connection");
    assert_eq!(
        queue.database().canonicalize().expect("canonical"),
        path.canonicalize().expect("canonical")
    );
    queue.begin(&conn, &wait()).expect("begin");
    queue.commit(&conn).expect("commit");
    assert!(lock_file(&path).exists());
    let raw = unsafe { RawSqlite::from_handle(conn.handle()) }.expect("handle");
    assert_eq!(
        WriterQueue::for_connection(&raw)
            .expect("raw")
            .database()
            .canonicalize()
            .expect("canonical"),
        path.canonicalize().expect("canonical")
    );
    let memory = Connection::open_in_memory().expect("memory");
    let queue = WriterQueue::for_connection(&memory).expect("memory");
    assert_eq!(queue.database(), Path::new(":memory:"));
}

/// The only test that changes the working directory (the others use absolute
/// paths only).
#[test]
fn a_relative_path_is_resolved_when_the_queue_is_made() {
    let (dir, path) = database();
    let before = std::env::current_dir().expect("cwd");
    std::env::set_current_dir(dir.path()).expect("chdir");
    let queue = WriterQueue::new("ledger.db");
    let other = tempfile::tempdir().expect("tempdir");
    std::env::set_current_dir(other.path()).expect("chdir");
    let database = queue.database().to_path_buf();
    let conn = Connection::open(&path).expect("open");
    let result = queue.begin(&conn, &wait());
    std::env::set_current_dir(before).expect("chdir back");
    assert_eq!(database, dir.path().join("ledger.db"));
    result.expect("begin after chdir");
    queue.commit(&conn).expect("commit");
    assert!(lock_file(&path).exists());
    assert!(!lock_file(&other.path().join("ledger.db")).exists());
}

#[test]
fn the_callers_busy_timeout_comes_back_when_the_turn_ends() {
    let (dir, path) = database();
    let conn = Connection::open(&path).expect("open");
    conn.busy_timeout(Duration::from_millis(7000))
        .expect("timeout");
    let queue = WriterQueue::new(&path);
    queue
        .begin(&conn, &Wait::transaction(Duration::from_secs(25)))
        .expect("begin");
    assert!(busy_ms(&conn) > 20_000, "the turn's own timeout is set");
    queue.commit(&conn).expect("commit");
    assert_eq!(busy_ms(&conn), 7000, "after commit");
    queue.begin(&conn, &wait()).expect("begin");
    queue.rollback(&conn).expect("rollback");
    assert_eq!(busy_ms(&conn), 7000, "after rollback");
    queue
        .execute(
            &conn,
            "INSERT INTO t VALUES (1)",
            &Wait::statement(Duration::from_secs(5)),
        )
        .expect("queued statement");
    assert_eq!(busy_ms(&conn), 7000, "after a queued statement");
    // A queued statement that fails in SQLite restores it too.
    assert!(queue
        .execute(
            &conn,
            "INSERT INTO missing VALUES (1)",
            &Wait::statement(Duration::from_secs(5)),
        )
        .is_err());
    assert_eq!(busy_ms(&conn), 7000, "after a failed statement");
    // A BEGIN that fails: a file that is not a database.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).expect("junk");
    let jc = Connection::open(&junk).expect("open junk");
    jc.busy_timeout(Duration::from_millis(3000))
        .expect("timeout");
    let jq = WriterQueue::new(&junk);
    assert!(matches!(
        jq.begin(&jc, &wait()),
        Err(Error::NotStarted { .. })
    ));
    let raw = unsafe { RawSqlite::from_handle(jc.handle()) }.expect("handle");
    assert_eq!(
        raw.busy_timeout().ok().flatten(),
        Some(Duration::from_millis(3000)),
        "after a failed BEGIN"
    );
    // The same through a C caller's sqlite3*.
    let raw = unsafe { RawSqlite::from_handle(conn.handle()) }.expect("handle");
    conn.busy_timeout(Duration::from_millis(1234))
        .expect("timeout");
    queue.begin(&raw, &wait()).expect("begin raw");
    queue.commit(&raw).expect("commit raw");
    assert_eq!(busy_ms(&conn), 1234, "after a raw commit");
}

/// A transaction the caller ended itself (its own `COMMIT`) gives the turn
/// back through `release_ended`, which runs no statement, frees the lock
/// for the next writer and puts back the caller's busy timeout; with no
/// turn held it says so and changes nothing.
#[test]
fn a_transaction_the_caller_ended_gives_the_turn_back_through_release_ended() {
    let (_dir, path) = database();
    let conn = Connection::open(&path).expect("open");
    conn.busy_timeout(Duration::from_millis(7000))
        .expect("timeout");
    let queue = WriterQueue::new(&path);
    assert!(!queue.release_ended(&conn).expect("nothing held"));
    assert_eq!(busy_ms(&conn), 7000);
    queue.begin(&conn, &wait()).expect("begin");
    conn.execute_batch("INSERT INTO t VALUES (1); COMMIT")
        .expect("the caller's own commit");
    assert!(queue.holding(), "the turn outlived the caller's COMMIT");
    assert!(queue.release_ended(&conn).expect("release_ended"));
    assert!(!queue.holding());
    assert_eq!(busy_ms(&conn), 7000, "after release_ended");
    assert!(!queue.release_ended(&conn).expect("a second release_ended"));
    // Another handle (another writer) gets the free lock at once.
    let other = WriterQueue::new(&path);
    other
        .take(
            writerlock::BusyKind::Statement,
            &Wait::statement(Duration::from_millis(50)),
        )
        .expect("the lock after release_ended");
    other.release().expect("release");
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("count");
    assert_eq!(rows, 1);
}

/// A writer outside the queue: a thread whose own connection holds a plain
/// `BEGIN IMMEDIATE` (with a row written) for `hold`, then commits.
/// Returns once its transaction has begun.
fn outside_writer(path: &Path, hold: Duration) -> std::thread::JoinHandle<()> {
    let (began, began_rx) = std::sync::mpsc::channel();
    let path = path.to_path_buf();
    let outside = std::thread::spawn(move || {
        let outside = Connection::open(&path).expect("open");
        outside
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1)")
            .expect("the outside writer");
        began.send(()).expect("send");
        std::thread::sleep(hold);
        outside.execute_batch("COMMIT").expect("the outside commit");
    });
    began_rx.recv().expect("the outside writer began");
    outside
}

/// A queued statement that meets a writer outside the queue (a plain
/// `BEGIN IMMEDIATE` elsewhere) waits it out, in SQLite's busy wait sliced
/// by the interrupt check, and runs once that writer commits; one that
/// fails for another reason (a missing table) fails at once, not after its
/// limit.
#[test]
fn a_queued_statement_waits_out_an_outside_writer_but_not_its_own_error() {
    let (_dir, path) = database();
    let conn = Connection::open(&path).expect("open");
    let queue = WriterQueue::new(&path);
    let wait = Wait::statement(Duration::from_secs(5))
        .with_interrupt(writerlock::wait::Interrupt::new(|| false));
    let outside = outside_writer(&path, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let ran = queue.execute(&conn, "INSERT INTO t VALUES (2)", &wait);
    outside.join().expect("the outside writer");
    assert!(ran.is_ok(), "{ran:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .expect("count");
    assert_eq!(rows, 2);

    let started = std::time::Instant::now();
    let err = queue
        .execute(&conn, "INSERT INTO missing VALUES (1)", &wait)
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, Error::Sqlite { .. }), "{err:?}");
    assert!(
        took < Duration::from_secs(2),
        "the failure came after {took:?}"
    );
    assert!(!queue.holding());
}

/// A transaction with an interrupt check that waits for a writer outside
/// the queue (a plain `BEGIN IMMEDIATE` elsewhere, SQLite's busy wait in
/// slices) ends busy at its limit, as one without a check does; it does not
/// go on waiting past it.
#[test]
fn a_sliced_busy_wait_for_an_outside_writer_ends_at_its_limit() {
    let (_dir, path) = database();
    let conn = Connection::open(&path).expect("open");
    let queue = WriterQueue::new(&path);
    let outside = outside_writer(&path, Duration::from_millis(2500));
    let wait = Wait::transaction(Duration::from_secs(1))
        .with_interrupt(writerlock::wait::Interrupt::new(|| false));
    let started = std::time::Instant::now();
    let outcome = queue.begin(&conn, &wait);
    let took = started.elapsed();
    outside.join().expect("the outside writer");
    assert!(
        matches!(outcome, Err(Error::Busy(_))),
        "after {took:?}: {outcome:?}"
    );
    assert!(took < Duration::from_millis(2400), "busy after {took:?}");
    assert!(!queue.holding());
}

/// A queue for another database file that exists, on the same file system
/// (same device, another inode), is refused too: the check compares files,
/// not only names.
#[test]
fn a_queue_for_another_existing_file_on_the_same_disk_is_refused() {
    let (dir, path) = database();
    let other = dir.path().join("other.db");
    Connection::open(&other)
        .and_then(|c| c.execute_batch("CREATE TABLE u (y INTEGER)"))
        .expect("another database");
    let queue = WriterQueue::new(&other);
    let conn = Connection::open(&path).expect("open");
    let err = queue.begin(&conn, &wait()).expect_err("wrong database");
    assert!(
        matches!(&err, Error::WrongDatabase { queue_database, connection_database }
            if queue_database == &other && connection_database == &path),
        "{err:?}"
    );
    assert!(!queue.holding());
}

/// A restore or deploy renames another database over the connection's file.
fn replace_by_rename(path: &Path, journal: &str) {
    let restored = path.with_extension("restored");
    let other = Connection::open(&restored).expect("open the restored copy");
    other
        .execute_batch(&format!(
            "PRAGMA journal_mode={journal}; CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (100)"
        ))
        .expect("restored schema");
    drop(other);
    std::fs::rename(&restored, path).expect("rename over the database");
}

#[test]
fn a_database_replaced_by_rename_is_refused_and_nothing_is_written() {
    for journal in ["WAL", "DELETE"] {
        let (_dir, path) = database();
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch(&format!("PRAGMA journal_mode={journal}"))
            .expect("journal mode");
        let queue = WriterQueue::for_connection(&conn).expect("queue");
        queue.begin(&conn, &wait()).expect("first turn");
        conn.execute("INSERT INTO t VALUES (1)", [])
            .expect("insert");
        queue.commit(&conn).expect("commit");
        // Checkpointed first: a WAL left beside the database would be read into the
        // restored file by its next reader (the operator's side of a restore), whatever
        // the queue does.
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .expect("checkpoint");

        replace_by_rename(&path, journal);
        let err = queue
            .begin(&conn, &wait())
            .expect_err("a replaced database");
        assert!(
            matches!(&err, Error::DatabaseReplaced { path: p } if p == &path),
            "{journal}: {err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&*path.to_string_lossy()) && text.contains("open the database again"),
            "{journal}: {text}"
        );
        assert!(!queue.holding(), "{journal}: the turn was kept");
        let err = queue
            .execute(&conn, "INSERT INTO t VALUES (2)", &wait())
            .expect_err("a queued statement on the replaced database");
        assert!(
            matches!(err, Error::DatabaseReplaced { .. }),
            "{journal}: {err:?}"
        );

        // Nothing reached either file: the restored one has only its own row.
        let fresh = Connection::open(&path).expect("reopen");
        let rows: Vec<i64> = fresh
            .prepare("SELECT x FROM t ORDER BY x")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("rows");
        assert_eq!(rows, vec![100], "{journal}: the restored database changed");
        // A connection opened again works.
        let queue = WriterQueue::for_connection(&fresh).expect("queue");
        queue
            .begin(&fresh, &wait())
            .expect("turn on the reopened connection");
        queue.rollback(&fresh).expect("rollback");
    }
}
