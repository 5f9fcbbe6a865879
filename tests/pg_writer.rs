//! The Postgres writer session against a real server.
//!
//! Every test creates its own database from the admin address in `TEST_DATABASE_URL` (the
//! floor can never be lowered, so tests cannot share one). Without that variable the tests
//! fail: start a throwaway server with `tests/pg-cluster.sh start` and export the
//! `TEST_DATABASE_URL` it prints, or run `make test`.

use std::thread;
use std::time::{Duration, Instant};

use writerlock::pg::{
    admin, refused_writers, setup_schema, stored_floor, Connection, Error, Pool, SettingStatus,
    Settings, Value,
};

mod pgdb;
use pgdb::TestDb;

fn generation(plain: &mut postgres::Client, slug: &str) -> i64 {
    plain
        .query_one("SELECT generation FROM ledgers WHERE slug = $1", &[&slug])
        .expect("read generation")
        .get(0)
}

fn backend_alive(plain: &mut postgres::Client, pid: i32) -> bool {
    let n: i64 = plain
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .expect("pg_stat_activity")
        .get(0);
    n > 0
}

fn short(lock_wait_ms: u64) -> Settings {
    let mut s = Settings::new();
    s.lock_wait(Duration::from_millis(lock_wait_ms));
    s
}

/// Scenario 1, at the real defaults: an idle holder is ended by the server after 15 s and
/// the waiting writer commits within 30 s.
#[test]
fn pg_idle_holder_is_ended_and_the_next_writer_commits() {
    let db = TestDb::new("idle");
    let settings = Settings::new();
    let mut holder = db.connect(&settings);
    setup_schema(&mut holder, None).expect("setup");
    holder
        .execute("INSERT INTO ledgers (slug) VALUES (?)", &["main".into()])
        .expect("insert ledger");

    holder.begin_write().expect("holder takes the lock");
    let idle_since = Instant::now();
    let holder_pid = holder.pid();

    let url = db.url.clone();
    let writer = thread::spawn(move || -> Result<(Duration, u32), Error> {
        let mut conn = Connection::connect(&url, &Settings::new())?;
        let mut write = conn.write()?;
        let waits = write.start().waits();
        write.execute(
            "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?",
            &["main".into()],
        )?;
        write.commit()?;
        Ok((idle_since.elapsed(), waits))
    });

    // While the writer queues, the holder query shows the idle holder and the waiter.
    thread::sleep(Duration::from_secs(2));
    let mut watcher = db.connect(&settings);
    let holders = admin::holders(&mut watcher).expect("holders");
    assert!(
        holders
            .iter()
            .any(|h| h.pid == holder_pid && h.granted && h.is_idle_holder()),
        "{holders:?}"
    );
    assert!(holders.iter().any(|h| !h.granted), "{holders:?}");

    let (elapsed, waits) = writer
        .join()
        .expect("writer thread")
        .expect("second writer commits");
    println!(
        "second writer committed after {:.2}s (wait {waits} of 3); idle holder ended by the server",
        elapsed.as_secs_f64()
    );
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
    assert!(elapsed >= Duration::from_secs(14), "{elapsed:?}");

    let mut plain = db.plain();
    let deadline = Instant::now() + Duration::from_secs(3);
    while backend_alive(&mut plain, holder_pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !backend_alive(&mut plain, holder_pid),
        "holder backend still there"
    );
    assert_eq!(generation(&mut plain, "main"), 1);

    let err = holder.execute("SELECT 1", &[]).unwrap_err();
    assert!(err.is_connection_lost(), "{err:?}");
    assert_eq!(err.code().map(|c| c.code()), Some("25P03"), "{err:?}");
    assert!(
        err.to_string()
            .contains("terminating connection due to idle-in-transaction timeout"),
        "{err}"
    );
    assert!(holder.is_closed());
}

