//! What the Postgres writer session promises, checked from the server's side:
//!
//! - only a wait the server cancelled through `lock_timeout` (SQLSTATE `55P03`) is asked
//!   again; any other error during the lock wait (a cancel from another session, the
//!   statement limit) surfaces at once with its own SQLSTATE, after one wait;
//! - a `Write` dropped without a commit (end of scope, early return, panic) rolls back: its
//!   rows are not on the server and the writer lock is free at once;
//! - the stored floor never goes down, whichever setup stores it.
//!
//! Each test watches the server through a plain session of its own (`pg_stat_activity`,
//! `pg_try_advisory_xact_lock`, `SELECT` from the tables), not through the API under test.
//! Needs `TEST_DATABASE_URL` like tests/pg_writer.rs (`make test` sets it).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use writerlock::pg::protocol::{Protocol, Reply, ServerError, Step, TxState};
use writerlock::pg::{setup_schema, Connection, Error, Settings};

mod pgdb;
use pgdb::TestDb;

/// The writer lock's key.
const WRITER_LOCK: i64 = 1_279_607_879;

/// Watches backend `pid` until `done` is set, and returns how many distinct waits for an
/// advisory lock it saw (each attempt is a message of its own, so a new `query_start`).
/// With `cancel`, the first wait seen is cancelled with `pg_cancel_backend`, and the
/// instant of that cancel is returned too.
fn watch_lock_waits(
    url: &str,
    pid: i32,
    cancel: bool,
    done: &AtomicBool,
) -> (usize, Option<Instant>) {
    let mut watcher = postgres::Client::connect(url, postgres::NoTls).expect("watcher connects");
    let mut waits = BTreeSet::new();
    let mut cancelled_at = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the writer still runs after 30 s"
        );
        let rows = watcher
            .query(
                "SELECT query_start::text FROM pg_stat_activity WHERE pid = $1 \
                 AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
                &[&pid],
            )
            .expect("pg_stat_activity");
        for row in rows {
            waits.insert(row.get::<_, String>(0));
        }
        if cancel && cancelled_at.is_none() && !waits.is_empty() {
            let sent: bool = watcher
                .query_one("SELECT pg_cancel_backend($1)", &[&pid])
                .expect("pg_cancel_backend")
                .get(0);
            assert!(sent, "pg_cancel_backend({pid}) found no backend");
            cancelled_at = Some(Instant::now());
        }
        thread::sleep(Duration::from_millis(5));
    }
    (waits.len(), cancelled_at)
}

/// Runs `begin_write` on `writer` while a watcher samples its lock waits (and cancels the
/// first with `cancel`); returns the outcome, when it came, the waits seen and the cancel.
fn begin_write_watched(
    db: &TestDb,
    writer: &mut Connection,
    cancel: bool,
) -> (Result<u32, Error>, Instant, usize, Option<Instant>) {
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (url, pid, done) = (db.url.clone(), writer.pid(), Arc::clone(&done));
        thread::spawn(move || watch_lock_waits(&url, pid, cancel, &done))
    };
    let result = writer.begin_write().map(|start| start.waits());
    let ended = Instant::now();
    done.store(true, Ordering::SeqCst);
    let (waits, cancelled_at) = watcher.join().expect("watcher thread");
    (result, ended, waits, cancelled_at)
}

/// A database whose writer lock is held by an open write (returned with it).
fn held_lock(tag: &str) -> (TestDb, Connection) {
    let db = TestDb::new(tag);
    let mut holder = db.connect(&Settings::new());
    setup_schema(&mut holder, None).expect("setup");
    holder
        .begin_write()
        .expect("the holder takes the writer lock");
    (db, holder)
}

fn try_writer_lock(plain: &mut postgres::Client) -> bool {
    let mut tx = plain.transaction().expect("begin");
    let free: bool = tx
        .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&WRITER_LOCK])
        .expect("pg_try_advisory_xact_lock")
        .get(0);
    tx.rollback().expect("rollback");
    free
}

