//! `writerlock demo`: Exponential's contention case (many editors publishing at once),
//! measured.
//!
//! Many processes publish at once on one SQLite database (each publish reads a counter,
//! holds a few milliseconds, writes it back and logs itself), first through the write
//! queue, then with a plain deferred `BEGIN`, then with `BEGIN IMMEDIATE` and a busy
//! timeout alone. Workers are fresh processes of this program (`writerlock demo-worker`),
//! started before the clock runs and released together.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde::Serialize;
use writerlock::{Wait, WriterQueue};

use crate::duration::human;
use crate::error::CliError;
use crate::output::{ms, secs, Align, Progress, Table};
use crate::worker::{now_ns, Mode, Publish, SCHEMA};

/// The long help of the subcommand.
pub const DEMO_HELP: &str = "\
Runs the contention case of Exponential's SQLite documentation on a SQLite database: N \
processes publish W times each, all at once. Each publish reads a counter, holds for --hold-ms (its work), writes the counter \
back and logs itself, in one transaction. The same load runs in each mode:

  queue      the write queue: the writer turn (an exclusive flock() on
             <db>.writer-lock), then BEGIN IMMEDIATE, waiting up to --wait
             (25 s, like SQLiteTransactionWait)
  plain      a deferred BEGIN with a busy timeout (--busy-timeout-ms, 5000 ms):
             a transaction whose snapshot another writer changed fails at once
             with \"database is locked\", however long the busy timeout
  immediate  BEGIN IMMEDIATE with the same busy timeout and no queue: SQLite's
             busy handler sleeps and retries, in no order

The table shows, per mode: publishes committed and failed (the distinct errors and how \
often each was seen are listed below it), the total time from the start signal to the last \
publish, and wait p50/p99/max over committed publishes, where a publish's wait is its whole \
duration less its own work (the hold): the time it spent waiting for locks.

\"passed over\" is the longest any publish was passed over: for each publish, the number of \
publishes that arrived later (started after it) and committed before it committed or gave \
up; the column shows the largest. A first-come, first-served lock keeps it near zero.

For the queue mode it also prints the total time against the serial sum: the time the \
committed transactions take one after another (each from holding the lock to its commit). \
Afterwards the database is checked: every committed publish must be logged in it, and the \
counter must equal the number of commits (no lost update).

Workers are separate processes of this program, started with `writerlock demo-worker` \
(re-executed, not forked). Without --db the database lives in a new temporary directory \
that is removed afterwards.";

/// Arguments of `writerlock demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The SQLite database to run on (default: a new temporary directory, removed afterwards).
    /// The demo creates and resets its own tables (writerlock_demo_*) in it.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// How many processes publish at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub processes: u32,
    /// How many times each process publishes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub writes: u32,
    /// Milliseconds each publish holds between its read and its write (its work).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub hold_ms: u64,
    /// The modes to run, in order, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "queue,plain,immediate"
    )]
    pub modes: Vec<Mode>,
    /// SQLite busy timeout of the plain and immediate modes, in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub busy_timeout_ms: u64,
    /// The queue mode's transaction wait (below 1 s raised to 1 s).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "25s")]
    pub wait: Duration,
    /// Whether to print JSON: the command line's global `--json`.
    #[arg(skip)]
    pub json: bool,
}

/// One distinct error and how often it was seen.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorCount {
    /// The error's text.
    pub error: String,
    /// How many publishes failed with it.
    pub count: usize,
}

/// The results of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeReport {
    /// The mode.
    pub mode: Mode,
    /// How its transactions start.
    pub how: String,
    /// Publishes attempted.
    pub publishes: usize,
    /// Publishes committed.
    pub committed: usize,
    /// Publishes that failed.
    pub failed: usize,
    /// The distinct errors, most frequent first.
    pub errors: Vec<ErrorCount>,
    /// From the start signal to the last publish's end, in seconds.
    pub total_s: f64,
    /// Median wait of committed publishes, in milliseconds.
    pub wait_p50_ms: Option<f64>,
    /// 99th percentile wait of committed publishes, in milliseconds.
    pub wait_p99_ms: Option<f64>,
    /// Longest wait of a committed publish, in milliseconds.
    pub wait_max_ms: Option<f64>,
    /// The most later-arriving publishes that committed before one publish ended.
    pub passed_over_max: usize,
    /// The committed transactions' time holding the lock, one after another, in seconds.
    pub serial_sum_s: f64,
    /// Publishes logged in the database for this mode.
    pub rows_in_db: i64,
    /// The counter's final value (equals `committed` unless an update was lost).
    pub counter: i64,
}