/// Scenario 2: a busy holder makes a writer fail after three waits with the exact message.
#[test]
fn pg_busy_holder_makes_the_writer_give_up_after_three_waits() {
    let db = TestDb::new("busy");
    let settings = short(1000);
    let mut holder = db.connect(&settings);
    setup_schema(&mut holder, None).expect("setup");
    holder.begin_write().expect("holder takes the lock");
    let busy = thread::spawn(move || {
        let r = holder.execute("SELECT pg_sleep(8)", &[]);
        (holder, r)
    });
    thread::sleep(Duration::from_millis(200));

    let mut writer = db.connect(&settings);
    let started = Instant::now();
    let err = writer.begin_write().unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(err, Error::LockNotGranted { tries: 3, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the ledger writer lock was not granted in 3 waits of 1 seconds"
    );
    assert_eq!(err.code().map(|c| c.code()), Some("55P03"));
    assert!(!writer.in_transaction());
    assert!(
        elapsed >= Duration::from_millis(2900) && elapsed < Duration::from_secs(7),
        "{elapsed:?}"
    );
    println!("writer gave up after {:.1}s", elapsed.as_secs_f64());

    let (mut holder, r) = busy.join().expect("holder thread");
    r.expect("holder's statement");
    holder.commit().expect("holder commits");
    // The lock is free again.
    writer.begin_write().expect("writer after the holder");
    writer.rollback().expect("rollback");
}

/// Scenario 3: a statement past the statement limit is cancelled (57014), its transaction
/// rolls back, and the pool hands out a working connection.
#[test]
fn pg_statement_timeout_cancels_and_the_pool_recovers() {
    let db = TestDb::new("stmt");
    let mut settings = Settings::new();
    settings.statement_timeout(Duration::from_millis(500));
    let pool = Pool::new(&db.url, settings, 2).expect("pool");
    let mut conn = pool.take().expect("take");
    setup_schema(&mut conn, None).expect("setup");
    conn.execute("INSERT INTO ledgers (slug) VALUES ('main')", &[])
        .expect("insert");

    conn.begin_write().expect("write");
    conn.execute(
        "UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'",
        &[],
    )
    .expect("update");
    let err = conn.execute("SELECT pg_sleep(2)", &[]).unwrap_err();
    assert!(matches!(err, Error::Database { .. }), "{err:?}");
    assert_eq!(err.code().map(|c| c.code()), Some("57014"));
    assert!(err.to_string().contains("statement timeout"), "{err}");
    let commit = conn.commit().unwrap_err();
    assert!(matches!(commit, Error::RolledBack), "{commit:?}");
    pool.give(conn).expect("give back");

    let mut conn = pool.take().expect("take again");
    let rows = conn
        .execute("SELECT 1 + 1", &[])
        .expect("working connection");
    assert_eq!(rows.first().and_then(|r| r.get(0)), Some(&Value::Int(2)));
    assert_eq!(generation(&mut db.plain(), "main"), 0);
    pool.give(conn).expect("give back");
    assert_eq!(pool.idle_count(), 1);
}

/// Scenario 4: the session carries the settings, and a dropped setting is named.
#[test]
fn pg_session_shows_the_settings() {
    let db = TestDb::new("show");
    let mut conn = db.connect(&Settings::new());
    let show = |c: &mut Connection, name: &str| c.show(name).expect("show").unwrap_or_default();
    assert_eq!(show(&mut conn, "lock_timeout"), "10s");
    assert_eq!(
        show(&mut conn, "idle_in_transaction_session_timeout"),
        "15s"
    );
    assert_eq!(show(&mut conn, "statement_timeout"), "1min");
    assert_eq!(show(&mut conn, "agentihooks.ledger_writer_version"), "1");
    let rows = conn.execute("SHOW statement_timeout", &[]).expect("SHOW");
    assert_eq!(
        rows.first().and_then(|r| r.get(0)),
        Some(&Value::Text("1min".into()))
    );
    for check in conn.check_settings().expect("check") {
        assert_eq!(check.status, SettingStatus::InEffect, "{check:?}");
    }

    let mut settings = Settings::new();
    settings.version(3).required(2);
    let mut v3 = db.connect(&settings);
    assert_eq!(show(&mut v3, "agentihooks.ledger_writer_version"), "3");

    // A session whose setting is not what was sent (as behind a pooler that drops startup
    // options) fails the check, naming the setting.
    let mut dropped = Connection::connect_unverified(&db.url, &Settings::new()).expect("connect");
    dropped
        .execute_batch("SET lock_timeout = 0")
        .expect("override");
    let err = dropped.verify_settings().unwrap_err();
    match &err {
        Error::SettingNotInEffect {
            setting,
            expected,
            actual,
        } => {
            assert_eq!(setting, "lock_timeout");
            assert_eq!(expected, "10s");
            assert_eq!(actual, "0");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("lock_timeout"), "{err}");
}

/// Scenario 5: a current writer stores floor 1 and writes; above its version it is refused,
/// the generation does not move, and the next allowed write offers exactly one open alert
/// naming the refused writer's address.
#[test]
fn pg_floor_refuses_an_old_writer_and_the_next_write_alerts() {
    let db = TestDb::new("floor");
    let mut old = db.connect(&Settings::new());
    setup_schema(&mut old, None).expect("setup");
    assert_eq!(stored_floor(&mut old).expect("floor"), Some(1));
    old.execute("INSERT INTO ledgers (slug) VALUES ('main')", &[])
        .expect("insert");

    let mut w = old.write().expect("write");
    w.execute(
        "INSERT INTO row_changes (slug, generation, row_key) VALUES ('main', 1, 'a')",
        &[],
    )
    .expect("record row");
    w.execute(
        "UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'",
        &[],
    )
    .expect("bump");
    assert!(w.alerts(&[]).is_empty());
    w.commit().expect("commit");

    let mut plain = db.plain();
    plain
        .execute(
            "UPDATE writer_floor SET version = 2 WHERE name = 'ledger'",
            &[],
        )
        .expect("raise the floor by hand");

    let err = old.begin_write().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                version: 1,
                floor: 2
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "ledger writer version 1 is below version 2, the oldest the shared database allows; \
         update its code and restart it"
    );
    assert_eq!(err.code().map(|c| c.code()), Some("LW001"));
    assert!(!old.in_transaction());
    assert_eq!(generation(&mut plain, "main"), 1);

    let mut settings = Settings::new();
    settings.version(2).required(2);
    let mut current = db.connect(&settings);
    let mut w = current.write().expect("allowed write");
    let refused = w.refused().to_vec();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].pid, old.pid());
    assert_eq!(refused[0].writer, "127.0.0.1");
    let alerts = w.alerts(&[]);
    assert_eq!(
        alerts,
        vec![
            "The ledger writer at 127.0.0.1 was refused: ledger writer version 1 is below \
             version 2, the oldest the shared database allows; update its code and restart it"
                .to_string()
        ]
    );
    w.execute(
        "INSERT INTO row_changes (slug, generation, row_key) VALUES ('main', 2, 'b')",
        &[],
    )
    .expect("record row");
    w.execute(
        "UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'",
        &[],
    )
    .expect("bump");
    w.commit().expect("commit");
    assert_eq!(generation(&mut plain, "main"), 2);

    // Once the refused writer disconnects, nobody is named any more.
    drop(old);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let now = refused_writers(&mut current).expect("refused");
        if now.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{now:?}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Scenario 6: a plain connection with no writer version that bumps a generation without