fn backend_state(plain: &mut postgres::Client, pid: i32) -> String {
    plain
        .query_one(
            "SELECT coalesce(state, '') FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .expect("pg_stat_activity")
        .get(0)
}

/// Another session cancels the waiting writer (`pg_cancel_backend`, SQLSTATE `57014`): the
/// writer is not asked again. The cancel surfaces at once with its own code and message,
/// the server saw one wait, and the session is usable and out of its transaction.
#[test]
fn pg_a_cancelled_lock_wait_is_reported_not_retried() {
    let (db, mut holder) = held_lock("cancelwait");
    let mut settings = Settings::new();
    settings.lock_wait(Duration::from_secs(3));
    let mut writer = db.connect(&settings);

    let (result, ended, waits, cancelled_at) = begin_write_watched(&db, &mut writer, true);
    let cancelled_at = cancelled_at.expect("the watcher saw the writer wait and cancelled it");
    assert_eq!(
        waits, 1,
        "the server saw {waits} waits for the writer lock: {result:?}"
    );
    let err = result.expect_err("the writer lock is held: the wait cannot succeed");
    assert!(matches!(err, Error::Database { .. }), "{err:?}");
    assert_eq!(err.code().map(|c| c.code()), Some("57014"), "{err:?}");
    assert_eq!(err.to_string(), "canceling statement due to user request");
    // Asked again, the writer would wait another lock_timeout (3 s) before any answer.
    let after_cancel = ended.saturating_duration_since(cancelled_at);
    assert!(after_cancel < Duration::from_secs(3), "{after_cancel:?}");
    assert!(!writer.in_transaction());
    assert_eq!(backend_state(&mut db.plain(), writer.pid()), "idle");

    holder.rollback().expect("the holder ends");
    let start = writer
        .begin_write()
        .expect("the writer, once the lock is free");
    assert_eq!(start.waits(), 1);
    writer.rollback().expect("rollback");
}

/// A statement limit shorter than the lock wait cancels the wait (`57014`, statement
/// timeout): that is not a `lock_timeout`, so it is reported after one wait, never asked
/// again.
#[test]
fn pg_a_statement_timeout_during_the_lock_wait_is_reported_not_retried() {
    let (db, _holder) = held_lock("stmtwait");
    let mut settings = Settings::new();
    settings
        .lock_wait(Duration::from_secs(3))
        .statement_timeout(Duration::from_millis(800));
    let mut writer = db.connect(&settings);

    let started = Instant::now();
    let (result, ended, waits, _) = begin_write_watched(&db, &mut writer, false);
    let took = ended - started;
    assert_eq!(
        waits, 1,
        "the server saw {waits} waits for the writer lock: {result:?}"
    );
    let err = result.expect_err("the writer lock is held: the wait cannot succeed");
    assert!(matches!(err, Error::Database { .. }), "{err:?}");
    assert_eq!(err.code().map(|c| c.code()), Some("57014"), "{err:?}");
    assert_eq!(
        err.to_string(),
        "canceling statement due to statement timeout"
    );
    // One statement limit (0.8 s), well before the first lock_timeout (3 s).
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(!writer.in_transaction());
    assert_eq!(backend_state(&mut db.plain(), writer.pid()), "idle");
}

/// A database set up with a `rows` table and one ledger, and a session on it.
fn ledger_db(tag: &str) -> (TestDb, Connection) {
    let db = TestDb::new(tag);
    let mut conn = db.connect(&Settings::new());
    setup_schema(&mut conn, None).expect("setup");
    conn.execute_batch(
        "INSERT INTO ledgers (slug) VALUES ('main'); CREATE TABLE rows (tag text NOT NULL)",
    )
    .expect("tables");
    (db, conn)
}

/// Writes a tagged row and bumps the ledger inside `w`.
fn write_row(w: &mut writerlock::pg::Write<'_>, tag: &str) {
    w.execute("INSERT INTO rows (tag) VALUES (?)", &[tag.into()])
        .expect("insert");
    w.execute(
        "INSERT INTO row_changes (slug, generation, row_key) \
         SELECT slug, generation + 1, ? FROM ledgers WHERE slug = 'main'",
        &[tag.into()],
    )
    .expect("record the row");
    w.execute(
        "UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'",
        &[],
    )
    .expect("bump");
}

/// What the server holds: the tags written and the ledger's generation.
fn server_rows(plain: &mut postgres::Client) -> (Vec<String>, i64) {
    let tags = plain
        .query("SELECT tag FROM rows ORDER BY tag", &[])
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let generation = plain
        .query_one("SELECT generation FROM ledgers WHERE slug = 'main'", &[])
        .expect("generation")
        .get(0);
    (tags, generation)
}

/// After a write was dropped without a commit: the server sees the session out of its
/// transaction, the writer lock is free at once, another writer's write goes through without
/// waiting, and only the committed rows are there.
fn assert_dropped_write_rolled_back(db: &TestDb, conn: &mut Connection, how: &str) {
    let mut plain = db.plain();
    assert_eq!(
        backend_state(&mut plain, conn.pid()),
        "idle",
        "{how}: the server still sees the dropped write's transaction"
    );
    assert!(
        try_writer_lock(&mut plain),
        "{how}: the writer lock is still held after the write was dropped"
    );
    assert!(
        !conn.in_transaction(),
        "{how}: the session is still in a transaction"
    );
    let mut settings = Settings::new();
    settings.lock_wait(Duration::from_millis(500)).lock_tries(1);
    let mut other = db.connect(&settings);
    let mut w = other.write().expect("another writer, at once");
    assert_eq!(w.start().waits(), 1);
    write_row(&mut w, "other");
    w.commit().expect("commit");
    assert_eq!(
        server_rows(&mut plain),
        (vec!["other".to_string()], 1),
        "{how}: the server holds rows of the dropped write"
    );

    // The session writes on, and its commit carries nothing of the dropped write.
    let mut w = conn.write().expect("the same session writes again");
    write_row(&mut w, "next");
    w.commit().expect("commit");
    assert_eq!(
        server_rows(&mut plain),
        (vec!["next".to_string(), "other".to_string()], 2),
        "{how}"
    );
}

/// A `Write` that goes out of scope without a commit rolls back: its row and its generation
/// bump are not on the server, and the lock is free for the next writer at once.
#[test]
fn pg_a_write_dropped_at_the_end_of_its_scope_rolls_back() {
    let (db, mut conn) = ledger_db("dropscope");
    {
        let mut w = conn.write().expect("write");
        write_row(&mut w, "dropped");
    }
    assert_dropped_write_rolled_back(&db, &mut conn, "out of scope");
}

/// A `Write` dropped by an early return (`?` on a failed statement) rolls back.
#[test]
fn pg_a_write_dropped_by_an_early_return_rolls_back() {
    let (db, mut conn) = ledger_db("dropearly");
    fn write_then_fail(conn: &mut Connection) -> Result<(), Error> {
        let mut w = conn.write()?;
        write_row(&mut w, "dropped");
        w.execute("SELECT 1 / 0", &[])?;
        w.commit()
    }
    let err = write_then_fail(&mut conn).expect_err("division by zero");
    assert_eq!(err.code().map(|c| c.code()), Some("22012"), "{err:?}");
    assert_dropped_write_rolled_back(&db, &mut conn, "early return");
}

/// A `Write` dropped while a panic unwinds through it rolls back.
#[test]
fn pg_a_write_dropped_by_a_panic_rolls_back() {
    let (db, mut conn) = ledger_db("droppanic");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut w = conn.write().expect("write");
        write_row(&mut w, "dropped");
        panic!("the caller's code fails mid-write");
    }));
    assert!(panicked.is_err());
    assert_dropped_write_rolled_back(&db, &mut conn, "panic");
}