/// The whole demo's results.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    /// The database used.
    pub database: String,
    /// Whether it was a temporary database, removed afterwards.
    pub temporary: bool,
    /// Processes per mode.
    pub processes: u32,
    /// Publishes per process.
    pub writes: u32,
    /// The hold of each publish, in milliseconds.
    pub hold_ms: u64,
    /// The busy timeout of plain and immediate, in milliseconds.
    pub busy_timeout_ms: u64,
    /// The queue's transaction wait, in seconds.
    pub wait_s: f64,
    /// One entry per mode, in the order run.
    pub modes: Vec<ModeReport>,
    /// Wall time of the whole demo, in seconds.
    pub wall_s: f64,
}

/// Runs `writerlock demo`.
pub fn run(args: &DemoArgs) -> Result<ExitCode, CliError> {
    let started = Instant::now();
    let mut modes: Vec<Mode> = Vec::new();
    for m in &args.modes {
        if !modes.contains(m) {
            modes.push(*m);
        }
    }
    let (db, temp_dir) = match &args.db {
        Some(path) => (path.clone(), None),
        None => {
            let dir = make_temp_dir()?;
            (dir.join("demo.db"), Some(dir))
        }
    };
    if !args.json {
        print_heading(args, &db, temp_dir.is_some(), &modes)?;
    }
    let result = modes
        .iter()
        .map(|&mode| run_mode(args, &db, mode))
        .collect::<Result<Vec<_>, _>>();
    if let Some(dir) = &temp_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let report = DemoReport {
        database: db.display().to_string(),
        temporary: temp_dir.is_some(),
        processes: args.processes,
        writes: args.writes,
        hold_ms: args.hold_ms,
        busy_timeout_ms: args.busy_timeout_ms,
        wait_s: Wait::transaction(args.wait).limit().as_secs_f64(),
        modes: result?,
        wall_s: secs(started.elapsed()),
    };
    if args.json {
        crate::output::print_json(&report)?;
    } else {
        print_report(&report)?;
    }
    check(&report)?;
    Ok(ExitCode::SUCCESS)
}

/// Fails when the database does not hold what the workers reported.
fn check(report: &DemoReport) -> Result<(), CliError> {
    for m in &report.modes {
        if m.rows_in_db != m.committed as i64 {
            return Err(CliError::Demo {
                reason: format!(
                    "{} mode reported {} commits but the database logs {} publishes",
                    m.mode.name(),
                    m.committed,
                    m.rows_in_db
                ),
            });
        }
        if m.counter != m.rows_in_db {
            return Err(CliError::Demo {
                reason: format!(
                    "{} mode lost updates: {} publishes committed but the counter reads {}",
                    m.mode.name(),
                    m.rows_in_db,
                    m.counter
                ),
            });
        }
    }
    Ok(())
}

fn make_temp_dir() -> Result<PathBuf, CliError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for attempt in 0..100u32 {
        let dir = base.join(format!(
            "writerlock-demo-{}-{}",
            std::process::id(),
            now_ns() % 1_000_000_000 + u64::from(attempt)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => {
                return Err(CliError::Io {
                    what: "could not create a temporary directory in",
                    path: base,
                    source,
                })
            }
        }
    }
    Err(CliError::Demo {
        reason: format!("no free temporary directory name in {}", base.display()),
    })
}