/// changed rows is refused by the trigger; it passes once it records its rows.
#[test]
fn pg_trigger_refuses_an_unrecorded_bump_from_old_code() {
    let db = TestDb::new("trigger");
    let mut conn = db.connect(&Settings::new());
    setup_schema(&mut conn, None).expect("setup");
    conn.execute("INSERT INTO ledgers (slug) VALUES ('main')", &[])
        .expect("insert");

    let mut plain = db.plain();
    let err = plain
        .execute(
            "UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'",
            &[],
        )
        .unwrap_err();
    let db_err = err.as_db_error().expect("a database error");
    assert_eq!(db_err.code().code(), "LW001");
    assert_eq!(
        db_err.message(),
        "ledger writer version 0 is below version 1, the oldest the shared database allows; \
         update its code and restart it"
    );
    assert_eq!(generation(&mut plain, "main"), 0);

    let refused = refused_writers(&mut conn).expect("refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!((refused[0].version, refused[0].floor), (0, 1));
    assert_eq!(
        admin::unrecorded_bumps(&mut conn).expect("bumps").len(),
        1,
        "a ledger nobody wrote shows once"
    );

    plain
        .batch_execute(
            "BEGIN; \
             INSERT INTO row_changes (slug, generation, row_key) VALUES ('main', 1, 'x'); \
             UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'; \
             COMMIT",
        )
        .expect("an old writer that records its rows passes");
    assert_eq!(generation(&mut plain, "main"), 1);
    assert!(admin::unrecorded_bumps(&mut conn)
        .expect("bumps")
        .is_empty());

    // Through this crate the trigger's refusal becomes Error::Refused.
    plain
        .execute(
            "UPDATE writer_floor SET version = 2 WHERE name = 'ledger'",
            &[],
        )
        .expect("raise the floor");
    let err = conn
        .execute(
            "UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'",
            &[],
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                version: 1,
                floor: 2
            }
        ),
        "{err:?}"
    );
}

