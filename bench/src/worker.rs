//! The worker process: `writerlock-bench worker CONFIG`. It opens its
//! connection, prints a ready line, waits for the start instant on stdin,
//! sleeps until CLOCK_MONOTONIC reaches it and runs its transactions. Then
//! it prints a done line, waits until the coordinator closes its stdin
//! (every worker is done), and prints one JSON line with every
//! transaction's timestamps (nanoseconds after the start instant).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};
use serde_json::{json, Value};
use writerlock::{BusyKind, Strategy, Wait, WriterQueue};

use crate::clock::{now_ns, sleep_until};
use crate::driverlock::DriverLock;
use crate::error::{BenchError, Result};

/// How a worker takes its turn to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Plain deferred `BEGIN` with a busy timeout (baseline).
    Deferred,
    /// `BEGIN IMMEDIATE` with SQLite's busy handler alone (baseline).
    Immediate,
    /// The queue with [`Strategy::Poll`], Exponential's driver protocol.
    Poll,
    /// The queue with [`Strategy::Handoff`], the futex hand-off page.
    Handoff,
    /// Exponential's driver protocol written in the bench: lock files only, no page.
    DriverFlock,
    /// A plain `flock()` loop: no queue file, no yield.
    HotFlock,
}

impl Mode {
    /// Every mode, in table order.
    pub const ALL: [Mode; 6] = [
        Mode::Deferred,
        Mode::Immediate,
        Mode::Poll,
        Mode::Handoff,
        Mode::DriverFlock,
        Mode::HotFlock,
    ];

    /// The short name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Deferred => "deferred",
            Mode::Immediate => "immediate",
            Mode::Poll => "queue-poll",
            Mode::Handoff => "queue-handoff",
            Mode::DriverFlock => "driver-flock",
            Mode::HotFlock => "flock-no-yield",
        }
    }

    /// What the mode is, for table rows.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Deferred => "deferred BEGIN + busy timeout",
            Mode::Immediate => "BEGIN IMMEDIATE + busy handler",
            Mode::Poll => "queue, Strategy::Poll (driver protocol)",
            Mode::Handoff => "queue, Strategy::Handoff",
            Mode::DriverFlock => "flock() loop, driver protocol (no page)",
            Mode::HotFlock => "flock() hot loop, no yield",
        }
    }

    /// Parses [`Mode::name`].
    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// What one transaction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A publish: reads a counter, inserts rows, bumps the counter.
    Publish,
    /// Inserts rows only.
    Insert,
}

/// One worker's instructions.
#[derive(Debug, Clone)]
pub struct Config {
    /// How it takes its turn.
    pub mode: Mode,
    /// The database.
    pub db: PathBuf,
    /// Its index in the run.
    pub id: usize,
    /// Run this many transactions (or until `duration`).
    pub count: Option<u64>,
    /// Run transactions until this long after the start instant.
    pub duration: Option<Duration>,
    /// What each transaction does.
    pub shape: Shape,
    /// Rows inserted per transaction.
    pub rows: u32,
    /// Time spent inside each transaction after its writes (a sleep).
    pub hold: Duration,
    /// Pause between two transactions.
    pub think: Duration,
    /// Wait limit of a counted run (queue wait or busy timeout).
    pub limit: Duration,
    /// Use `take`/`release` around the host's own `BEGIN IMMEDIATE`
    /// instead of `begin`/`commit` (queue modes).
    pub take_api: bool,
    /// Report the turn intervals too (for the overlap check).
    pub turns: bool,
    /// Run the worker in Python (bench/hosts/py_worker.py, modes `immediate`
    /// and `queue-handoff`, timed runs of one-row transactions only).
    pub python: bool,
}

impl Config {
    /// A counted or timed run's defaults: one row, no hold, no think time,
    /// the driver's 25 s wait.
    pub fn new(mode: Mode, db: &Path, id: usize) -> Config {
        Config {
            mode,
            db: db.to_path_buf(),
            id,
            count: None,
            duration: None,
            shape: Shape::Insert,
            rows: 1,
            hold: Duration::ZERO,
            think: Duration::ZERO,
            limit: writerlock::wait::TRANSACTION_WAIT,
            take_api: false,
            turns: false,
            python: false,
        }
    }

    /// The configuration as one JSON argument.
    pub fn to_json(&self) -> String {
        json!({
            "mode": self.mode.name(),
            "db": self.db.to_string_lossy(),
            "id": self.id,
            "count": self.count,
            "duration_ns": self.duration.map(|d| d.as_nanos() as u64),
            "shape": match self.shape { Shape::Publish => "publish", Shape::Insert => "insert" },
            "rows": self.rows,
            "hold_ns": self.hold.as_nanos() as u64,
            "think_ns": self.think.as_nanos() as u64,
            "limit_ns": self.limit.as_nanos() as u64,
            "take_api": self.take_api,
            "turns": self.turns,
            "python": self.python,
        })
        .to_string()
    }