fn how(mode: Mode, args: &DemoArgs) -> String {
    match mode {
        Mode::Queue => format!(
            "write queue (flock turn, then BEGIN IMMEDIATE), wait {}",
            crate::duration::short(Wait::transaction(args.wait).limit())
        ),
        Mode::Plain => format!("deferred BEGIN, busy timeout {} ms", args.busy_timeout_ms),
        Mode::Immediate => format!(
            "BEGIN IMMEDIATE, busy timeout {} ms, no queue",
            args.busy_timeout_ms
        ),
    }
}

/// Creates the demo's tables and resets this mode's rows, in turn.
fn prepare(db: &Path, mode: Mode) -> Result<(), CliError> {
    let sqlite = |source| CliError::Sqlite {
        path: db.to_path_buf(),
        source,
    };
    let conn = Connection::open(db).map_err(sqlite)?;
    let queue = WriterQueue::new(db);
    queue.begin(&conn, &Wait::cli_transaction())?;
    let done = conn
        .execute_batch(SCHEMA)
        .and_then(|()| {
            conn.execute(
                "DELETE FROM writerlock_demo_publishes WHERE mode = ?1",
                [mode.name()],
            )
        })
        .and_then(|_| {
            conn.execute(
                "INSERT OR REPLACE INTO writerlock_demo_counter (mode, version) VALUES (?1, 0)",
                [mode.name()],
            )
        });
    match done {
        Ok(_) => queue.commit(&conn)?,
        Err(e) => {
            let _ = queue.rollback(&conn);
            return Err(sqlite(e));
        }
    }
    Ok(())
}

/// Reads back the publishes logged and the counter of a mode.
fn verify(db: &Path, mode: Mode) -> Result<(i64, i64), CliError> {
    let sqlite = |source| CliError::Sqlite {
        path: db.to_path_buf(),
        source,
    };
    let conn = Connection::open(db).map_err(sqlite)?;
    conn.busy_timeout(Duration::from_secs(30)).map_err(sqlite)?;
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM writerlock_demo_publishes WHERE mode = ?1",
            [mode.name()],
            |r| r.get(0),
        )
        .map_err(sqlite)?;
    let counter: i64 = conn
        .query_row(
            "SELECT version FROM writerlock_demo_counter WHERE mode = ?1",
            [mode.name()],
            |r| r.get(0),
        )
        .map_err(sqlite)?;
    Ok((rows, counter))
}

/// What the reader threads pass to the main thread.
enum Msg {
    Ready(u32),
    Publish(Box<Publish>),
    Garbled(u32, String),
    Eof(u32),
}

/// The running workers; kills and reaps those still running when dropped.
struct Workers {
    children: Vec<Child>,
    stderr: Vec<Option<JoinHandle<String>>>,
}

impl Workers {
    fn stderr_of(&mut self, worker: u32) -> String {
        self.stderr
            .get_mut(worker as usize)
            .and_then(Option::take)
            .and_then(|h| h.join().ok())
            .map(|s| crate::output::one_line(&s))
            .unwrap_or_default()
    }

    fn fail(&mut self, worker: u32, reason: &str) -> CliError {
        self.kill_all();
        let said = self.stderr_of(worker);
        let reason = if said.is_empty() {
            reason.to_string()
        } else {
            format!("{reason}: {said}")
        };
        CliError::Worker { worker, reason }
    }

    fn kill_all(&mut self) {
        for child in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn spawn(
    args: &DemoArgs,
    db: &Path,
    mode: Mode,
    tx: &mpsc::Sender<Msg>,
) -> Result<(Workers, Vec<ChildStdin>), CliError> {
    let exe = std::env::current_exe().map_err(|source| CliError::Io {
        what: "could not find this program to start the demo processes:",
        path: PathBuf::from("/proc/self/exe"),
        source,
    })?;
    let mut workers = Workers {
        children: Vec::new(),
        stderr: Vec::new(),
    };
    let mut stdins = Vec::new();
    for k in 0..args.processes {
        let mut child = Command::new(&exe)
            .arg("demo-worker")
            .arg("--db")
            .arg(db)
            .args(["--mode", mode.name()])
            .args(["--worker", &k.to_string()])
            .args(["--writes", &args.writes.to_string()])
            .args(["--hold-ms", &args.hold_ms.to_string()])
            .args(["--busy-timeout-ms", &args.busy_timeout_ms.to_string()])
            .args(["--wait-ms", &args.wait.as_millis().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CliError::Io {
                what: "could not start a demo process from",
                path: exe.clone(),
                source,
            })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            workers.children.push(child);
            return Err(workers.fail(k, "its pipes could not be opened"));
        };
        workers.children.push(child);
        stdins.push(stdin);
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let msg = if line == "ready" {
                    Msg::Ready(k)
                } else {
                    match serde_json::from_str::<Publish>(&line) {
                        Ok(p) => Msg::Publish(Box::new(p)),
                        Err(_) => Msg::Garbled(k, line),
                    }
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
            let _ = tx.send(Msg::Eof(k));
        });
        workers.stderr.push(Some(std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        })));
    }
    Ok((workers, stdins))
}

