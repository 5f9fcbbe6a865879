//! `writerlock pg ...` against a real PostgreSQL server (TEST_DATABASE_URL, set by `make
//! test` or `tests/with-postgres.sh`). Every test creates its own database: the floor
//! never lowers.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use writerlock::pg::{Connection, Error, Settings};

const WRITER_LOCK: i64 = 1_279_607_879;

#[test]
fn settings_are_shown_in_effect() {
    let db = TestDb::new("settings");
    let report = run_json(&["pg", "settings", "--json", "--url", &db.url]);
    assert_eq!(report["all_in_effect"], true, "{report}");
    let shown = |name: &str| {
        report["settings"]
            .as_array()
            .expect("settings")
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {report}"))
            .clone()
    };
    // The ledger spec's expected SHOW output.
    for (name, value) in [
        ("lock_timeout", "10s"),
        ("idle_in_transaction_session_timeout", "15s"),
        ("statement_timeout", "1min"),
        ("agentihooks.ledger_writer_version", "1"),
    ] {
        let s = shown(name);
        assert_eq!(s["shown"], value, "{s}");
        assert_eq!(s["status"], "in_effect", "{s}");
    }
    assert_eq!(shown("keepalives")["status"], "client_side");

    // The address from the environment works the same, as a text table.
    let out = command(&["pg", "settings"])
        .env("WRITERLOCK_DATABASE_URL", &db.url)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "lock_timeout ",
        "idle_in_transaction_session_timeout ",
        "statement_timeout ",
    ] {
        let row = text
            .lines()
            .find(|l| l.starts_with(line))
            .unwrap_or_else(|| panic!("no {line} row in {text}"));
        assert!(row.ends_with("yes"), "{row}");
    }
    assert!(text.contains("1min"), "{text}");
}

/// As with psql, the libpq variables alone name the address: no --url, no
/// WRITERLOCK_DATABASE_URL.
#[test]
fn the_libpq_variables_alone_name_the_address() {
    let db = TestDb::new("pgvars");
    let rest = db.url.split_once("://").expect("a URL").1;
    let (user, rest) = rest.split_once('@').expect("a user");
    let (hostport, _) = rest.split_once('/').expect("a database");
    let (host, port) = hostport.rsplit_once(':').expect("a port");
    let out = command(&["pg", "floor", "--json"])
        .env("PGHOST", host)
        .env("PGPORT", port)
        .env("PGUSER", user)
        .env("PGDATABASE", &db.name)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(report["floor"].is_null(), "{report}");
    assert!(
        report.to_string().contains(&db.name),
        "the report does not name the database: {report}"
    );
}

#[test]
fn floor_and_setup_raise_but_never_lower() {
    let db = TestDb::new("floor");
    let fresh = run_json(&["pg", "floor", "--json", "--url", &db.url]);
    assert_eq!(fresh["table_exists"], false, "{fresh}");
    assert!(fresh["floor"].is_null());
    let text = run_ok(&["pg", "floor", "--url", &db.url]);
    assert!(
        text.contains("No stored floor") && text.contains("does not exist"),
        "{text}"
    );

    let setup = run_json(&["pg", "setup", "--json", "--url", &db.url]);
    assert!(setup["before"].is_null(), "{setup}");
    assert_eq!(setup["after"], 1);
    let floor = run_json(&["pg", "floor", "--json", "--url", &db.url]);
    assert_eq!(floor["table_exists"], true);
    assert_eq!(floor["floor"], 1);
    assert_eq!(
        run_ok(&["pg", "floor", "--url", &db.url]).lines().next(),
        Some("1")
    );

    // A row-less table says so.
    let mut plain = db.plain();
    plain
        .batch_execute("DELETE FROM writer_floor")
        .expect("delete the floor row");
    let text = run_ok(&["pg", "floor", "--url", &db.url]);
    assert!(text.contains("has no 'ledger' row"), "{text}");

    // Raised by hand, the setup keeps it: the floor never lowers.
    plain
        .batch_execute("INSERT INTO writer_floor VALUES ('ledger', 3)")
        .expect("raise the floor by hand");
    let setup = run_json(&["pg", "setup", "--json", "--url", &db.url]);
    assert_eq!(setup["before"], 3, "{setup}");
    assert_eq!(setup["after"], 3, "{setup}");
    let text = run_ok(&["pg", "setup", "--url", &db.url]);
    assert!(text.contains("never lowers"), "{text}");
    // On the server itself, not as the command reports it.
    let stored: Vec<(String, i32)> = plain
        .query("SELECT name, version FROM writer_floor", &[])
        .expect("SELECT from writer_floor")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(stored, vec![("ledger".to_string(), 3)]);

    // No command lowers it; the help says how to, by hand.
    let help = run_ok(&["pg", "setup", "--help"]);
    assert!(
        help.contains("UPDATE writer_floor SET version = <n> WHERE name = 'ledger'"),
        "{help}"
    );
    let pg_help = run_ok(&["pg", "--help"]);
    let commands: Vec<&str> = pg_help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(commands.contains(&"setup"), "{pg_help}");
    assert!(
        !commands.iter().any(|c| c.contains("lower")),
        "{commands:?}"
    );
}