    /// Reads [`Config::to_json`].
    pub fn from_json(text: &str) -> Result<Config> {
        let v: Value = serde_json::from_str(text).map_err(|e| BenchError::Config(e.to_string()))?;
        let field = |name: &str| {
            v.get(name)
                .ok_or_else(|| BenchError::Config(format!("{name} missing")))
        };
        let u = |name: &str| -> Result<u64> {
            field(name)?
                .as_u64()
                .ok_or_else(|| BenchError::Config(format!("{name} is not a number")))
        };
        let mode_name = field("mode")?.as_str().unwrap_or_default();
        let mode = Mode::parse(mode_name)
            .ok_or_else(|| BenchError::Config(format!("unknown mode {mode_name}")))?;
        let shape = match field("shape")?.as_str() {
            Some("publish") => Shape::Publish,
            _ => Shape::Insert,
        };
        Ok(Config {
            mode,
            db: PathBuf::from(field("db")?.as_str().unwrap_or_default()),
            id: u("id")? as usize,
            count: v.get("count").and_then(Value::as_u64),
            duration: v
                .get("duration_ns")
                .and_then(Value::as_u64)
                .map(Duration::from_nanos),
            shape,
            rows: u("rows")? as u32,
            hold: Duration::from_nanos(u("hold_ns")?),
            think: Duration::from_nanos(u("think_ns")?),
            limit: Duration::from_nanos(u("limit_ns")?),
            take_api: field("take_api")?.as_bool().unwrap_or(false),
            turns: field("turns")?.as_bool().unwrap_or(false),
            python: v.get("python").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

/// Timestamps of one committed transaction (CLOCK_MONOTONIC ns).
struct Times {
    call: u64,
    granted: u64,
    turn_start: u64,
    turn_end: u64,
    released: u64,
}

impl Times {
    /// A transaction whose turn began with its `BEGIN`, released now.
    fn of_begin(call: u64, granted: u64, turn_end: u64) -> Times {
        Times {
            call,
            granted,
            turn_start: granted,
            turn_end,
            released: now_ns(),
        }
    }
}

/// A transaction that did not commit.
struct Fail {
    at: u64,
    busy: bool,
    message: String,
}

enum Locker {
    Plain,
    Queue(Box<WriterQueue>),
    Driver(DriverLock),
}

struct Worker {
    cfg: Config,
    conn: Connection,
    locker: Locker,
    payload: String,
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn sql_fail(err: rusqlite::Error) -> Fail {
    Fail {
        at: now_ns(),
        busy: is_busy(&err),
        message: err.to_string(),
    }
}

fn queue_fail(err: writerlock::Error) -> Fail {
    Fail {
        at: now_ns(),
        busy: err.busy().is_some(),
        message: err.to_string(),
    }
}

fn wait_for(limit: Duration) -> Wait {
    if limit >= writerlock::wait::MIN_TRANSACTION_WAIT {
        Wait::transaction(limit)
    } else {
        Wait::statement(limit)
    }
}

impl Worker {
    fn open(cfg: Config) -> Result<Worker> {
        let conn = Connection::open(&cfg.db)
            .map_err(|e| BenchError::sqlite(format!("opening {}", cfg.db.display()), e))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL")
            .map_err(|e| BenchError::sqlite("PRAGMA synchronous", e))?;
        let locker = match cfg.mode {
            Mode::Deferred | Mode::Immediate => Locker::Plain,
            Mode::Poll => Locker::Queue(Box::new(WriterQueue::with_strategy(
                &cfg.db,
                Strategy::Poll,
            ))),
            Mode::Handoff => Locker::Queue(Box::new(WriterQueue::with_strategy(
                &cfg.db,
                Strategy::Handoff,
            ))),
            Mode::DriverFlock => Locker::Driver(
                DriverLock::queued(&cfg.db)
                    .map_err(|e| BenchError::io("opening the lock files", e))?,
            ),
            Mode::HotFlock => Locker::Driver(
                DriverLock::hot(&cfg.db)
                    .map_err(|e| BenchError::io("opening the lock files", e))?,
            ),
        };
        Ok(Worker {
            cfg,
            conn,
            locker,
            payload: "x".repeat(64),
        })
    }

    fn body(&self, seq: u64) -> rusqlite::Result<()> {
        if self.cfg.shape == Shape::Publish {
            let mut read = self
                .conn
                .prepare_cached("SELECT value FROM counters WHERE name = 'publish'")?;
            let _: i64 = read.query_row([], |r| r.get(0))?;
        }
        self.write(seq)
    }

    fn write(&self, seq: u64) -> rusqlite::Result<()> {
        let mut insert = self
            .conn
            .prepare_cached("INSERT INTO t (writer, seq, payload) VALUES (?1, ?2, ?3)")?;
        for _ in 0..self.cfg.rows {
            insert.execute(rusqlite::params![
                self.cfg.id as i64,
                seq as i64,
                self.payload
            ])?;
        }
        if self.cfg.shape == Shape::Publish {
            self.conn
                .prepare_cached("UPDATE counters SET value = value + 1 WHERE name = 'publish'")?
                .execute([])?;
        }
        Ok(())
    }

    fn hold(&self) {
        if !self.cfg.hold.is_zero() {
            std::thread::sleep(self.cfg.hold);
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    /// COMMIT; on failure rolls back and reports the COMMIT's error.
    fn commit_or_roll_back(&self) -> Result<(), Fail> {
        self.conn.execute_batch("COMMIT").map_err(|e| {
            let fail = sql_fail(e);
            self.rollback();
            fail
        })
    }

    /// Runs the body inside an open transaction and commits with `commit`.
    fn finish(&self, seq: u64) -> std::result::Result<(), Fail> {
        if let Err(e) = self.body(seq) {
            let fail = sql_fail(e);
            self.rollback();
            return Err(fail);
        }
        self.hold();
        Ok(())
    }

    fn transaction(&mut self, seq: u64, limit: Duration) -> std::result::Result<Times, Fail> {
        let call = now_ns();
        let busy_ms = limit.as_millis().max(1) as u64;
        match &self.locker {
            Locker::Plain if self.cfg.mode == Mode::Deferred => {
                let _ = self.conn.busy_timeout(Duration::from_millis(busy_ms));
                self.conn.execute_batch("BEGIN").map_err(sql_fail)?;
                // The write lock comes with the first write: read, then write.
                let first = (|| {
                    if self.cfg.shape == Shape::Publish {
                        let mut read = self
                            .conn
                            .prepare_cached("SELECT value FROM counters WHERE name = 'publish'")?;
                        let _: i64 = read.query_row([], |r| r.get(0))?;
                    }
                    self.write(seq)
                })();
                if let Err(e) = first {
                    let fail = sql_fail(e);
                    self.rollback();
                    return Err(fail);
                }
                let granted = now_ns();
                self.hold();
                let turn_end = now_ns();
                self.commit_or_roll_back()?;
                Ok(Times::of_begin(call, granted, turn_end))
            }
            Locker::Plain => {
                let _ = self.conn.busy_timeout(Duration::from_millis(busy_ms));
                self.conn
                    .execute_batch("BEGIN IMMEDIATE")
                    .map_err(sql_fail)?;
                let granted = now_ns();
                self.finish(seq)?;
                let turn_end = now_ns();
                self.commit_or_roll_back()?;
                Ok(Times::of_begin(call, granted, turn_end))
            }
            Locker::Queue(queue) if self.cfg.take_api => {
                let waited = queue
                    .take(BusyKind::Transaction, &wait_for(limit))
                    .map_err(queue_fail)?;
                let turn_start = now_ns();
                let left = limit.saturating_sub(waited).max(Duration::from_millis(1));
                let _ = self.conn.busy_timeout(left);
                if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
                    let _ = queue.release();
                    return Err(sql_fail(e));
                }
                let granted = now_ns();
                if let Err(f) = self.finish(seq) {
                    let _ = queue.release();
                    return Err(f);
                }
                if let Err(e) = self.conn.execute_batch("COMMIT") {
                    let fail = sql_fail(e);
                    self.rollback();
                    let _ = queue.release();
                    return Err(fail);
                }
                let turn_end = now_ns();
                queue.release().map_err(queue_fail)?;
                Ok(Times {
                    call,
                    granted,
                    turn_start,
                    turn_end,
                    released: now_ns(),
                })
            }
            Locker::Queue(queue) => {
                queue
                    .begin(&self.conn, &wait_for(limit))
                    .map_err(queue_fail)?;
                let granted = now_ns();
                if let Err(f) = self.finish(seq) {
                    let _ = queue.rollback(&self.conn);
                    return Err(f);
                }
                let turn_end = now_ns();
                if let Err(e) = queue.commit(&self.conn) {
                    let fail = queue_fail(e);
                    let _ = queue.rollback(&self.conn);
                    return Err(fail);
                }
                Ok(Times::of_begin(call, granted, turn_end))
            }
            Locker::Driver(_) => self.driver_transaction(seq, limit, call),
        }
    }

    fn driver_transaction(
        &mut self,
        seq: u64,
        limit: Duration,
        call: u64,
    ) -> std::result::Result<Times, Fail> {
        let Locker::Driver(lock) = &mut self.locker else {
            return Err(Fail {
                at: now_ns(),
                busy: false,
                message: "not a flock() writer".into(),
            });
        };
        match lock.acquire(limit) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Fail {
                    at: now_ns(),
                    busy: true,
                    message: "database is busy: the flock() wait ran out".into(),
                })
            }
            Err(e) => {
                return Err(Fail {
                    at: now_ns(),
                    busy: false,
                    message: format!("flock: {e}"),
                })
            }
        }
        let turn_start = now_ns();
        let left = limit
            .saturating_sub(Duration::from_nanos(turn_start - call))
            .max(Duration::from_millis(1));
        let _ = self.conn.busy_timeout(left);
        let result = (|| {
            self.conn
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(sql_fail)?;
            let granted = now_ns();
            self.finish(seq)?;
            self.commit_or_roll_back()?;
            Ok(granted)
        })();
        let turn_end = now_ns();
        if let Locker::Driver(lock) = &self.locker {
            let _ = lock.release();
        }
        let granted = result?;
        Ok(Times {
            call,
            granted,
            turn_start,
            turn_end,
            released: now_ns(),
        })
    }
}

#[derive(Default)]
struct Record {
    call: Vec<i64>,
    granted: Vec<i64>,
    released: Vec<i64>,
    turn_start: Vec<i64>,
    turn_end: Vec<i64>,
    failures: Vec<Value>,
    censored: Vec<[i64; 2]>,
}

/// The worker's entry point: `writerlock-bench worker CONFIG`.
pub fn main(config: &str) -> Result<()> {
    let cfg = Config::from_json(config)?;
    let mut worker = Worker::open(cfg.clone())?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{}", json!({"ready": std::process::id()}))
        .and_then(|()| out.flush())
        .map_err(|e| BenchError::io("writing the ready line", e))?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| BenchError::io("reading the start instant", e))?;
    let start: u64 = line
        .trim()
        .parse()
        .map_err(|_| BenchError::Config(format!("bad start instant {line:?}")))?;
    sleep_until(start);

    let end = cfg.duration.map(|d| start + d.as_nanos() as u64);
    let rel = |t: u64| t as i64 - start as i64;
    let mut rec = Record::default();
    let mut seq = 0u64;
    loop {
        if cfg.count.is_some_and(|c| seq >= c) {
            break;
        }
        let now = now_ns();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        let limit = match end {
            Some(e) => Duration::from_nanos(e - now),
            None => cfg.limit,
        };
        let call = now_ns();
        match worker.transaction(seq, limit) {
            Ok(t) => {
                rec.call.push(rel(t.call));
                rec.granted.push(rel(t.granted));
                rec.released.push(rel(t.released));
                if cfg.turns {
                    rec.turn_start.push(rel(t.turn_start));
                    rec.turn_end.push(rel(t.turn_end));
                }
            }
            Err(f) if f.busy && end.is_some_and(|e| f.at + 2_000_000 >= e) => {
                // Still waiting when the run ended: a censored wait.
                rec.censored.push([rel(call), rel(f.at)]);
            }
            Err(f) => rec.failures.push(json!({
                "call": rel(call),
                "at": rel(f.at),
                "busy": f.busy,
                "error": f.message,
            })),
        }
        seq += 1;
        if !cfg.think.is_zero() {
            std::thread::sleep(cfg.think);
        }
    }
    // Stay alive, doing nothing, until every worker is done: a process
    // tearing down (closing SQLite, unmapping, exiting) must not compete
    // with the writers still running.
    writeln!(out, "{}", json!({"done": rec.granted.len()}))
        .and_then(|()| out.flush())
        .map_err(|e| BenchError::io("writing the done line", e))?;
    let mut rest = String::new();
    let _ = std::io::stdin().lock().read_line(&mut rest);
    let result = json!({
        "id": cfg.id,
        "mode": cfg.mode.name(),
        "pid": std::process::id(),
        "call": rec.call,
        "granted": rec.granted,
        "released": rec.released,
        "turn_start": rec.turn_start,
        "turn_end": rec.turn_end,
        "failures": rec.failures,
        "censored": rec.censored,
    });
    serde_json::to_writer(&mut out, &result)
        .map_err(|e| BenchError::io("writing the result", e.into()))?;
    writeln!(out)
        .and_then(|()| out.flush())
        .map_err(|e| BenchError::io("writing the result", e))?;
    Ok(())
}