/// Scenario 7: setup from code with a lower required version never lowers the floor.
#[test]
fn pg_setup_never_lowers_the_floor() {
    let db = TestDb::new("lower");
    let mut settings = Settings::new();
    settings.version(3).required(3);
    let mut newer = db.connect(&settings);
    setup_schema(&mut newer, None).expect("setup v3");
    assert_eq!(stored_floor(&mut newer).expect("floor"), Some(3));

    let mut older = db.connect(&Settings::new());
    setup_schema(&mut older, None).expect("setup v1");
    assert_eq!(stored_floor(&mut older).expect("floor"), Some(3));
    let mut zero = Settings::new();
    zero.required(0);
    let mut zero = db.connect(&zero);
    setup_schema(
        &mut zero,
        Some("CREATE TABLE IF NOT EXISTS host_extra (id int)"),
    )
    .expect("setup r0 with host DDL");
    assert_eq!(stored_floor(&mut zero).expect("floor"), Some(3));
    zero.execute("SELECT count(*) FROM host_extra", &[])
        .expect("host DDL ran");

    let mut bad = Settings::new();
    bad.required(2);
    let err = Connection::connect(&db.url, &bad).unwrap_err();
    assert!(matches!(err, Error::RequiredAboveVersion { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("that code would refuse its own writes"),
        "{err}"
    );
}

/// Scenario 9: the server ends a session mid-transaction; the error is clear and the pool
/// hands out a fresh connection.
#[test]
fn pg_session_ended_by_the_server_is_replaced() {
    let db = TestDb::new("ended");
    let pool = Pool::new(&db.url, Settings::new(), 2).expect("pool");
    let mut conn = pool.take().expect("take");
    setup_schema(&mut conn, None).expect("setup");
    conn.begin_write().expect("write");
    conn.execute("SELECT 1", &[]).expect("statement");
    let old_pid = conn.pid();

    let mut plain = db.plain();
    plain
        .execute("SELECT pg_terminate_backend($1)", &[&old_pid])
        .expect("terminate");
    let deadline = Instant::now() + Duration::from_secs(3);
    while backend_alive(&mut plain, old_pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }

    let err = conn.execute("SELECT 1", &[]).unwrap_err();
    assert!(err.is_connection_lost(), "{err:?}");
    let text = err.to_string();
    assert_eq!(err.code().map(|c| c.code()), Some("57P01"), "{err:?}");
    assert!(
        text.contains("terminating connection due to administrator command"),
        "{text}"
    );
    println!("after pg_terminate_backend: {text}");
    pool.give(conn).expect("give back");
    assert_eq!(pool.idle_count(), 0);

    let mut fresh = pool.take().expect("fresh connection");
    assert_ne!(fresh.pid(), old_pid);
    fresh.execute("SELECT 1", &[]).expect("works");
}

/// Scenario 10: a bad address or an unreachable server gives a clear error without the
/// password.
#[test]
fn pg_bad_url_and_unreachable_server_hide_the_password() {
    let err = Connection::connect(
        "postgresql://ledger:hunter2@127.0.0.1:1/ledger",
        &Settings::new(),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!format!("{err:?}").contains("hunter2"));
    assert!(
        text.contains("postgresql://ledger@127.0.0.1:1/ledger"),
        "{text}"
    );
    assert!(text.contains("check that the server is running"), "{text}");

    for url in [
        "postgresql://ledger:hunter2@127.0.0.1:notaport/ledger",
        "not a url at all password=hunter2",
        "",
    ] {
        let err = Connection::connect(url, &Settings::new()).unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{url}: {err:?}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(!format!("{err:?}").contains("hunter2"));
    }
    assert!(matches!(
        Pool::new("postgresql://x:hunter2@h:bad/x", Settings::new(), 1),
        Err(Error::InvalidUrl { .. })
    ));
}

/// A refused connect says what to check for its cause, against the real server: a role at
/// its connection limit (SQLSTATE 53300) is told about connection slots, not passwords; a
/// missing database to check its name; TLS required of a server without it about TLS.
#[test]
fn pg_connect_errors_hint_at_their_cause() {
    let role = pgdb::TestRole::new("limited");
    let db = TestDb::new("hints");
    let mut plain = db.plain();
    plain
        .batch_execute(&format!("ALTER ROLE {} CONNECTION LIMIT 0", role.name))
        .expect("limit");
    let err = Connection::connect(&pgdb::with_user(&db.url, &role.name), &Settings::new())
        .expect_err("the role may open no session");
    let text = err.to_string();
    assert_eq!(err.code().map(|c| c.code()), Some("53300"), "{err:?}");
    assert!(text.contains("no free connection slot"), "{text}");
    assert!(!text.contains("password"), "{text}");
    assert!(
        text.starts_with("could not connect to the database at "),
        "{text}"
    );

    let missing = pgdb::with_database(&db.url, "wl_no_such_database");
    let err = Connection::connect(&missing, &Settings::new()).expect_err("no such database");
    let text = err.to_string();
    assert!(text.contains("check the database name"), "{text}");
    assert!(!text.contains("running"), "{text}");

    let err = Connection::connect(&format!("{}?sslmode=require", db.url), &Settings::new())
        .expect_err("no TLS");
    let text = err.to_string();
    assert!(text.contains("TLS"), "{text}");
    assert!(!text.contains("user, password and database name"), "{text}");
}

/// Values map both ways, `?` placeholders are translated, and the write guard refuses a lock
/// asked for after a statement.
#[test]
fn pg_values_placeholders_and_transactions() {
    let db = TestDb::new("values");
    let mut conn = db.connect(&Settings::new());
    let rows = conn
        .execute(
            "SELECT 1::int2 AS a, 2::int4, 3::int8, 1.5::float8, 'x'::text, '\\x0102'::bytea, \
             '{\"a\": [1]}'::jsonb, '2024-05-01 12:00:00.25+00'::timestamptz, '-12.340'::numeric, \
             NULL::text, true, '2024-05-01'::date, \
             'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '?' AS q, pg_sleep(0)",
            &[],
        )
        .expect("select");
    assert_eq!(rows.columns()[0].name(), "a");
    assert_eq!(rows.columns()[2].type_name(), "int8");
    let row = rows.first().expect("row").values().to_vec();
    assert_eq!(
        row,
        vec![
            Value::Int(1),
            Value::Int(2),
            Value::Int(3),
            Value::Float(1.5),
            Value::Text("x".into()),
            Value::Bytes(vec![1, 2]),
            Value::from(serde_json::json!({"a": [1]})),
            Value::Timestamp {
                micros: 1_714_564_800_250_000,
                time_zone: true
            },
            Value::Numeric("-12.340".into()),
            Value::Null,
            Value::Bool(true),
            Value::Text("2024-05-01".into()),
            Value::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
            Value::Text("?".into()),
            Value::Null,
        ]
    );

    let params = vec![
        Value::Int(-7),
        Value::Text("it's".into()),
        Value::Bytes(vec![0, 255]),
        Value::from(serde_json::json!({"k": "v"})),
        Value::Timestamp {
            micros: 1_714_564_800_250_000,
            time_zone: true,
        },
        Value::Numeric("123456789.000100".into()),
        Value::Bool(false),
        Value::Float(-0.25),
        Value::Null,
    ];
    let rows = conn
        .execute(
            "SELECT ?::int8, ?::text, ?::bytea, ?::jsonb, ?::timestamptz, ?::numeric, ?::bool, \
             ?::float8, ?::int4 -- ?",
            &params,
        )
        .expect("round trip");
    assert_eq!(rows.first().expect("row").values(), &params[..]);

    let err = conn.execute("SELECT ?, ?", &[Value::Int(1)]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ParameterCount {
                expected: 2,
                given: 1
            }
        ),
        "{err:?}"
    );
    let err = conn
        .execute("SELECT 'a & b'::tsquery AS addr", &[])
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedType { .. }), "{err:?}");
    assert!(err.to_string().contains("addr::text"), "{err}");
    // Client-side errors leave an open transaction usable.
    conn.begin().expect("begin");
    conn.execute("SELECT ?", &[]).unwrap_err();
    conn.execute("SELECT 'a & b'::tsquery", &[]).unwrap_err();
    conn.execute("SELECT 1", &[]).expect("still usable");
    conn.commit().expect("commit");

    setup_schema(&mut conn, None).expect("setup");
    conn.execute(
        "INSERT INTO ledgers (slug) VALUES (?), (?)",
        &["a".into(), "b".into()],
    )
    .expect("insert");
    let mut w = conn.write().expect("write");
    let rows = w
        .execute(
            "UPDATE ledgers SET generation = generation WHERE slug IN (?, ?)",
            &["a".into(), "b".into()],
        )
        .expect("update");
    assert_eq!(rows.affected(), 2);
    w.commit().expect("commit");

    conn.begin().expect("begin");
    conn.execute("SELECT 1", &[]).expect("statement");
    let err = conn.begin_write().unwrap_err();
    assert!(matches!(err, Error::AlreadyInTransaction), "{err:?}");
    assert_eq!(
        err.to_string(),
        "cannot start a transaction within a transaction"
    );
    conn.rollback().expect("rollback");

    // The lock as the first statement of a transaction the caller opened is fine.
    conn.begin().expect("begin");
    assert_eq!(conn.begin_write().expect("write").waits(), 1);
    conn.commit().expect("commit");
}