fn holder_pids(report: &serde_json::Value, granted: bool) -> BTreeSet<i64> {
    report["holders"]
        .as_array()
        .expect("holders")
        .iter()
        .filter(|h| h["granted"] == granted)
        .map(|h| h["pid"].as_i64().expect("pid"))
        .collect()
}

#[test]
fn an_idle_holder_shows_in_holders_and_watch_idle() {
    let db = TestDb::new("idle");
    let empty = run_json(&["pg", "holders", "--json", "--url", &db.url]);
    assert!(empty["holders"].as_array().is_some_and(|h| h.is_empty()));
    assert!(run_ok(&["pg", "holders", "--url", &db.url]).contains("Nobody holds"));

    // A plain session takes the writer lock and goes idle in its transaction; a second one
    // queues behind it.
    let mut holder = db.plain();
    let holder_pid = TestDb::backend_pid(&mut holder);
    holder.batch_execute("BEGIN").expect("begin");
    holder
        .execute("SELECT pg_advisory_xact_lock($1)", &[&WRITER_LOCK])
        .expect("take the writer lock");
    let held_at = Instant::now();
    let mut waiter = db.plain();
    let waiter_pid = TestDb::backend_pid(&mut waiter);
    let waiting = std::thread::spawn(move || {
        waiter.batch_execute("BEGIN").expect("begin");
        waiter
            .execute("SELECT pg_advisory_xact_lock($1)", &[&WRITER_LOCK])
            .expect("the waiter gets the lock once the holder ends");
        waiter.batch_execute("COMMIT").expect("commit");
    });

    let report = eventually(Duration::from_secs(10), "holder and waiter listed", || {
        let r = run_json(&["pg", "holders", "--json", "--url", &db.url]);
        (r["holders"].as_array().map(Vec::len) == Some(2)).then_some(r)
    });
    assert_eq!(
        holder_pids(&report, true),
        BTreeSet::from([i64::from(holder_pid)])
    );
    assert_eq!(
        holder_pids(&report, false),
        BTreeSet::from([i64::from(waiter_pid)])
    );
    let first = &report["holders"][0];
    assert_eq!(first["granted"], true, "the holder comes first: {report}");
    assert_eq!(first["state"], "idle in transaction");
    assert_eq!(first["client_addr"], "127.0.0.1");
    assert!(first["in_state_s"].as_f64().is_some_and(|s| s >= 0.0));
    assert_eq!(report["holders"][1]["state"], "active");
    let text = run_ok(&["pg", "holders", "--url", &db.url]);
    assert!(
        text.contains(&holder_pid.to_string()) && text.contains("holds"),
        "{text}"
    );
    assert!(
        text.contains(&waiter_pid.to_string()) && text.contains("waits"),
        "{text}"
    );

    // Idle for over a second by now: every sample of the loop sees it.
    std::thread::sleep(Duration::from_millis(1300).saturating_sub(held_at.elapsed()));
    let out = run_ok(&[
        "pg",
        "watch-idle",
        "--interval",
        "1",
        "--for",
        "3",
        "--over",
        "1",
        "--json",
        "--url",
        &db.url,
    ]);
    let events = json_lines(&out);
    let samples: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["type"] == "sample").collect();
    assert_eq!(samples.len(), 3, "{out}");
    for s in &samples {
        assert_eq!(s["holders"][0]["pid"], holder_pid, "{s}");
        assert!(s["holders"][0]["in_state_s"]
            .as_f64()
            .is_some_and(|t| t > 1.0));
    }
    let summary = events.last().expect("a summary");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["samples"], 3);
    assert_eq!(summary["stuck_samples"], 3);
    assert_eq!(summary["window_s"], 3.0);
    assert_eq!(summary["stuck_minutes"], 0.05);
    // Stuck in every sample: all day long at this rate.
    assert_eq!(summary["minutes_per_day"], 1440.0);

    let text = run_ok(&[
        "pg",
        "watch-idle",
        "--interval",
        "1",
        "--for",
        "1",
        "--over",
        "1s",
        "--url",
        &db.url,
    ]);
    assert!(
        text.contains(&format!("pid {holder_pid}  idle in transaction for")),
        "{text}"
    );
    assert!(
        text.contains("1 of 1 samples") && text.contains("1440.0 minutes per day"),
        "{text}"
    );

    // Under the --over threshold, nothing counts.
    let quiet = json_lines(&run_ok(&[
        "pg",
        "watch-idle",
        "--interval",
        "1",
        "--for",
        "1",
        "--over",
        "1h",
        "--json",
        "--url",
        &db.url,
    ]));
    // A quiet sample still prints: a heartbeat, then the summary.
    assert_eq!(quiet.len(), 2, "{quiet:?}");
    assert_eq!(quiet[0]["type"], "heartbeat", "{quiet:?}");
    assert_eq!(quiet[0]["sample"], 1, "{quiet:?}");
    assert_eq!(quiet[0]["of"], 1, "{quiet:?}");
    assert_eq!(quiet[1]["stuck_samples"], 0);
    assert_eq!(quiet[1]["minutes_per_day"], 0.0);

    holder.batch_execute("COMMIT").expect("end the idle holder");
    waiting.join().expect("the waiter thread");
    let after = run_json(&["pg", "holders", "--json", "--url", &db.url]);
    assert!(
        after["holders"].as_array().is_some_and(|h| h.is_empty()),
        "{after}"
    );
}

