//! The Postgres writer session when the server, the network or a pooler fails, against real
//! parts: a cluster of each test's own that is restarted (`pg_ctl restart -m fast` and `-m
//! immediate`) or frozen (SIGSTOP), a real PgBouncer in session and transaction mode, and a
//! cut network (`nft` rules on loopback, root only: skipped with the reason otherwise).
//!
//! The tests run one at a time on the main thread (no libtest harness): they fork, restart
//! servers and change firewall rules. `cargo test --test pg_faults NAME` runs the tests
//! whose name contains NAME.

#[path = "../common/mod.rs"]
mod common;
mod harness;

use std::thread;
use std::time::{Duration, Instant};

use harness::{is_root, within, Bouncer, Cluster, Cut, Standby};
use writerlock::pg::{setup_schema, Connection, Error, Pool, Settings, Value};

/// Settings with short limits, so every fault shows within seconds.
fn quick() -> Settings {
    let mut s = Settings::new();
    s.lock_wait(Duration::from_secs(2))
        .idle_in_transaction(Duration::from_secs(3))
        .statement_timeout(Duration::from_secs(10))
        .keepalives_idle(Duration::from_secs(1))
        .keepalives_interval(Duration::from_secs(1))
        .keepalives_count(2)
        .tcp_user_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(3));
    s
}

/// A ledger schema with one ledger and a table the tests write rows into.
fn prepare(url: &str) -> Connection {
    let mut conn = Connection::connect(url, &quick()).expect("connect");
    setup_schema(&mut conn, None).expect("setup");
    conn.execute_batch(
        "INSERT INTO ledgers (slug) VALUES ('main') ON CONFLICT DO NOTHING; \
         CREATE TABLE IF NOT EXISTS rows (writer int, n int, tag text)",
    )
    .expect("tables");
    conn
}

fn count(plain: &mut postgres::Client, sql: &str) -> i64 {
    plain.query_one(sql, &[]).expect(sql).get(0)
}