/// The floor as the server stores it, read with a plain `SELECT` (and there is one row).
fn floor_on_server(plain: &mut postgres::Client) -> i32 {
    let rows = plain
        .query("SELECT name, version FROM writer_floor", &[])
        .expect("SELECT from writer_floor");
    assert_eq!(rows.len(), 1, "writer_floor holds {} rows", rows.len());
    assert_eq!(rows[0].get::<_, String>(0), "ledger");
    rows[0].get(1)
}

fn versioned(version: u16, required: u16) -> Settings {
    let mut s = Settings::new();
    s.version(version).required(required);
    s
}

/// Runs the writer protocol's schema setup (what the hosts' own drivers run) on a plain
/// session.
fn protocol_setup(plain: &mut postgres::Client, settings: &Settings) {
    let mut protocol = Protocol::setup(settings, None, TxState::Idle);
    let mut step = protocol.start();
    while let Step::Run(statement) = step {
        let reply = match plain.batch_execute(statement.sql()) {
            Ok(()) => Reply::ok(),
            Err(e) => match e.as_db_error() {
                Some(db) => Reply::Failed(ServerError::new(db.code().code(), db.message())),
                None => Reply::Lost {
                    reason: e.to_string(),
                },
            },
        };
        step = protocol.feed(reply);
    }
    assert!(matches!(step, Step::Done), "{step:?}");
}

/// The stored floor never goes down: once raised to 5, a setup from code that requires
/// less (1, 0, 2), through the crate's setup and the writer protocol's, leaves 5 on the
/// server; a higher one raises it.
#[test]
fn pg_the_stored_floor_never_goes_down() {
    let db = TestDb::new("floordown");
    let mut plain = db.plain();
    let mut high = db.connect(&versioned(5, 5));
    setup_schema(&mut high, None).expect("setup requiring 5");
    assert_eq!(floor_on_server(&mut plain), 5);

    for (version, required) in [(1, 1), (3, 0), (2, 2)] {
        let mut low = db.connect(&versioned(version, required));
        setup_schema(&mut low, None).expect("setup requiring less");
        assert_eq!(
            floor_on_server(&mut plain),
            5,
            "lowered by setup_schema from code requiring {required}"
        );
    }
    for required in [0, 2] {
        protocol_setup(&mut plain, &versioned(required, required));
        assert_eq!(
            floor_on_server(&mut plain),
            5,
            "lowered by the writer protocol's setup requiring {required}"
        );
    }

    // Raising still works, by both.
    setup_schema(&mut db.connect(&versioned(6, 6)), None).expect("setup requiring 6");
    assert_eq!(floor_on_server(&mut plain), 6);
    protocol_setup(&mut plain, &versioned(7, 7));
    assert_eq!(floor_on_server(&mut plain), 7);
}