fn run_mode(args: &DemoArgs, db: &Path, mode: Mode) -> Result<ModeReport, CliError> {
    prepare(db, mode)?;
    let (tx, rx) = mpsc::channel();
    let (mut workers, stdins) = spawn(args, db, mode, &tx)?;
    drop(tx);

    // Every worker opens its connection and says `ready` before the clock starts.
    let ready_by = Instant::now() + Duration::from_secs(60);
    let mut ready = 0;
    while ready < args.processes {
        let left = ready_by.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Msg::Ready(_)) => ready += 1,
            Ok(Msg::Eof(k)) => return Err(workers.fail(k, "it exited before it was ready")),
            Ok(Msg::Garbled(k, line)) => {
                return Err(workers.fail(k, &format!("it printed {line:?}")))
            }
            Ok(Msg::Publish(p)) => {
                return Err(workers.fail(p.worker, "it published before the start signal"))
            }
            Err(_) => {
                workers.kill_all();
                return Err(CliError::Demo {
                    reason: format!(
                        "only {ready} of {} demo processes were ready after 60 s",
                        args.processes
                    ),
                });
            }
        }
    }

    let total = u64::from(args.processes) * u64::from(args.writes);
    if mode == Mode::Immediate && !args.json {
        // Said while it runs, too: this is the mode that keeps the terminal waiting.
        eprintln!(
            "immediate: running BEGIN IMMEDIATE without the queue; SQLite's busy handler \
             retries in no order, so this mode takes seconds (up to the {} ms busy timeout per \
             publish)",
            args.busy_timeout_ms
        );
    }
    let mut progress = Progress::start(mode.name(), total);
    // Every worker sleeps until the same instant, a little after the last `go` is sent.
    let go_ns = now_ns() + 20_000_000 + 200_000 * u64::from(args.processes);
    let go = format!("go {go_ns}\n");
    for mut stdin in stdins {
        // A worker that died shows up as an early end of its output below.
        let _ = stdin.write_all(go.as_bytes());
    }
    let patience = Wait::transaction(args.wait)
        .limit()
        .max(Duration::from_millis(args.busy_timeout_ms))
        + Duration::from_millis(args.hold_ms)
        + Duration::from_secs(5);
    let done_by = Instant::now() + patience * args.writes + Duration::from_secs(60);
    let mut publishes: Vec<Publish> = Vec::with_capacity(total as usize);
    let mut ended = 0;
    while ended < args.processes {
        let left = done_by.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Msg::Publish(p)) => {
                progress.step(p.ok);
                publishes.push(*p);
            }
            Ok(Msg::Eof(_)) => ended += 1,
            Ok(Msg::Garbled(k, line)) => {
                progress.finish();
                return Err(workers.fail(k, &format!("it printed {line:?}")));
            }
            Ok(Msg::Ready(k)) => {
                progress.finish();
                return Err(workers.fail(k, "it said ready twice"));
            }
            Err(_) => {
                progress.finish();
                workers.kill_all();
                return Err(CliError::Demo {
                    reason: format!(
                        "the {} mode did not finish within {}; {} of {total} publishes reported",
                        mode.name(),
                        human(patience * args.writes + Duration::from_secs(60)),
                        publishes.len()
                    ),
                });
            }
        }
    }
    progress.finish();
    for k in 0..args.processes {
        let status = workers.children[k as usize]
            .wait()
            .map_err(|source| CliError::Io {
                what: "could not wait for demo process",
                path: PathBuf::from(k.to_string()),
                source,
            })?;
        if !status.success() {
            return Err(workers.fail(k, &format!("it exited with {status}")));
        }
    }
    for k in 0..args.processes {
        let count = publishes.iter().filter(|p| p.worker == k).count();
        if count != args.writes as usize {
            return Err(workers.fail(
                k,
                &format!("it reported {count} publishes instead of {}", args.writes),
            ));
        }
    }
    let (rows_in_db, counter) = verify(db, mode)?;
    Ok(summarize(
        mode,
        how(mode, args),
        &publishes,
        go_ns,
        rows_in_db,
        counter,
    ))
}