/// Waits until a plain session can read again (after a restart or a cut).
fn reachable(cluster: &Cluster) -> postgres::Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match postgres::Client::connect(&cluster.url, postgres::NoTls) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("server not back: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Item: a commit whose reply never arrives is reported as unknown, not as rolled back,
/// and here it did commit.
fn commit_whose_reply_is_lost_is_unknown() -> Result<(), String> {
    if !is_root() {
        return Err("skip: dropping packets with nft needs root".into());
    }
    let cluster = Cluster::start();
    let mut conn = prepare(&cluster.url);
    conn.begin_write().expect("write");
    conn.execute("INSERT INTO rows VALUES (1, 1, 'lost reply')", &[])
        .expect("insert");
    let cut = Cut::replies(cluster.port);
    let outcome = within(Duration::from_secs(40), move || {
        let r = conn.commit();
        (conn, r)
    });
    drop(cut);
    let ((conn, result), took) =
        outcome.ok_or("COMMIT into a dead link still blocked after 40 s")?;
    let err = result.expect_err("the commit cannot have been confirmed");
    println!("  commit failed after {:.1} s: {err}", took.as_secs_f64());
    assert!(matches!(err, Error::CommitOutcomeUnknown { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("outcome of the commit is unknown"), "{text}");
    assert!(
        text.contains("check whether the write is in the database"),
        "{text}"
    );
    assert!(!text.contains("was rolled back"), "{text}");
    assert_eq!(err.code().map(|c| c.code()), Some("08007"));
    assert!(err.is_connection_lost());
    assert!(conn.is_closed());
    assert!(took < Duration::from_secs(20), "{took:?}");
    let mut plain = reachable(&cluster);
    assert_eq!(
        count(
            &mut plain,
            "SELECT count(*) FROM rows WHERE tag = 'lost reply'"
        ),
        1,
        "the server committed: reporting it as rolled back would have made a retry write it twice"
    );
    Ok(())
}

/// Item: a statement sent into a cut network fails with a lost connection within the TCP
/// user timeout (2 s here, 60 s by default), and the server frees the writer lock.
fn statement_into_a_cut_network_fails_within_the_tcp_user_timeout() -> Result<(), String> {
    if !is_root() {
        return Err("skip: dropping packets with nft needs root".into());
    }
    let cluster = Cluster::start();
    let mut conn = prepare(&cluster.url);
    conn.begin_write().expect("write");
    let cut = Cut::both(cluster.port);
    let outcome = within(Duration::from_secs(40), move || {
        conn.execute("INSERT INTO rows VALUES (2, 1, 'cut')", &[])
    });
    drop(cut);
    let (result, took) = outcome.ok_or("a statement into a dead link blocked past 40 s")?;
    let err = result.expect_err("nothing can answer through a cut network");
    println!(
        "  statement failed after {:.1} s: {err}",
        took.as_secs_f64()
    );
    assert!(err.is_connection_lost(), "{err:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    // The server's side ends too (idle limit, its own TCP user timeout): the lock is free.
    let mut next = Connection::connect(&cluster.url, &quick()).expect("connect after the cut");
    next.begin_write()
        .expect("the writer lock is free once the server ended the cut session");
    next.rollback().expect("rollback");
    let mut plain = reachable(&cluster);
    assert_eq!(
        count(&mut plain, "SELECT count(*) FROM rows WHERE tag = 'cut'"),
        0
    );
    Ok(())
}

/// Items: a restart during a write leaves the commit's outcome unknown (never "rolled
/// back" by guess), and the pool's idle connections are checked, so the first write after
/// the restart succeeds.
fn restart_during_a_write_and_with_idle_pooled_connections() -> Result<(), String> {
    let cluster = Cluster::start();
    drop(prepare(&cluster.url));
    for mode in ["fast", "immediate"] {
        let pool = Pool::new(&cluster.url, quick(), 2).expect("pool");
        let a = pool.take().expect("take a");
        let b = pool.take().expect("take b");
        pool.give(a).expect("give a");
        pool.give(b).expect("give b");
        assert_eq!(pool.idle_count(), 2);

        let mut conn = Connection::connect(&cluster.url, &quick()).expect("connect");
        conn.begin_write().expect("write");
        conn.execute(
            "INSERT INTO rows VALUES (3, 1, $1)",
            &[Value::from(format!("restart {mode}"))],
        )
        .expect("insert");
        // A second write open across the restart, whose next statement is not COMMIT.
        let mut other = Connection::connect(&cluster.url, &quick()).expect("connect");
        other.begin().expect("begin");
        cluster.restart(mode);
        let lost = other
            .execute("INSERT INTO rows VALUES (3, 3, 'never')", &[])
            .expect_err("the session did not survive the restart");
        println!("  -m {mode}: statement: {lost}");
        assert!(lost.is_connection_lost(), "{lost:?}");
        assert!(
            !matches!(lost, Error::CommitOutcomeUnknown { .. }),
            "{lost:?}"
        );
        let again = other
            .commit()
            .expect_err("nothing to commit on a lost session");
        assert!(matches!(again, Error::Closed { .. }), "{again:?}");
        assert!(again.to_string().contains("rolled back"), "{again}");
        let err = conn
            .commit()
            .expect_err("the session did not survive the restart");
        println!("  -m {mode}: commit: {err}");
        assert!(
            matches!(err, Error::CommitOutcomeUnknown { .. }),
            "-m {mode}: {err:?}"
        );
        assert!(!err.to_string().contains("was rolled back"), "{err}");

        // Past the pool's check interval, every idle connection is checked before use.
        thread::sleep(writerlock::pg::CHECK_IDLE_AFTER + Duration::from_millis(200));
        let mut taken = pool.take().expect("take after the restart");
        let mut write = taken
            .write()
            .expect("the first write after the restart starts");
        write
            .execute(
                "INSERT INTO rows VALUES (3, 2, $1)",
                &[Value::from(format!("after {mode}"))],
            )
            .expect("the first write after the restart runs");
        write
            .commit()
            .expect("the first write after the restart commits");
        pool.give(taken).expect("give back");
        let mut plain = reachable(&cluster);
        let sql = format!("SELECT count(*) FROM rows WHERE tag = 'after {mode}'");
        assert_eq!(count(&mut plain, &sql), 1);
    }
    Ok(())
}

/// Item: a restart costs no write. Pooled connections used a moment before `pg_ctl restart`
/// (fast and immediate) are recognised as ended without a round trip, so the writes taken
/// through the pool right after it commit on fresh connections, over TCP and a Unix socket;
/// a connection of the caller's own says plainly that the server ended it.
fn writes_through_the_pool_right_after_a_restart_commit() -> Result<(), String> {
    let cluster = Cluster::start();
    drop(prepare(&cluster.url));
    let unix = format!(
        "postgresql://postgres@/postgres?host={}&port={}",
        cluster.dir.join("sock").display(),
        cluster.port
    );
    for (how, url) in [("tcp", cluster.url.clone()), ("unix", unix)] {
        for mode in ["fast", "immediate"] {
            let pool = Pool::new(&url, quick(), 3).expect("pool");
            let write = |conn: &mut Connection, tag: &str| -> Result<(), Error> {
                let mut w = conn.write()?;
                w.execute("INSERT INTO rows VALUES (4, 1, $1)", &[Value::from(tag)])?;
                w.commit()
            };
            let taken: Vec<Connection> = (0..3).map(|_| pool.take().expect("take")).collect();
            for mut conn in taken {
                write(&mut conn, "before").expect("a write before the restart");
                pool.give(conn).expect("give");
            }
            let mut own = Connection::connect(&url, &quick()).expect("connect");
            own.execute("SELECT 1", &[]).expect("used");
            cluster.restart(mode);
            let tag = format!("after {how} {mode}");
            let taken: Vec<Connection> = (0..3)
                .map(|_| pool.take().expect("take after the restart"))
                .collect();
            for mut conn in taken {
                write(&mut conn, &tag).map_err(|e| {
                    format!("{how} -m {mode}: a pooled write after the restart failed: {e}")
                })?;
                pool.give(conn).expect("give");
            }
            let err = own
                .execute("SELECT 1", &[])
                .expect_err("the server ended the caller's own connection");
            println!("  {how} -m {mode}: own connection: {err}");
            assert!(err.is_connection_lost(), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains("the database server ended this session")
                    || text.contains("is closed"),
                "{text}"
            );
            if mode == "fast" {
                assert!(text.contains("administrator command"), "{how}: {text}");
            }
            let mut plain = reachable(&cluster);
            let sql = format!("SELECT count(*) FROM rows WHERE tag = '{tag}'");
            assert_eq!(count(&mut plain, &sql), 3, "{how} -m {mode}");
        }
    }
    Ok(())
}

/// Item: `target_session_attrs` as libpq reads it, against a real primary and hot standby:
/// `primary` and `standby` pick the host of that kind whatever the order, `prefer-standby`
/// takes the primary when no host is a standby, and `standby` without one says so per host.
fn target_session_attrs_picks_the_primary_or_the_standby() -> Result<(), String> {
    let cluster = Cluster::start();
    let standby = Standby::of(&cluster);
    let (p, s) = (cluster.port, standby.port);
    let recovery = |url: &str| -> Result<(bool, i64), Error> {
        let mut conn = Connection::connect(url, &quick())?;
        let rows = conn.execute("SELECT pg_is_in_recovery(), inet_server_port()", &[])?;
        let row = rows.first().expect("a row");
        Ok((
            row.get(0).and_then(Value::read_bool).expect("bool"),
            row.get(1).and_then(Value::as_i64).expect("port"),
        ))
    };
    let url = |ports: &str, target: &str| {
        format!(
            "host=127.0.0.1,127.0.0.1 port={ports} user=postgres dbname=postgres \
             target_session_attrs={target}"
        )
    };
    let one = |port: u16, target: &str| {
        format!("postgresql://postgres@127.0.0.1:{port}/postgres?target_session_attrs={target}")
    };
    assert_eq!(
        recovery(&url(&format!("{s},{p}"), "primary")).expect("primary"),
        (false, i64::from(p))
    );
    assert_eq!(
        recovery(&url(&format!("{p},{s}"), "standby")).expect("standby"),
        (true, i64::from(s))
    );
    assert_eq!(
        recovery(&url(&format!("{p},{s}"), "prefer-standby")).expect("prefer-standby"),
        (true, i64::from(s))
    );
    assert_eq!(
        recovery(&one(p, "prefer-standby")).expect("prefer-standby without a standby"),
        (false, i64::from(p))
    );
    assert_eq!(
        recovery(&one(p, "any")).expect("any"),
        (false, i64::from(p))
    );
    let err = recovery(&one(p, "standby")).expect_err("no standby there");
    println!("  standby without one: {err}");
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(text.contains("the server is a primary"), "{text}");
    let err = recovery(&one(s, "primary")).expect_err("no primary there");
    assert!(err.to_string().contains("the server is a standby"), "{err}");
    Ok(())
}

/// Item: against a frozen server the whole connection set-up (not only TCP) ends within
/// the connect timeout.
fn connect_to_a_frozen_server_ends_within_the_connect_timeout() -> Result<(), String> {
    let cluster = Cluster::start();
    let frozen = cluster.freeze();
    let url = cluster.url.clone();
    let mut settings = quick();
    settings.connect_timeout(Duration::from_secs(2));
    let outcome = within(Duration::from_secs(30), move || {
        Connection::connect(&url, &settings)
    });
    drop(frozen);
    let (result, took) = outcome.ok_or("connect() to a frozen server hung past 30 s")?;
    let err = result.expect_err("a frozen server cannot log anyone in");
    println!("  connect failed after {:.1} s: {err}", took.as_secs_f64());
    assert!(matches!(err, Error::ConnectTimedOut { .. }), "{err:?}");
    assert!(!err.to_string().contains("password"), "{err}");
    assert!(
        err.to_string()
            .contains("within the connect timeout of 2 s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
    Ok(())
}

/// Item: behind a PgBouncer whose server is down, connect() ends within the connect timeout.
fn connect_through_a_pooler_whose_server_is_down_ends_in_time() -> Result<(), String> {
    let dead_port = harness::free_port();
    let bouncer = Bouncer::start(dead_port, "transaction", true);
    let url = bouncer.url("postgres");
    let mut settings = quick();
    settings.connect_timeout(Duration::from_secs(2));
    let outcome = within(Duration::from_secs(40), move || {
        Connection::connect(&url, &settings)
    });
    let (result, took) = outcome.ok_or("connect() through the pooler hung past 40 s")?;
    let err = result.expect_err("no server behind the pooler");
    println!("  connect failed after {:.1} s: {err}", took.as_secs_f64());
    assert!(matches!(err, Error::ConnectTimedOut { .. }), "{err:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    Ok(())
}

/// Item: a pooler that refuses the startup options is named as such, with a pointer to the
/// README's pooler section, and no advice about the password.
fn a_pooler_refusing_startup_options_is_reported_as_such() -> Result<(), String> {
    let cluster = Cluster::start();
    let bouncer = Bouncer::start(cluster.port, "session", false);
    let err = Connection::connect(&bouncer.url("postgres"), &quick())
        .expect_err("PgBouncer refuses the options startup parameter");
    println!("  {err}");
    assert!(
        matches!(err, Error::StartupOptionsRejected { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("unsupported startup parameter"), "{text}");
    assert!(text.contains("README"), "{text}");
    assert!(!text.contains("password"), "{text}");
    Ok(())
}

/// Role defaults in one database, so sessions through a pooler that drops the startup
/// options still carry the limits (and, as the README warns, the writer version).
fn role_defaults(plain: &mut postgres::Client, db: &str) {
    for (name, value) in [
        ("lock_timeout", "2s"),
        ("idle_in_transaction_session_timeout", "3s"),
        ("statement_timeout", "10s"),
        ("agentihooks.ledger_writer_version", "1"),
        ("tcp_keepalives_idle", "30"),
        ("tcp_keepalives_interval", "10"),
        ("tcp_keepalives_count", "3"),
        ("tcp_user_timeout", "2000"),
    ] {
        plain
            .batch_execute(&format!(
                "ALTER ROLE postgres IN DATABASE {db} SET {name} = '{value}'"
            ))
            .expect("role default");
    }
}

/// Item 1: behind PgBouncer in session mode (startup options ignored, limits as role
/// defaults) eight writers make no mis-executed row, and a refused writer leaves no session
/// lock on a pooled server connection.
fn writers_behind_pgbouncer_in_session_mode() -> Result<(), String> {
    writers_behind_pgbouncer("session")
}

/// Item 1: the same in transaction mode, where each transaction may run on another server
/// connection: unnamed statements leave nothing behind to mis-execute.
fn writers_behind_pgbouncer_in_transaction_mode() -> Result<(), String> {
    writers_behind_pgbouncer("transaction")
}

fn writers_behind_pgbouncer(mode: &str) -> Result<(), String> {
    let cluster = Cluster::start();
    let mut plain = cluster.plain();
    plain.batch_execute("CREATE DATABASE pooled").expect("db");
    role_defaults(&mut plain, "pooled");
    let direct = format!(
        "{}/pooled",
        cluster.url.rsplit_once('/').expect("a database").0
    );
    drop(prepare(&direct));
    let settings = quick();
    {
        let bouncer = Bouncer::start(cluster.port, mode, true);
        let url = bouncer.url("pooled");
        let writers = 8;
        let per_writer = 40;
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let url = url.clone();
                let settings = settings.clone();
                thread::spawn(move || -> Result<(), Error> {
                    let mut conn = Connection::connect(&url, &settings)?;
                    assert!(conn.via_proxy(), "the session sees the pooler");
                    // Each writer's own SQL text: a row with another writer's parameters
                    // under this tag would be a mis-executed statement.
                    let sql = format!("INSERT INTO rows (writer, n, tag) VALUES (?, ?, 'w{w}')");
                    for n in 0..per_writer {
                        let mut write = conn.write()?;
                        write.execute(&sql, &[Value::Int(w), Value::Int(n)])?;
                        write.commit()?;
                    }
                    // Behind a pooler no statement is kept prepared: a name could meet
                    // another client's session on a shared server connection.
                    let kept = conn.execute("SELECT count(*) FROM pg_prepared_statements", &[])?;
                    let kept = kept.first().and_then(|r| r.get(0)).and_then(Value::as_i64);
                    assert_eq!(kept, Some(0), "a statement was prepared through the pooler");
                    conn.close()
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| format!("{mode}: a writer panicked"))?
                .map_err(|e| format!("{mode}: {e}"))?;
        }
        let mut check = Connection::connect(&direct, &quick()).expect("direct");
        let rows = check
            .execute(
                "SELECT count(*), count(*) FILTER (WHERE tag <> 'w' || writer) FROM rows",
                &[],
            )
            .expect("count");
        let row = rows.first().expect("one row");
        let (total, wrong) = (
            row.get(0).and_then(Value::as_i64),
            row.get(1).and_then(Value::as_i64),
        );
        println!("  {mode} pooling: {total:?} rows, {wrong:?} mis-executed");
        assert_eq!(wrong, Some(0), "{mode}: mis-executed rows");
        assert_eq!(total, Some(writers * per_writer), "{mode}");
        check.execute("TRUNCATE rows", &[]).expect("truncate");

        // A refused writer behind the pooler: refused, and no refusal lock left behind.
        check
            .execute(
                "UPDATE writer_floor SET version = 2 WHERE name = 'ledger'",
                &[],
            )
            .expect("raise the floor");
        let mut old = Connection::connect(&url, &settings).expect("through the pooler");
        let err = old
            .begin_write()
            .expect_err("version 1 is below the floor 2");
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
        old.close().expect("close");
        let locks = check
            .execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                 AND classid = 1280788050 AND objsubid = 2",
                &[],
            )
            .expect("locks");
        let left = locks.first().and_then(|r| r.get(0)).and_then(Value::as_i64);
        assert_eq!(
            left,
            Some(0),
            "{mode}: a refusal lock stayed on a pooled server connection"
        );
        // The writer protocol's refusal lock for connections of the host's own (psycopg):
        // told the port it dialled, it takes no lock through the pooler, and does directly.
        let sql = |port| {
            writerlock::pg::floor::refusal_lock_sql_if_direct(0, 1, Some(port)).expect("sql")
        };
        let held = |check: &mut Connection| {
            let rows = check
                .execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                     AND classid = 1280788050 AND objsubid = 2",
                    &[],
                )
                .expect("locks");
            rows.first().and_then(|r| r.get(0)).and_then(Value::as_i64)
        };
        let mut pooled = postgres::Client::connect(&url, postgres::NoTls).expect("pooled");
        pooled
            .batch_execute(&sql(bouncer.port))
            .expect("through the pooler");
        drop(pooled);
        assert_eq!(
            held(&mut check),
            Some(0),
            "{mode}: the protocol's lock via the pooler"
        );
        let mut direct_client =
            postgres::Client::connect(&direct, postgres::NoTls).expect("direct client");
        direct_client
            .batch_execute(&sql(cluster.port))
            .expect("direct");
        assert_eq!(held(&mut check), Some(1), "a direct session takes it");
        drop(direct_client);
        check
            .execute(
                "UPDATE writer_floor SET version = 1 WHERE name = 'ledger'",
                &[],
            )
            .expect("lower the floor by hand");

        // The writer's version is checked on the session the write runs on, through the
        // pooler too: a writer of version 2 whose pooled server sessions carry the role
        // default 1 is not granted (the floor trigger would judge its writes as version 1).
        let mut v2 = settings.clone();
        v2.version(2);
        let mut other = Connection::connect_unverified(&url, &v2).expect("through the pooler");
        let err = other
            .begin_write()
            .expect_err("the pooled session carries version 1");
        assert!(
            matches!(
                &err,
                Error::SettingNotInEffect { setting, expected, actual }
                    if setting == "agentihooks.ledger_writer_version"
                        && expected == "2"
                        && actual == "1"
            ),
            "{mode}: {err:?}"
        );
        assert!(
            !other.in_transaction(),
            "{mode}: the refused start was rolled back"
        );
        other.close().expect("close");
        drop(bouncer);
    }
    Ok(())
}

/// A database of its own on the shared test server (`TEST_DATABASE_URL`), dropped after.
struct Scratch {
    admin: postgres::Client,
    name: String,
    url: String,
}

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let admin_url = std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| {
            panic!(
                "TEST_DATABASE_URL is not set: run make test, or tests/with-postgres.sh cargo \
                 test -p writerlock --test pg_faults"
            )
        });
        let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach TEST_DATABASE_URL {admin_url}: {e}"));
        let name = format!("wlf_{tag}_{}", std::process::id());
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("drop a leftover database");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create database");
        let base = admin_url.split('?').next().unwrap_or(&admin_url);
        let url = format!("{}/{name}", base.rsplit_once('/').expect("a database").0);
        Scratch { admin, name, url }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = self.admin.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// Item: a NUL byte in SQL or more than 65,535 parameters is a client error; the open
/// transaction is really rolled back and the writer lock is free at once.
fn unsendable_statements_roll_back_and_free_the_lock() -> Result<(), String> {
    let db = Scratch::new("unsendable");
    let mut conn = prepare(&db.url);
    let mut other = Connection::connect(&db.url, &quick()).expect("second writer");
    let too_many: Vec<Value> = (0..65_536).map(Value::Int).collect();
    let cases: [(&str, &[Value]); 2] = [
        ("INSERT INTO rows VALUES (5, 1, 'nul\0byte')", &[]),
        ("SELECT 1", &too_many),
    ];
    for (sql, params) in cases {
        conn.begin_write().expect("write");
        conn.execute("INSERT INTO rows VALUES (5, 0, 'before')", &[])
            .expect("insert");
        let err = conn.execute(sql, params).expect_err("cannot be sent");
        println!("  {err}");
        assert!(
            matches!(
                err,
                Error::Unsendable {
                    rolled_back: true,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(!err.is_connection_lost(), "{err:?}");
        assert!(
            err.to_string()
                .contains("the open transaction was rolled back"),
            "{err}"
        );
        assert!(!conn.in_transaction());
        assert!(!conn.is_closed(), "the session stays usable");
        // The lock is free now, not after the idle limit.
        let started = Instant::now();
        other.begin_write().expect("the lock is free at once");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        other.rollback().expect("rollback");
        let rows = conn
            .execute("SELECT count(*) FROM rows WHERE writer = 5", &[])
            .expect("the session still works");
        assert_eq!(
            rows.first().and_then(|r| r.get(0)).and_then(Value::as_i64),
            Some(0)
        );
    }
    // Outside a transaction nothing runs and nothing is rolled back.
    let err = conn.execute("SELECT '\0'", &[]).expect_err("NUL byte");
    assert!(
        matches!(
            err,
            Error::Unsendable {
                rolled_back: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("nothing was run"), "{err}");
    Ok(())
}

/// Item: a write's statements never run after its transaction ended.
fn a_write_after_its_commit_runs_nothing() -> Result<(), String> {
    let db = Scratch::new("ended");
    let mut conn = prepare(&db.url);
    let mut write = conn.write().expect("write");
    write
        .connection()
        .commit()
        .expect("COMMIT inside the write");
    let err = write
        .execute("INSERT INTO rows VALUES (6, 1, 'after commit')", &[])
        .expect_err("the write ended");
    assert!(matches!(err, Error::WriteEnded), "{err:?}");
    assert!(
        err.to_string().contains("this write has already ended"),
        "{err}"
    );
    write
        .execute_batch("INSERT INTO rows VALUES (6, 2, 'x')")
        .expect_err("ended too");
    drop(write);
    let rows = conn
        .execute("SELECT count(*) FROM rows WHERE writer = 6", &[])
        .expect("count");
    assert_eq!(
        rows.first().and_then(|r| r.get(0)).and_then(Value::as_i64),
        Some(0)
    );
    Ok(())
}

/// Item: a connection used in a child after fork() fails clearly there, the child's drop
/// sends nothing, and the parent's session carries on.
fn a_forked_child_gets_a_clear_error_and_leaves_the_parent_alone() -> Result<(), String> {
    let db = Scratch::new("fork");
    let mut conn = prepare(&db.url);
    let pool = Pool::new(&db.url, quick(), 2).expect("pool");
    let pooled = pool.take().expect("take");
    pool.give(pooled).expect("give");
    let before = conn.pid();
    // SAFETY: the child only runs the checks below and `_exit`s.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let ok_error = matches!(conn.execute("SELECT 1", &[]), Err(Error::Forked { .. }))
                && matches!(conn.begin_write(), Err(Error::Forked { .. }));
            // The child's copy of the connection and of the pool's idle one are dropped
            // here; neither may write to the parent's sessions.
            // SAFETY: the child owns its copy of the parent's memory.
            let copy = unsafe { std::ptr::read(&conn) };
            drop(copy);
            let fresh = pool.take().map(|c| c.pid()).unwrap_or(0);
            if ok_error && fresh != 0 {
                0
            } else {
                1
            }
        }))
        .unwrap_or(101);
        // SAFETY: end the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for the child this test forked.
    unsafe { libc::waitpid(child, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child did not get the fork error: status {status}"
    );
    conn.execute("SELECT 1", &[])
        .expect("the parent's session still works");
    assert_eq!(conn.pid(), before);
    let mut write = conn.write().expect("parent writes");
    write
        .execute("INSERT INTO rows VALUES (7, 1, 'parent')", &[])
        .expect("insert");
    write.commit().expect("parent commits");
    let mut again = pool.take().expect("the parent's pooled connection");
    again.execute("SELECT 1", &[]).expect("still alive");
    Ok(())
}

/// Item: close() on a dead connection is silent; a pool refuses a connection that is not
/// its own (another address, another writer version).
fn close_is_silent_and_pools_refuse_strangers() -> Result<(), String> {
    let db = Scratch::new("strangers");
    let mut conn = prepare(&db.url);
    let pid = conn.pid();
    let mut plain = postgres::Client::connect(&db.url, postgres::NoTls).expect("plain");
    plain
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .expect("terminate");
    let _ = conn.execute("SELECT 1", &[]);
    assert!(conn.is_closed());
    conn.close().expect("closing a dead connection is silent");

    let pool = Pool::new(&db.url, quick(), 2).expect("pool");
    let mut v2 = quick();
    v2.version(2).required(1);
    let stranger = Connection::connect(&db.url, &v2).expect("version 2");
    let err = pool.give(stranger).expect_err("another writer version");
    assert!(matches!(err, Error::ForeignConnection { .. }), "{err:?}");
    assert!(err.to_string().contains("writer version 2"), "{err}");
    let admin = Connection::connect(
        &std::env::var("TEST_DATABASE_URL").unwrap_or_default(),
        &quick(),
    )
    .expect("admin database");
    let err = pool.give(admin).expect_err("another address");
    assert!(matches!(err, Error::ForeignConnection { .. }), "{err:?}");
    assert_eq!(pool.idle_count(), 0);
    Ok(())
}

/// The TCP user timeout set on this process's socket whose local port is `port`.
fn tcp_user_timeout_of_local_port(port: u16) -> Option<u32> {
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: getsockname/getsockopt on a descriptor of this process, with buffers of
        // the sizes passed.
        unsafe {
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            if libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len) != 0
                || i32::from(addr.sin_family) != libc::AF_INET
                || u16::from_be(addr.sin_port) != port
            {
                continue;
            }
            let mut value: u32 = 0;
            let mut size = std::mem::size_of::<u32>() as libc::socklen_t;
            if libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                (&mut value as *mut u32).cast(),
                &mut size,
            ) == 0
            {
                return Some(value);
            }
        }
    }
    None
}

/// Item: by default the client's socket carries a TCP user timeout of 60 s (the keepalive
/// budget), so a write into a dead link fails after about a minute instead of the kernel's
/// quarter of an hour of retransmissions; it is configurable like the other settings.
fn the_client_socket_carries_the_tcp_user_timeout() -> Result<(), String> {
    let db = Scratch::new("usertimeout");
    for (settings, expected) in [(Settings::new(), 60_000), (quick(), 2_000)] {
        let mut conn = Connection::connect(&db.url, &settings).expect("connect");
        let rows = conn
            .execute("SELECT inet_client_port()", &[])
            .expect("client port");
        let port = rows
            .first()
            .and_then(|r| r.get(0))
            .and_then(Value::as_i64)
            .and_then(|p| u16::try_from(p).ok())
            .ok_or("skip: TEST_DATABASE_URL reaches the server over a Unix socket; the TCP user timeout applies to TCP")?;
        let set = tcp_user_timeout_of_local_port(port);
        println!("  client socket :{port}: TCP_USER_TIMEOUT {set:?} ms");
        assert_eq!(set, Some(expected));
    }
    Ok(())
}

/// The README's stopped client: a process stopped (SIGSTOP) while it holds the writer lock
/// is ended by the server after the idle limit, the next writer commits, nothing of the
/// stopped transaction is written, and once resumed its next call fails as an ended session.
fn a_stopped_client_holding_the_lock_is_ended_and_the_next_writer_commits() -> Result<(), String> {
    let db = Scratch::new("stopped");
    drop(prepare(&db.url));
    let (read_fd, write_fd) = {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) with a two-element array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
        (fds[0], fds[1])
    };
    let url = db.url.clone();
    // SAFETY: the child only runs the closure below and `_exit`s.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let code = std::panic::catch_unwind(|| {
            let mut conn = Connection::connect(&url, &quick()).expect("child connects");
            conn.begin_write().expect("child takes the lock");
            conn.execute("INSERT INTO rows VALUES (8, 1, 'stopped')", &[])
                .expect("child inserts");
            // SAFETY: one byte to the parent, then stop this process until SIGCONT.
            unsafe {
                libc::write(write_fd, b"x".as_ptr().cast(), 1);
                libc::raise(libc::SIGSTOP);
            }
            match conn.commit() {
                Err(Error::SessionEnded { .. }) => 0,
                Err(Error::Closed { .. }) => 0,
                _ => 1,
            }
        })
        .unwrap_or(101);
        // SAFETY: end the child without the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    /// Kills and reaps the stopped child should the test fail before it resumes it.
    struct Reap(Option<i32>);
    impl Drop for Reap {
        fn drop(&mut self) {
            if let Some(pid) = self.0.take() {
                // SAFETY: kill and reap the child this test forked and has not reaped.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
            }
        }
    }
    let mut reap = Reap(Some(child));
    let mut byte = [0u8; 1];
    // SAFETY: read one byte from the pipe the child writes once it holds the lock.
    let n = unsafe { libc::read(read_fd, byte.as_mut_ptr().cast(), 1) };
    assert_eq!(n, 1, "the child never took the lock");
    let started = Instant::now();
    let mut next = Connection::connect(&db.url, &quick()).expect("next writer");
    let mut write = next
        .write()
        .expect("the next writer gets the lock once the server ends the stopped one");
    write
        .execute("INSERT INTO rows VALUES (8, 2, 'next')", &[])
        .expect("insert");
    write.commit().expect("the next writer commits");
    let waited = started.elapsed();
    println!(
        "  the next writer committed after {:.1} s (idle limit 3 s)",
        waited.as_secs_f64()
    );
    // SAFETY: resume and reap the child this test forked.
    let status = unsafe {
        libc::kill(child, libc::SIGCONT);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
        reap.0 = None;
        libc::close(read_fd);
        libc::close(write_fd);
        status
    };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the resumed child did not see its session ended: status {status}"
    );
    assert!(waited >= Duration::from_secs(2), "{waited:?}");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    let rows = next
        .execute(
            "SELECT string_agg(tag, ',') FROM rows WHERE writer = 8",
            &[],
        )
        .expect("rows");
    assert_eq!(
        rows.first().and_then(|r| r.get(0)).and_then(Value::as_str),
        Some("next"),
        "nothing of the stopped transaction is written"
    );
    Ok(())
}

/// The README's pooler that dies: through PgBouncer, a write whose pooler is killed fails
/// as a lost connection (an unknown outcome for COMMIT), within a bounded time, and the
/// server rolls it back.
fn a_pooler_that_dies_mid_write_is_a_lost_connection() -> Result<(), String> {
    let cluster = Cluster::start();
    let mut plain = cluster.plain();
    plain.batch_execute("CREATE DATABASE pooled").expect("db");
    role_defaults(&mut plain, "pooled");
    let direct = format!(
        "{}/pooled",
        cluster.url.rsplit_once('/').expect("a database").0
    );
    drop(prepare(&direct));
    let mut bouncer = Bouncer::start(cluster.port, "session", true);
    let url = bouncer.url("pooled");
    let mut stmt = Connection::connect(&url, &quick()).expect("through the pooler");
    let mut commit = Connection::connect(&url, &quick()).expect("through the pooler");
    stmt.begin().expect("begin");
    commit.begin_write().expect("write");
    commit
        .execute("INSERT INTO rows VALUES (9, 1, 'pooler died')", &[])
        .expect("insert");
    bouncer.kill9();
    let outcome = within(Duration::from_secs(30), move || {
        let a = stmt.execute("INSERT INTO rows VALUES (9, 2, 'x')", &[]);
        let b = commit.commit();
        (a, b)
    });
    let ((a, b), took) = outcome.ok_or("calls through a dead pooler hung past 30 s")?;
    let a = a.expect_err("the pooler is gone");
    let b = b.expect_err("the pooler is gone");
    println!("  statement: {a}\n  commit: {b}");
    assert!(a.is_connection_lost(), "{a:?}");
    assert!(matches!(b, Error::CommitOutcomeUnknown { .. }), "{b:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut check = Connection::connect(&direct, &quick()).expect("direct");
    loop {
        let rows = check
            .execute("SELECT count(*) FROM rows WHERE writer = 9", &[])
            .expect("count");
        let n = rows.first().and_then(|r| r.get(0)).and_then(Value::as_i64);
        assert_eq!(n, Some(0), "the server rolled the write back");
        // The server's side ends too, which frees the writer lock.
        match check.begin_write() {
            Ok(_) => {
                check.rollback().expect("rollback");
                break;
            }
            Err(Error::LockNotGranted { .. }) if Instant::now() < deadline => continue,
            Err(e) => return Err(format!("the writer lock stayed taken: {e}")),
        }
    }
    Ok(())
}

type Test = (&'static str, fn() -> Result<(), String>);

fn main() {
    let tests: &[Test] = &[
        (
            "unsendable_statements_roll_back_and_free_the_lock",
            unsendable_statements_roll_back_and_free_the_lock,
        ),
        (
            "a_write_after_its_commit_runs_nothing",
            a_write_after_its_commit_runs_nothing,
        ),
        (
            "a_forked_child_gets_a_clear_error_and_leaves_the_parent_alone",
            a_forked_child_gets_a_clear_error_and_leaves_the_parent_alone,
        ),
        (
            "close_is_silent_and_pools_refuse_strangers",
            close_is_silent_and_pools_refuse_strangers,
        ),
        (
            "the_client_socket_carries_the_tcp_user_timeout",
            the_client_socket_carries_the_tcp_user_timeout,
        ),
        (
            "a_stopped_client_holding_the_lock_is_ended_and_the_next_writer_commits",
            a_stopped_client_holding_the_lock_is_ended_and_the_next_writer_commits,
        ),
        (
            "commit_whose_reply_is_lost_is_unknown",
            commit_whose_reply_is_lost_is_unknown,
        ),
        (
            "statement_into_a_cut_network_fails_within_the_tcp_user_timeout",
            statement_into_a_cut_network_fails_within_the_tcp_user_timeout,
        ),
        (
            "restart_during_a_write_and_with_idle_pooled_connections",
            restart_during_a_write_and_with_idle_pooled_connections,
        ),
        (
            "writes_through_the_pool_right_after_a_restart_commit",
            writes_through_the_pool_right_after_a_restart_commit,
        ),
        (
            "target_session_attrs_picks_the_primary_or_the_standby",
            target_session_attrs_picks_the_primary_or_the_standby,
        ),
        (
            "connect_to_a_frozen_server_ends_within_the_connect_timeout",
            connect_to_a_frozen_server_ends_within_the_connect_timeout,
        ),
        (
            "connect_through_a_pooler_whose_server_is_down_ends_in_time",
            connect_through_a_pooler_whose_server_is_down_ends_in_time,
        ),
        (
            "a_pooler_refusing_startup_options_is_reported_as_such",
            a_pooler_refusing_startup_options_is_reported_as_such,
        ),
        (
            "writers_behind_pgbouncer_in_session_mode",
            writers_behind_pgbouncer_in_session_mode,
        ),
        (
            "writers_behind_pgbouncer_in_transaction_mode",
            writers_behind_pgbouncer_in_transaction_mode,
        ),
        (
            "a_pooler_that_dies_mid_write_is_a_lost_connection",
            a_pooler_that_dies_mid_write_is_a_lost_connection,
        ),
    ];
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if std::env::args().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return;
    }
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        println!("test {name} ...");
        let started = Instant::now();
        match std::panic::catch_unwind(test) {
            Ok(Ok(())) => println!(
                "test {name} ... ok ({:.1} s)",
                started.elapsed().as_secs_f64()
            ),
            Ok(Err(reason)) if reason.starts_with("skip: ") => {
                println!("test {name} ... skipped: {}", &reason[6..])
            }
            Ok(Err(reason)) => {
                println!("test {name} ... FAILED: {reason}");
                failed.push(*name);
            }
            Err(_) => {
                println!("test {name} ... FAILED (panicked)");
                failed.push(*name);
            }
        }
    }
    println!("pg_faults: {ran} run, {} failed", failed.len());
    if !failed.is_empty() {
        println!("failed: {}", failed.join(", "));
        std::process::exit(1);
    }
}
