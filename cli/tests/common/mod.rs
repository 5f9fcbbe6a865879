//! Helpers for the command's tests: run the real `writerlock` binary, temporary
//! directories, and a database of its own per Postgres test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_writerlock")
}

/// A `writerlock` command with these arguments, without WRITERLOCK_DATABASE_URL.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args).env_remove("WRITERLOCK_DATABASE_URL");
    for var in ["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE"] {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs `writerlock ARGS` to the end.
pub fn run(args: &[&str]) -> Output {
    command(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the writerlock binary")
}

/// Runs `writerlock ARGS`, asserts success, and returns stdout.
pub fn run_ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "writerlock {args:?} failed with {}: stdout {} stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs `writerlock ARGS --json`-style commands and parses stdout as one JSON document.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let text = run_ok(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Parses JSON lines.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// Asserts that a command failed with exactly one line on stderr, and returns that line.
pub fn assert_one_line_error(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure, got success: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "stderr is not one line: {stderr:?}");
    assert!(lines[0].starts_with("writerlock: "), "{stderr}");
    lines[0].to_string()
}

/// Asserts that a `--json` command failed with one line on stderr and the same text as a JSON
/// error object on stdout (`{"error": {"message": ..., "exit_status": ...}}`, the status the
/// command exited with); returns the stderr line and the object.
pub fn assert_json_error(out: &Output) -> (String, serde_json::Value) {
    let line = assert_one_line_error(out);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON error object on stdout ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(
        format!(
            "writerlock: {}",
            doc["error"]["message"].as_str().expect("message")
        ),
        line
    );
    assert_eq!(
        doc["error"]["exit_status"].as_i64(),
        out.status.code().map(i64::from),
        "{doc}"
    );
    (line, doc)
}

/// Polls `f` until it returns `Some`, or panics with `what` after `limit`.
pub fn eventually<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > limit {
            panic!("{what} did not happen within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A temporary directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a new one.
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "writerlock-cli-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside it, as a string.
    pub fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The admin address of the test server; a test without it fails loudly.
pub fn admin_url() -> String {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "TEST_DATABASE_URL is not set: the `writerlock pg` tests need a real PostgreSQL \
             server. Run them with `make test`, or `tests/with-postgres.sh cargo test -p \
             writerlock-cli` (which starts a throwaway server), or start one with \
             `tests/pg-cluster.sh start` and export the TEST_DATABASE_URL=... line it prints"
        ),
    }
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    if !url.contains("://") {
        // libpq key=value pairs
        let kept: Vec<&str> = url
            .split_whitespace()
            .filter(|kv| !kv.starts_with("dbname="))
            .collect();
        return format!("{} dbname={db}", kept.join(" "));
    }
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match base[after_scheme..].find('/') {
        Some(slash) => &base[..after_scheme + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}

/// A database of its own for one test (the floor never lowers), dropped at the end.
pub struct TestDb {
    /// Its name.
    pub name: String,
    /// Its address.
    pub url: String,
    admin: postgres::Client,
}

impl TestDb {
    /// Creates a fresh database.
    pub fn new(tag: &str) -> TestDb {
        let admin_url = admin_url();
        let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach TEST_DATABASE_URL: {e}"));
        let name = format!(
            "wlcli_{tag}_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("drop a leftover test database");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create the test database");
        let url = with_database(&admin_url, &name);
        TestDb { name, url, admin }
    }

    /// A plain session on the test database (no writer settings).
    pub fn plain(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("plain connect")
    }

    /// Its backend pid.
    pub fn backend_pid(client: &mut postgres::Client) -> i32 {
        client
            .query_one("SELECT pg_backend_pid()", &[])
            .expect("pg_backend_pid")
            .get(0)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = self.admin.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}