/// On a Unix socket the server-side TCP settings are not checked, and a refused writer there
/// has no client address: it shows as `an unseen client`.
#[test]
fn pg_unix_socket_session_and_unseen_client() {
    let db = TestDb::new("socket");
    let mut conn = db.connect(&Settings::new());
    let dir = conn
        .show("unix_socket_directories")
        .expect("show")
        .unwrap_or_default();
    let port = conn.show("port").expect("show").unwrap_or_default();
    let dir = dir.split(',').next().unwrap_or_default().trim().to_string();
    let socket = format!("{dir}/.s.PGSQL.{port}");
    // No silent pass: without the socket this test has nothing to check, so it fails and
    // says what it needs.
    assert!(
        !dir.is_empty() && std::path::Path::new(&socket).exists(),
        "this test needs the server of TEST_DATABASE_URL to run on this machine with a Unix \
         socket (unix_socket_directories = {dir:?}, port {port}): no socket at {socket:?}. \
         Run it with `make test` or `tests/with-postgres.sh`, which start such a server"
    );
    let url = format!("host={dir} port={port} user=postgres dbname={}", db.name);
    let mut local = Connection::connect(&url, &Settings::new()).expect("socket connect");
    let checks = local.check_settings().expect("check");
    for check in &checks {
        let expected = if check.name.starts_with("tcp_") {
            SettingStatus::NotApplicable
        } else {
            SettingStatus::InEffect
        };
        assert_eq!(check.status, expected, "{check:?}");
    }

    setup_schema(&mut conn, None).expect("setup");
    conn.execute("INSERT INTO ledgers (slug) VALUES ('main')", &[])
        .expect("insert");
    let mut old = Settings::new();
    old.version(0).required(0);
    let mut old = Connection::connect(&url, &old).expect("old writer on the socket");
    let err = old.begin_write().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                version: 0,
                floor: 1
            }
        ),
        "{err:?}"
    );
    let w = conn.write().expect("allowed write");
    assert_eq!(
        w.alerts(&[]),
        vec![
            "The ledger writer at an unseen client was refused: ledger writer version 0 is \
             below version 1, the oldest the shared database allows; update its code and \
             restart it"
                .to_string()
        ]
    );
    w.rollback().expect("rollback");
}