/// Whether the floor table exists on the server.
fn floor_table_exists(plain: &mut postgres::Client) -> bool {
    plain
        .query_one("SELECT to_regclass('writer_floor') IS NOT NULL", &[])
        .expect("to_regclass")
        .get(0)
}

/// A writer's first write on a fresh database sets up the schema itself: the floor table
/// exists afterwards, holding the writer's required version.
#[test]
fn pg_the_first_write_on_a_fresh_database_sets_up_the_schema() {
    let db = TestDb::new("fresh");
    let mut plain = db.plain();
    assert!(!floor_table_exists(&mut plain));
    let mut conn = db.connect(&versioned(3, 3));
    conn.write()
        .expect("the first write sets the schema up")
        .commit()
        .expect("commit");
    assert!(
        floor_table_exists(&mut plain),
        "no floor table after the first write"
    );
    assert_eq!(floor_on_server(&mut plain), 3);
}

/// Setting the schema up refuses a transaction that already ran a statement (it would roll
/// that work back), and runs within one the caller opened and left empty.
#[test]
fn pg_setup_refuses_a_transaction_with_work_in_it() {
    let db = TestDb::new("setup_tx");
    let mut conn = db.connect(&Settings::new());
    conn.begin().expect("begin");
    conn.execute("SELECT 1", &[]).expect("statement");
    let err = setup_schema(&mut conn, None).unwrap_err();
    assert!(matches!(err, Error::AlreadyInTransaction), "{err:?}");
    assert!(conn.in_transaction(), "the caller's transaction was ended");
    conn.rollback().expect("rollback");
    assert!(!floor_table_exists(&mut db.plain()));

    conn.begin().expect("begin");
    setup_schema(&mut conn, None).expect("setup in an empty transaction");
    assert!(floor_table_exists(&mut db.plain()));
    assert_eq!(floor_on_server(&mut db.plain()), 1);
}

/// The writer lock must be a transaction's first statement: asking for it after other work
/// in the same transaction is refused, whether that work was the caller's statement or an
/// earlier write start (the lock and the floor read), and the caller's transaction stays.
#[test]
fn pg_the_writer_lock_is_refused_after_work_in_the_transaction() {
    let (_db, mut conn) = ledger_db("lock_first");
    conn.begin().expect("begin");
    conn.execute("SELECT 1", &[]).expect("statement");
    let err = conn.lock_writer().unwrap_err();
    assert!(matches!(err, Error::AlreadyInTransaction), "{err:?}");
    assert!(conn.in_transaction());
    conn.rollback().expect("rollback");

    conn.begin_write().expect("a write starts");
    let err = conn.begin_write().unwrap_err();
    assert!(matches!(err, Error::AlreadyInTransaction), "{err:?}");
    assert!(conn.in_transaction());
    conn.rollback().expect("rollback");

    // A later write of the session runs nothing but the lock and the floor
    // read (the scan for refused writers ran at the first): those alone are
    // work that refuses a second start.
    conn.begin_write().expect("a later write starts");
    let err = conn.begin_write().unwrap_err();
    assert!(matches!(err, Error::AlreadyInTransaction), "{err:?}");
    let err = conn.lock_writer().unwrap_err();
    assert!(matches!(err, Error::AlreadyInTransaction), "{err:?}");
    assert!(conn.in_transaction());
    conn.rollback().expect("rollback");
}

/// A script run inside a write is written with it; once the write's transaction ended
/// behind its back (a `COMMIT` sent through [`writerlock::pg::Write::connection`], then
/// another transaction opened there), the write runs nothing more, outside its lock.
#[test]
fn pg_a_write_runs_its_script_and_nothing_after_its_transaction_ended() {
    let (db, mut conn) = ledger_db("write_ended");
    let mut plain = db.plain();
    let mut w = conn.write().expect("write");
    w.execute_batch("INSERT INTO rows (tag) VALUES ('script')")
        .expect("script");
    w.connection()
        .execute_batch("COMMIT")
        .expect("commit behind the write's back");
    assert_eq!(server_rows(&mut plain).0, vec!["script".to_string()]);
    let ended = w
        .execute("INSERT INTO rows (tag) VALUES ('late')", &[])
        .unwrap_err();
    assert!(matches!(ended, Error::WriteEnded), "{ended:?}");
    w.connection().begin().expect("another transaction");
    let ended = w
        .execute_batch("INSERT INTO rows (tag) VALUES ('later')")
        .unwrap_err();
    assert!(matches!(ended, Error::WriteEnded), "{ended:?}");
    w.connection().rollback().expect("rollback");
    drop(w);
    assert_eq!(server_rows(&mut plain).0, vec!["script".to_string()]);
}