#[test]
fn a_refused_writer_shows_while_connected() {
    let db = TestDb::new("refused");
    run_ok(&["pg", "setup", "--url", &db.url]);
    assert!(run_ok(&["pg", "refused", "--url", &db.url]).contains("No refused writer"));
    // Raise the floor by hand above this code's version: a current writer is now refused,
    // and its connection stays open.
    db.plain()
        .batch_execute("UPDATE writer_floor SET version = 2 WHERE name = 'ledger'")
        .expect("raise the floor");
    let mut writer = Connection::connect(&db.url, &Settings::new()).expect("a writer session");
    match writer.begin_write() {
        Err(Error::Refused { version, floor }) => assert_eq!((version, floor), (1, 2)),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let report = run_json(&["pg", "refused", "--json", "--url", &db.url]);
    let refused = report["refused"].as_array().expect("refused");
    assert_eq!(refused.len(), 1, "{report}");
    assert_eq!(refused[0]["pid"], writer.pid());
    assert_eq!(refused[0]["writer"], "127.0.0.1");
    assert_eq!(refused[0]["version"], 1);
    assert_eq!(refused[0]["floor"], 2);
    assert_eq!(
        refused[0]["refusal"],
        "ledger writer version 1 is below version 2, the oldest the shared database allows; \
         update its code and restart it"
    );
    let text = run_ok(&["pg", "refused", "--url", &db.url]);
    assert!(
        text.contains("127.0.0.1") && text.contains(&writer.pid().to_string()),
        "{text}"
    );
    assert_eq!(
        run_json(&["pg", "floor", "--json", "--url", &db.url])["floor"],
        2
    );

    writer.close().expect("close the refused writer");
    eventually(Duration::from_secs(10), "the refused writer gone", || {
        let r = run_json(&["pg", "refused", "--json", "--url", &db.url]);
        r["refused"]
            .as_array()
            .is_some_and(|a| a.is_empty())
            .then_some(())
    });
}

#[test]
fn unrecorded_bumps_are_printed_once_each() {
    let db = TestDb::new("bumps");
    // Before the setup the tables are missing: one clear line.
    let out = run(&[
        "pg",
        "watch-bumps",
        "--interval",
        "1",
        "--for",
        "1",
        "--url",
        &db.url,
    ]);
    let line = assert_one_line_error(&out);
    assert!(
        line.contains("does not exist") && line.contains("writerlock pg setup"),
        "{line}"
    );

    run_ok(&["pg", "setup", "--url", &db.url]);
    let mut plain = db.plain();
    plain
        .batch_execute(
            "INSERT INTO ledgers (slug, generation) VALUES ('a', 1), ('b', 1);
             INSERT INTO row_changes (slug, generation, row_key) VALUES ('b', 1, 'r1');",
        )
        .expect("two ledgers, one recorded");
    let mut child = command(&[
        "pg",
        "watch-bumps",
        "--interval",
        "1",
        "--for",
        "4",
        "--json",
        "--url",
        &db.url,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start watch-bumps");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next_event = || -> serde_json::Value {
        let line = lines.next().expect("another line").expect("read a line");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    // The first sample sees the never-recorded creation of 'a' (not 'b', which is recorded).
    let first = next_event();
    assert_eq!(
        (first["type"].as_str(), first["slug"].as_str()),
        (Some("bump"), Some("a"))
    );
    assert_eq!(first["generation"], 1);
    // A writer at the floor's version bumps 'a' without recording rows: unrecorded.
    plain
        .batch_execute(
            "SET agentihooks.ledger_writer_version = '1';
             UPDATE ledgers SET generation = 2 WHERE slug = 'a';",
        )
        .expect("bump a");
    let mut events = vec![first];
    loop {
        let e = next_event();
        let done = e["type"] == "summary";
        events.push(e);
        if done {
            break;
        }
    }
    let status = child.wait().expect("wait for watch-bumps");
    assert!(status.success(), "watch-bumps exited with {status}");
    let bumps: Vec<(String, i64)> = events
        .iter()
        .filter(|e| e["type"] == "bump")
        .map(|e| {
            (
                e["slug"].as_str().expect("slug").to_string(),
                e["generation"].as_i64().expect("generation"),
            )
        })
        .collect();
    // Each printed once, though every later sample sees 'a' 2 again.
    assert_eq!(
        bumps,
        [("a".to_string(), 1), ("a".to_string(), 2)],
        "{events:?}"
    );
    let summary = events.last().expect("summary");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["samples"], 4);
    assert_eq!(summary["unrecorded"], 2);

    let text = run_ok(&[
        "pg",
        "watch-bumps",
        "--interval",
        "1",
        "--for",
        "1",
        "--url",
        &db.url,
    ]);
    let first = text.lines().next().expect("a line");
    assert!(first.ends_with("  a  2"), "{text}");
    assert!(
        text.contains("1 unrecorded generations in 1 samples"),
        "{text}"
    );
}

#[test]
fn holders_show_each_sessions_application_name() {
    let db = TestDb::new("appname");
    run_ok(&["pg", "setup", "--url", &db.url]);
    // A writer session of this library names its program by default: this test binary.
    let mut writer = Connection::connect(&db.url, &Settings::new()).expect("a writer session");
    writer.begin_write().expect("take the writer lock");
    let program = std::env::args()
        .next()
        .and_then(|a| a.rsplit('/').next().map(str::to_string))
        .expect("argv[0]");
    let report = eventually(Duration::from_secs(10), "the writer listed", || {
        let r = run_json(&["pg", "holders", "--json", "--url", &db.url]);
        (r["holders"].as_array().map(Vec::len) == Some(1)).then_some(r)
    });
    assert_eq!(
        report["holders"][0]["application_name"],
        program.as_str(),
        "{report}"
    );
    let text = run_ok(&["pg", "holders", "--url", &db.url]);
    assert!(
        text.contains("application") && text.contains(&program),
        "{text}"
    );
    writer.rollback().expect("end the write");
}

/// A TLS-only server started for one test by `tests/pg-tls-cluster.sh`, stopped on drop.
struct TlsCluster {
    dir: TempDir,
    port: String,
}

impl TlsCluster {
    fn script() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pg-tls-cluster.sh")
    }

    fn start() -> TlsCluster {
        let dir = TempDir::new("tls");
        let out = std::process::Command::new(Self::script())
            .arg("start")
            .arg(dir.path().join("cluster"))
            .output()
            .expect("run tests/pg-tls-cluster.sh");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "the TLS cluster did not start: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = stdout
            .lines()
            .find_map(|l| l.strip_prefix("TLS_PG_PORT="))
            .expect("TLS_PG_PORT")
            .trim()
            .to_string();
        TlsCluster { dir, port }
    }

    fn cert(&self, name: &str) -> String {
        self.dir.file(&format!("cluster/certs/{name}"))
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(Self::script())
            .arg("stop")
            .arg(self.dir.path().join("cluster"))
            .status();
    }
}

/// `writerlock pg` reaches a server that admits only TLS, with sslmode=verify-full from the
/// URL or from the PGSSL* variables, and refuses an untrusted server with the cause.
#[test]
fn the_command_speaks_tls_with_verify_full() {
    let tls = TlsCluster::start();
    let home = TempDir::new("tls-home");
    let url = format!(
        "postgresql://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
        tls.port,
        tls.cert("ca.crt")
    );
    let out = command(&["pg", "settings", "--json", "--url", &url])
        .env("HOME", home.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["all_in_effect"], true, "{report}");
    let help = run_ok(&["pg", "--help"]);
    assert!(
        help.contains("sslmode") && help.contains("PGSSLROOTCERT"),
        "{help}"
    );

    // The libpq variables alone, a client certificate included.
    let out = command(&["pg", "settings"])
        .env("HOME", home.path())
        .env_remove("WRITERLOCK_DATABASE_URL")
        .env("PGHOST", "localhost")
        .env("PGPORT", &tls.port)
        .env("PGUSER", "tls_cert_user")
        .env("PGDATABASE", "postgres")
        .env("PGSSLMODE", "verify-full")
        .env("PGSSLROOTCERT", tls.cert("ca.crt"))
        .env("PGSSLCERT", tls.cert("client.crt"))
        .env("PGSSLKEY", tls.cert("client.key"))
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Another authority: refused, one line naming the cause and what to do.
    let url = format!(
        "postgresql://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
        tls.port,
        tls.cert("other-ca.crt")
    );
    let out = command(&["pg", "settings", "--url", &url])
        .env("HOME", home.path())
        .output()
        .expect("run");
    let line = assert_one_line_error(&out);
    assert!(line.contains("server certificate not verified"), "{line}");
    assert!(line.contains("sslrootcert"), "{line}");

    // sslmode=disable at a hostssl-only server: the hint says to turn TLS back on.
    let url = format!(
        "postgresql://postgres@localhost:{}/postgres?sslmode=disable",
        tls.port
    );
    let out = command(&["pg", "settings", "--url", &url])
        .env("HOME", home.path())
        .output()
        .expect("run");
    let line = assert_one_line_error(&out);
    assert!(line.contains("no encryption"), "{line}");
    assert!(line.contains("instead of disable"), "{line}");
}