/// In a child (a fresh process: no address set up yet), one write at `WL_FRESH_WRITE_URL`
/// that bumps the generation of `main`; prints `fresh write: ok` or `fresh write: ERROR`.
fn fresh_write_child() -> bool {
    let Ok(url) = std::env::var("WL_FRESH_WRITE_URL") else {
        return false;
    };
    let result = (|| -> Result<(), Error> {
        let mut conn = Connection::connect(&url, &Settings::new())?;
        let mut write = conn.write()?;
        write.execute(
            "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?",
            &["main".into()],
        )?;
        write.commit()
    })();
    match result {
        Ok(()) => println!("fresh write: ok"),
        Err(err) => println!("fresh write: {err}"),
    }
    true
}

/// Runs this test binary's `test` again in a new process, which writes once at `url`;
/// returns what the child said (`ok`, or the write's error).
fn write_in_a_fresh_process(test: &str, url: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("WL_FRESH_WRITE_URL", url)
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("fresh write: "))
        .map(|(_, said)| said.to_string())
        .unwrap_or_else(|| {
            panic!(
                "the child wrote nothing: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// A writer role with data grants only (`SELECT, INSERT, UPDATE, DELETE` on the tables,
/// `USAGE` on the refusal counter) writes from a fresh process once the owner set the schema
/// up: the per-process set-up reads the catalog and runs no DDL, and still stores the floor.
#[test]
fn pg_a_writer_role_with_data_grants_only_writes_from_a_fresh_process() {
    const NAME: &str = "pg_a_writer_role_with_data_grants_only_writes_from_a_fresh_process";
    if fresh_write_child() {
        return;
    }
    let role = pgdb::TestRole::new("writer");
    let db = TestDb::new("grants");
    let mut owner = db.connect(&Settings::new());
    setup_schema(&mut owner, None).expect("the owner's set-up");
    owner
        .execute_batch(&format!(
            "INSERT INTO ledgers (slug) VALUES ('main'); \
             UPDATE writer_floor SET version = 0 WHERE name = 'ledger'; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON ledgers, row_changes, writer_floor TO {r}; \
             GRANT USAGE ON SEQUENCE writer_refusals TO {r}; \
             REVOKE ALL ON SEQUENCE writer_refusals FROM PUBLIC",
            r = role.name
        ))
        .expect("grants");
    let mut plain = db.plain();
    let said = write_in_a_fresh_process(NAME, &pgdb::with_user(&db.url, &role.name));
    assert_eq!(said, "ok", "the data-grants writer could not write");
    assert_eq!(generation(&mut plain, "main"), 1);
    // The set-up still stored the floor (GREATEST: raised from 0 to this code's 1).
    let floor: i32 = plain
        .query_one(
            "SELECT version FROM writer_floor WHERE name = 'ledger'",
            &[],
        )
        .expect("floor")
        .get(0);
    assert_eq!(floor, 1, "the per-process set-up did not store the floor");

    // A function that is not current is the owner's to replace: the writer role is told
    // what failed, and the owner's set-up puts it back.
    owner
        .execute_batch(
            "CREATE OR REPLACE FUNCTION ledger_writer_floor_check() RETURNS trigger \
             LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
        )
        .expect("an old function");
    let said = write_in_a_fresh_process(NAME, &pgdb::with_user(&db.url, &role.name));
    assert!(said.contains("permission denied"), "{said}");
    assert!(said.contains("writerlock pg setup"), "{said}");
    setup_schema(&mut owner, None).expect("the owner's set-up again");
    let said = write_in_a_fresh_process(NAME, &pgdb::with_user(&db.url, &role.name));
    assert_eq!(said, "ok");
    assert_eq!(generation(&mut plain, "main"), 2);
}

/// On a read-only server (`default_transaction_read_only`, as on a standby) a fresh
/// process's write fails at the write's own statement, not in the schema set-up.
#[test]
fn pg_a_fresh_write_on_a_read_only_server_names_its_own_statement() {
    const NAME: &str = "pg_a_fresh_write_on_a_read_only_server_names_its_own_statement";
    if fresh_write_child() {
        return;
    }
    let db = TestDb::new("readonly");
    let mut owner = db.connect(&Settings::new());
    setup_schema(&mut owner, None).expect("the owner's set-up");
    owner
        .execute("INSERT INTO ledgers (slug) VALUES ('main')", &[])
        .expect("ledger");
    let url = format!("{}?options=-c%20default_transaction_read_only%3Don", db.url);
    let said = write_in_a_fresh_process(NAME, &url);
    assert!(
        said.contains("cannot execute UPDATE in a read-only transaction"),
        "{said}"
    );
    assert!(!said.contains("CREATE"), "{said}");
}