/// The nearest-rank percentile `q` (0..=1) of sorted values.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// For each publish, how many publishes that started after it committed before it ended;
/// the largest.
fn passed_over_max(publishes: &[Publish]) -> usize {
    publishes
        .iter()
        .map(|p| {
            publishes
                .iter()
                .filter(|q| q.ok && q.start_ns > p.start_ns && q.end_ns < p.end_ns)
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn summarize(
    mode: Mode,
    how: String,
    publishes: &[Publish],
    go_ns: u64,
    rows_in_db: i64,
    counter: i64,
) -> ModeReport {
    let committed: Vec<&Publish> = publishes.iter().filter(|p| p.ok).collect();
    let mut waits: Vec<u64> = committed
        .iter()
        .map(|p| {
            p.end_ns
                .saturating_sub(p.start_ns)
                .saturating_sub(p.slept_ns)
        })
        .collect();
    waits.sort_unstable();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for p in publishes.iter().filter(|p| !p.ok) {
        let text = p
            .error
            .clone()
            .unwrap_or_else(|| "unknown error".to_string());
        *errors.entry(text).or_default() += 1;
    }
    let mut errors: Vec<ErrorCount> = errors
        .into_iter()
        .map(|(error, count)| ErrorCount { error, count })
        .collect();
    errors.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.error.cmp(&b.error)));
    let last_end = publishes.iter().map(|p| p.end_ns).max().unwrap_or(go_ns);
    let serial: u64 = committed
        .iter()
        .map(|p| p.end_ns.saturating_sub(p.locked_ns.unwrap_or(p.start_ns)))
        .sum();
    let to_ms = |ns: Option<u64>| ns.map(|n| ms(Duration::from_nanos(n)));
    ModeReport {
        mode,
        how,
        publishes: publishes.len(),
        committed: committed.len(),
        failed: publishes.len() - committed.len(),
        errors,
        total_s: secs(Duration::from_nanos(last_end.saturating_sub(go_ns))),
        wait_p50_ms: to_ms(percentile(&waits, 0.50)),
        wait_p99_ms: to_ms(percentile(&waits, 0.99)),
        wait_max_ms: to_ms(waits.last().copied()),
        passed_over_max: passed_over_max(publishes),
        serial_sum_s: secs(Duration::from_nanos(serial)),
        rows_in_db,
        counter,
    }
}

/// What runs, printed before anything runs: the load, the database and each mode, with
/// why the `BEGIN IMMEDIATE` mode takes seconds.
fn print_heading(
    args: &DemoArgs,
    db: &Path,
    temporary: bool,
    modes: &[Mode],
) -> Result<(), CliError> {
    let mut out = format!(
        "writerlock demo: {} processes publish {} times each, all at once (read, hold {} ms, \
         write)\ndatabase: {}{}\n",
        args.processes,
        args.writes,
        args.hold_ms,
        db.display(),
        if temporary {
            " (temporary, removed)"
        } else {
            ""
        }
    );
    for &mode in modes {
        out.push_str(&format!("  {:<10} {}\n", mode.name(), how(mode, args)));
        if mode == Mode::Immediate {
            out.push_str(&format!(
                "  {:<10} (takes seconds: with no queue, SQLite's busy handler sleeps between \
                 retries, longer and longer, in no order, so a writer can lose every race \
                 until its {} ms busy timeout ends)\n",
                "", args.busy_timeout_ms
            ));
        }
    }
    crate::output::print_line(out.trim_end())
}

fn print_report(report: &DemoReport) -> Result<(), CliError> {
    let mut out = String::from("\n");
    let mut table = Table::new(&[
        ("mode", Align::Left),
        ("committed", Align::Right),
        ("failed", Align::Right),
        ("total", Align::Right),
        ("wait p50", Align::Right),
        ("wait p99", Align::Right),
        ("wait max", Align::Right),
        ("passed over", Align::Right),
    ]);
    let wait = |v: Option<f64>| {
        v.map(|ms| human(Duration::from_secs_f64(ms / 1000.0)))
            .unwrap_or_else(|| "-".to_string())
    };
    for m in &report.modes {
        table.row(vec![
            m.mode.name().to_string(),
            format!("{}/{}", m.committed, m.publishes),
            m.failed.to_string(),
            human(Duration::from_secs_f64(m.total_s)),
            wait(m.wait_p50_ms),
            wait(m.wait_p99_ms),
            wait(m.wait_max_ms),
            m.passed_over_max.to_string(),
        ]);
    }
    out.push_str(&table.render());
    let failing: Vec<&ModeReport> = report.modes.iter().filter(|m| m.failed > 0).collect();
    if !failing.is_empty() {
        out.push_str("\nerrors of the failed publishes:\n");
        let mut errors = Table::new(&[
            ("  mode", Align::Left),
            ("count", Align::Right),
            ("error", Align::Left),
        ]);
        for m in failing {
            for (i, e) in m.errors.iter().enumerate() {
                let name = if i == 0 { m.mode.name() } else { "" };
                errors.row(vec![
                    format!("  {name}"),
                    e.count.to_string(),
                    e.error.clone(),
                ]);
            }
        }
        out.push_str(&errors.render());
    }
    out.push('\n');
    for m in report.modes.iter().filter(|m| m.mode == Mode::Queue) {
        let total = m.total_s;
        let serial = m.serial_sum_s;
        out.push_str(&format!(
            "queue: total {} against a serial sum of {} (the {} committed transactions one \
             after another, each from taking the lock to its commit)\n",
            human(Duration::from_secs_f64(total)),
            human(Duration::from_secs_f64(serial)),
            m.committed
        ));
    }
    let lost: Vec<String> = report
        .modes
        .iter()
        .filter(|m| m.rows_in_db != m.committed as i64 || m.counter != m.rows_in_db)
        .map(|m| m.mode.name().to_string())
        .collect();
    if lost.is_empty() {
        out.push_str(
            "checked: every committed publish is logged in the database and no update was lost\n",
        );
    }
    out.push('\n');
    let legend = [
        (
            "wait",
            "a committed publish's duration less its own work (the hold): time spent waiting for \
             locks"
                .to_string(),
        ),
        (
            "passed over",
            "the most publishes that started after one publish and committed before it ended"
                .to_string(),
        ),
        ("wall time", human(Duration::from_secs_f64(report.wall_s))),
    ];
    for (label, text) in legend {
        out.push_str(&format!("{label:<13}{text}\n"));
    }
    crate::output::print_line(out.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: u64, end: u64, ok: bool) -> Publish {
        Publish {
            worker: 0,
            publish: 0,
            ok,
            error: (!ok).then(|| "x".to_string()),
            start_ns: start,
            locked_ns: Some(start),
            end_ns: end,
            slept_ns: 0,
        }
    }

    #[test]
    fn passed_over_counts_later_arrivals_committing_first() {
        // A starts first and ends last; B and C start after A and commit before it.
        let list = [
            p(0, 100, true),
            p(10, 20, true),
            p(30, 40, true),
            p(50, 90, false),
        ];
        assert_eq!(passed_over_max(&list), 2);
        // In arrival order: nobody is passed over.
        let fifo = [p(0, 10, true), p(1, 20, true), p(2, 30, true)];
        assert_eq!(passed_over_max(&fifo), 0);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7], 0.99), Some(7));
    }
}
