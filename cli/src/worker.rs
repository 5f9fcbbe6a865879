//! The processes the demo starts (`writerlock demo-worker`), and `writerlock hold`.
//!
//! The demo re-executes this program for each worker rather than forking: a fork of a
//! process with threads can leave the child stuck on a lock another thread held (SQLite's
//! mutex, malloc's). A worker opens its connection, prints `ready`, reads `go <time>` on
//! stdin and sleeps until that time (CLOCK_MONOTONIC), so that every worker starts at once,
//! then publishes and prints one JSON line per publish.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use clap::ValueEnum;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use writerlock::{BusyKind, Wait, WriterQueue};

use crate::error::CliError;

/// How a demo publish starts its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Through the write queue: the writer turn, then `BEGIN IMMEDIATE`.
    Queue,
    /// A plain deferred `BEGIN` with a busy timeout.
    Plain,
    /// `BEGIN IMMEDIATE` with a busy timeout, and no queue.
    Immediate,
}

impl Mode {
    /// The mode's name on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Queue => "queue",
            Mode::Plain => "plain",
            Mode::Immediate => "immediate",
        }
    }
}

/// The result of one publish, as a worker reports it (one JSON line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Publish {
    /// The worker's number (from 0).
    pub worker: u32,
    /// The publish's number within the worker (from 0).
    pub publish: u32,
    /// Whether it committed.
    pub ok: bool,
    /// Why it failed: the error's text, prefixed by the statement that failed for SQLite's
    /// own errors (`UPDATE: database is locked`).
    pub error: Option<String>,
    /// When it started (CLOCK_MONOTONIC nanoseconds, comparable across processes).
    pub start_ns: u64,
    /// When it held SQLite's write lock (after `BEGIN IMMEDIATE`, or after the first write
    /// under a deferred `BEGIN`).
    pub locked_ns: Option<u64>,
    /// When it committed or gave up.
    pub end_ns: u64,
    /// How long it spent in its own work (the hold between its read and its write).
    pub slept_ns: u64,
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the machine.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `CLOCK_MONOTONIC` reads `at_ns`. Every worker wakes on the same timer tick,
/// so none is halfway into its first publish when the others wake.
pub fn sleep_until_ns(at_ns: u64) {
    let at = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; EINTR only ends the sleep early, and the loop retries.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &at,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// The demo's tables.
pub const SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS writerlock_demo_counter (mode TEXT PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS writerlock_demo_publishes (
    mode TEXT NOT NULL, worker INTEGER NOT NULL, publish INTEGER NOT NULL, seen INTEGER NOT NULL);";

/// Arguments of one demo worker.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The database.
    #[arg(long)]
    pub db: PathBuf,
    /// How it starts transactions.
    #[arg(long, value_enum)]
    pub mode: Mode,
    /// Its number.
    #[arg(long)]
    pub worker: u32,
    /// How many publishes it makes.
    #[arg(long)]
    pub writes: u32,
    /// Milliseconds between a publish's read and its write.
    #[arg(long)]
    pub hold_ms: u64,
    /// SQLite busy timeout for `plain` and `immediate`, in milliseconds.
    #[arg(long)]
    pub busy_timeout_ms: u64,
    /// The queue's transaction wait, in milliseconds.
    #[arg(long)]
    pub wait_ms: u64,
}

fn sqlite_err(path: &Path, source: rusqlite::Error) -> CliError {
    CliError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs one demo worker.
pub fn run_worker(args: &WorkerArgs) -> Result<ExitCode, CliError> {
    let conn = Connection::open(&args.db).map_err(|e| sqlite_err(&args.db, e))?;
    let queue = WriterQueue::new(&args.db);
    warm_up(&conn, &queue, args)?;
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "ready")?;
    stdout.flush()?;
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line)?;
    let Some(start_at) = line
        .trim()
        .strip_prefix("go ")
        .and_then(|t| t.parse::<u64>().ok())
    else {
        return Err(CliError::Worker {
            worker: args.worker,
            reason: "stdin closed before the start signal".to_string(),
        });
    };
    sleep_until_ns(start_at);
    for n in 0..args.writes {
        let record = publish(&conn, &queue, args, n);
        writeln!(stdout, "{}", serde_json::to_string(&record)?)?;
        stdout.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Before the clock starts, does once what a long-running writer has done long before its
/// next publish: reads the schema and, in queue mode, opens the lock files (a turn taken and
/// given back). Otherwise a process descheduled while opening them, with many more
/// processes than cores, would count as passed over by every writer it started before.
fn warm_up(conn: &Connection, queue: &WriterQueue, args: &WorkerArgs) -> Result<(), CliError> {
    conn.busy_timeout(Duration::from_secs(30))
        .and_then(|()| {
            conn.query_row("SELECT count(*) FROM writerlock_demo_counter", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .map_err(|e| sqlite_err(&args.db, e))?;
    if args.mode == Mode::Queue {
        queue.take(BusyKind::Transaction, &Wait::cli_transaction())?;
        queue.release()?;
    }
    Ok(())
}

/// What failed in a publish: the statement and SQLite's message.
fn failed(stage: &str, err: rusqlite::Error) -> String {
    format!(
        "{stage}: {}",
        writerlock::sqlite::failure_from_rusqlite(err).message
    )
}

/// A publish's work inside its transaction: read the counter, hold, write it back and log
/// the publish. Returns when the write took SQLite's write lock.
fn work(conn: &Connection, args: &WorkerArgs, n: u32, slept: &mut u64) -> Result<u64, String> {
    let mode = args.mode.name();
    let seen: i64 = conn
        .query_row(
            "SELECT version FROM writerlock_demo_counter WHERE mode = ?1",
            [mode],
            |r| r.get(0),
        )
        .map_err(|e| failed("SELECT", e))?;
    let hold = Duration::from_millis(args.hold_ms);
    std::thread::sleep(hold);
    *slept = hold.as_nanos() as u64;
    conn.execute(
        "UPDATE writerlock_demo_counter SET version = ?1 WHERE mode = ?2",
        rusqlite::params![seen + 1, mode],
    )
    .map_err(|e| failed("UPDATE", e))?;
    let locked = now_ns();
    conn.execute(
        "INSERT INTO writerlock_demo_publishes (mode, worker, publish, seen) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![mode, args.worker, n, seen],
    )
    .map_err(|e| failed("INSERT", e))?;
    Ok(locked)
}

fn publish(conn: &Connection, queue: &WriterQueue, args: &WorkerArgs, n: u32) -> Publish {
    let mut record = Publish {
        worker: args.worker,
        publish: n,
        ok: false,
        error: None,
        start_ns: now_ns(),
        locked_ns: None,
        end_ns: 0,
        slept_ns: 0,
    };
    let outcome = match args.mode {
        Mode::Queue => publish_queued(conn, queue, args, n, &mut record),
        Mode::Plain => publish_plain(conn, args, n, "BEGIN", &mut record),
        Mode::Immediate => publish_plain(conn, args, n, "BEGIN IMMEDIATE", &mut record),
    };
    record.end_ns = now_ns();
    match outcome {
        Ok(()) => record.ok = true,
        Err(text) => record.error = Some(text),
    }
    record
}

fn publish_queued(
    conn: &Connection,
    queue: &WriterQueue,
    args: &WorkerArgs,
    n: u32,
    record: &mut Publish,
) -> Result<(), String> {
    let wait = Wait::transaction(Duration::from_millis(args.wait_ms));
    queue.begin(conn, &wait).map_err(|e| e.to_string())?;
    record.locked_ns = Some(now_ns());
    if let Err(text) = work(conn, args, n, &mut record.slept_ns) {
        let _ = queue.rollback(conn);
        return Err(text);
    }
    if let Err(err) = queue.commit(conn) {
        if !conn.is_autocommit() {
            let _ = queue.rollback(conn);
        }
        return Err(err.to_string());
    }
    Ok(())
}

fn publish_plain(
    conn: &Connection,
    args: &WorkerArgs,
    n: u32,
    begin: &str,
    record: &mut Publish,
) -> Result<(), String> {
    conn.busy_timeout(Duration::from_millis(args.busy_timeout_ms))
        .map_err(|e| failed("busy_timeout", e))?;
    conn.execute_batch(begin).map_err(|e| failed(begin, e))?;
    let immediate = begin != "BEGIN";
    if immediate {
        record.locked_ns = Some(now_ns());
    }
    let ended = work(conn, args, n, &mut record.slept_ns).and_then(|locked| {
        if !immediate {
            record.locked_ns = Some(locked);
        }
        conn.execute_batch("COMMIT")
            .map_err(|e| failed("COMMIT", e))
    });
    if ended.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    ended
}

/// Arguments of `writerlock hold`.
#[derive(Debug, clap::Args)]
pub struct HoldArgs {
    /// The SQLite database whose writer turn to take (created if missing).
    pub db: PathBuf,
    /// How long to hold the turn once taken.
    #[arg(long = "for", value_name = "DURATION", value_parser = crate::duration::parse, default_value = "10s")]
    pub hold_for: Duration,
    /// How long to wait for the turn.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "25s")]
    pub wait: Duration,
    /// Also give the turn back as soon as stdin closes.
    #[arg(long)]
    pub until_eof: bool,
}

/// Takes the writer turn (and SQLite's write lock with `BEGIN IMMEDIATE`), prints
/// `holding PID`, holds it, commits and prints `released`.
pub fn run_hold(args: &HoldArgs) -> Result<ExitCode, CliError> {
    let conn = Connection::open(&args.db).map_err(|e| sqlite_err(&args.db, e))?;
    let queue = WriterQueue::new(&args.db);
    let wait = Wait::transaction(args.wait).with_setting("writerlock hold --wait");
    queue.begin(&conn, &wait)?;
    crate::output::print_line(&format!("holding {}", std::process::id()))?;
    if args.until_eof {
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = io::Read::read_to_end(&mut io::stdin().lock(), &mut sink);
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(args.hold_for);
    } else {
        std::thread::sleep(args.hold_for);
    }
    queue.commit(&conn)?;
    crate::output::print_line("released")?;
    Ok(ExitCode::SUCCESS)
}
