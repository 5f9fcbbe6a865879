//! The Postgres scenarios: ledger writes per second through the writer
//! lock, psycopg 3 by hand against writerlock from Python, C and Rust
//! (scenario 6), recovery from an idle holder (scenario 7), and Python's
//! `executemany` against psycopg 3's (scenario 10), on the cluster named by
//! TEST_DATABASE_URL, in a database of their own.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::json;
use writerlock::pg::{self, Connection, Settings, Value};

use crate::analysis::Dist;
use crate::clock::human;
use crate::error::{BenchError, Result};
use crate::report::{Report, Table, Target};
use crate::rtcount::Relay;

/// `url` with its database name replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{name}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// A database created for this run and dropped at the end.
struct BenchDb {
    admin: Connection,
    name: String,
    url: String,
}

impl BenchDb {
    fn create(admin_url: &str) -> Result<BenchDb> {
        let mut admin = Connection::connect(admin_url, &Settings::new())
            .map_err(|e| BenchError::pg("connecting to TEST_DATABASE_URL", e))?;
        let name = format!("wlbench_{}", std::process::id());
        admin
            .execute_batch(&format!("DROP DATABASE IF EXISTS {name}"))
            .and_then(|()| admin.execute_batch(&format!("CREATE DATABASE {name}")))
            .map_err(|e| BenchError::pg("creating the bench database", e))?;
        let url = with_database(admin_url, &name);
        let mut conn = Connection::connect(&url, &Settings::new())
            .map_err(|e| BenchError::pg("connecting to the bench database", e))?;
        conn.execute_batch(
            "CREATE TABLE bench_writes (id bigserial PRIMARY KEY, client int NOT NULL, n bigint NOT NULL)",
        )
        .map_err(|e| BenchError::pg("creating the bench table", e))?;
        pg::setup_schema(&mut conn, None)
            .map_err(|e| BenchError::pg("setting up the writer floor", e))?;
        // One ledger per client of scenario 6.
        conn.execute_batch(
            "INSERT INTO ledgers (slug) SELECT 'bench-' || g FROM generate_series(0, 15) AS g",
        )
        .map_err(|e| BenchError::pg("creating the bench ledgers", e))?;
        Ok(BenchDb { admin, name, url })
    }

    fn version(&mut self) -> String {
        self.admin
            .execute("SELECT version()", &[])
            .ok()
            .and_then(|r| {
                r.first()
                    .and_then(|row| row.get(0))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default()
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        let _ = self.admin.execute_batch(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// Who writes in scenario 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// psycopg 3, the transaction written by hand (the baseline).
    Psycopg,
    /// `writerlock.postgres`'s `write()` from Python.
    Python,
    /// The C ABI: `wl_pg_write_begin`, `wl_pg_exec`, `wl_pg_commit`.
    C,
    /// The Rust API: `Connection::write()`.
    Rust,
}

const WRITERS: [Writer; 4] = [Writer::Psycopg, Writer::Python, Writer::C, Writer::Rust];

/// The statement every writer runs inside its write.
const UPDATE: &str = "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?";

impl Writer {
    fn label(self) -> &'static str {
        match self {
            Writer::Psycopg => "psycopg 3 by hand (baseline)",
            Writer::Python => "Python writerlock.postgres write()",
            Writer::C => "C wl_pg_write_begin + wl_pg_exec + wl_pg_commit",
            Writer::Rust => "Rust writerlock::pg write()",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Writer::Psycopg => "psycopg",
            Writer::Python => "python",
            Writer::C => "c",
            Writer::Rust => "rust",
        }
    }
}

/// What one run of clients did.
#[derive(Debug, Clone, Default)]
struct Outcome {
    writes: u64,
    errors: u64,
    seconds: f64,
    first_error: Option<String>,
}

/// The programs that run the Python and C clients.
struct Programs {
    python: Result<PathBuf, String>,
    c: Result<PathBuf, String>,
}

fn bench_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

impl Programs {
    fn find(out: &Path) -> Programs {
        Programs {
            python: find_python(),
            c: build_c_client(out),
        }
    }

    fn missing(&self, writer: Writer) -> Option<&str> {
        match writer {
            Writer::Psycopg | Writer::Python => self.python.as_ref().err().map(String::as_str),
            Writer::C => self.c.as_ref().err().map(String::as_str),
            Writer::Rust => None,
        }
    }
}

/// The project virtualenv's Python with psycopg and the writerlock module
/// (WL_BENCH_PYTHON overrides it).
fn find_python() -> Result<PathBuf, String> {
    let python = match std::env::var_os("WL_BENCH_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => bench_dir().join("../.venv/bin/python"),
    };
    let check = Command::new(&python)
        .args(["-c", "import psycopg, writerlock.postgres"])
        .output();
    match check {
        Ok(o) if o.status.success() => Ok(python),
        Ok(o) => Err(format!(
            "{} cannot import psycopg and writerlock.postgres ({}); run make deps, then bench/run.sh builds and installs the module",
            python.display(),
            String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").trim()
        )),
        Err(e) => Err(format!(
            "no Python at {} ({e}); run make deps",
            python.display()
        )),
    }
}

/// Compiles bench/pg_client.c against the libwriterlock.so next to this
/// binary (built by bench/run.sh), into `out`.
fn build_c_client(out: &Path) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the bench binary: {e}"))?;
    let lib_dir = exe
        .parent()
        .ok_or("the bench binary has no directory")?
        .to_path_buf();
    let lib = lib_dir.join("libwriterlock.so");
    if !lib.exists() {
        return Err(format!(
            "{} is missing; build it with cargo build --release -p writerlock-c (bench/run.sh does)",
            lib.display()
        ));
    }
    let dir = out.join("pg-client");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    // The program records the soname libwriterlock.so.0: give it that name here.
    let so = dir.join("libwriterlock.so.0");
    let _ = std::fs::remove_file(&so);
    std::fs::copy(&lib, &so).map_err(|e| format!("copying {}: {e}", lib.display()))?;
    let _ = std::fs::remove_file(dir.join("libwriterlock.so"));
    std::fs::copy(&lib, dir.join("libwriterlock.so"))
        .map_err(|e| format!("copying {}: {e}", lib.display()))?;
    let program = dir.join("pg_client");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let built = Command::new(&cc)
        .arg("-O2")
        .arg("-I")
        .arg(bench_dir().join("../include"))
        .arg(bench_dir().join("pg_client.c"))
        .arg("-o")
        .arg(&program)
        .arg(format!("-L{}", dir.display()))
        .arg("-lwriterlock")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .output()
        .map_err(|e| format!("cannot run the C compiler {cc}: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "compiling bench/pg_client.c failed: {}",
            String::from_utf8_lossy(&built.stderr).trim()
        ));
    }
    Ok(program)
}

/// Runs a client program and reads its JSON line.
fn run_program(mut cmd: Command) -> Result<Outcome> {
    let shown = format!("{cmd:?}");
    let output = cmd.output().map_err(|e| BenchError::io(shown.clone(), e))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or("");
    let parsed: serde_json::Value = serde_json::from_str(line).map_err(|_| BenchError::Worker {
        id: 0,
        message: format!(
            "{shown} printed no result ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    })?;
    Ok(Outcome {
        writes: parsed["writes"].as_u64().unwrap_or(0),
        errors: parsed["errors"].as_u64().unwrap_or(0),
        seconds: parsed["seconds"].as_f64().unwrap_or(0.0),
        first_error: parsed["first_error"].as_str().map(str::to_string),
    })
}

/// One run: `clients` clients of `writer` for `dur` (or `writes` writes
/// each when `writes > 0`), after one warm-up write each.
fn run_writer(
    programs: &Programs,
    writer: Writer,
    url: &str,
    clients: usize,
    dur: Duration,
    writes: u64,
) -> Result<Outcome> {
    let args = [
        url.to_string(),
        clients.to_string(),
        format!("{}", dur.as_secs_f64()),
        writes.to_string(),
    ];
    match writer {
        Writer::Psycopg | Writer::Python => {
            let python = programs
                .python
                .as_ref()
                .map_err(|e| BenchError::Config(e.clone()))?;
            let mut cmd = Command::new(python);
            cmd.arg(bench_dir().join("pg_clients.py"))
                .arg(if writer == Writer::Psycopg {
                    "psycopg"
                } else {
                    "writerlock"
                })
                .args(args);
            run_program(cmd)
        }
        Writer::C => {
            let program = programs
                .c
                .as_ref()
                .map_err(|e| BenchError::Config(e.clone()))?;
            let mut cmd = Command::new(program);
            cmd.args(args);
            run_program(cmd)
        }
        Writer::Rust => run_rust(url, clients, dur, writes),
    }
}

fn rust_write(conn: &mut Connection, slug: &str) -> Result<(), pg::Error> {
    let mut w = conn.write()?;
    w.execute(UPDATE, &[Value::from(slug)])?;
    w.commit()
}

/// Rust clients: one thread each, started together after a warm-up write.
fn run_rust(url: &str, clients: usize, dur: Duration, writes: u64) -> Result<Outcome> {
    let mut conns = Vec::with_capacity(clients);
    for i in 0..clients {
        let mut conn = Connection::connect(url, &Settings::new())
            .map_err(|e| BenchError::pg("connecting a client", e))?;
        let slug = format!("bench-{i}");
        rust_write(&mut conn, &slug).map_err(|e| BenchError::pg("a warm-up write", e))?;
        conns.push((conn, slug));
    }
    let barrier = Arc::new(Barrier::new(clients + 1));
    let handles: Vec<_> = conns
        .into_iter()
        .map(|(mut conn, slug)| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut out = Outcome::default();
                loop {
                    if writes > 0 {
                        if out.writes + out.errors >= writes {
                            break;
                        }
                    } else if start.elapsed() >= dur {
                        break;
                    }
                    match rust_write(&mut conn, &slug) {
                        Ok(()) if writes > 0 || start.elapsed() <= dur => out.writes += 1,
                        Ok(()) => {}
                        Err(e) => {
                            out.errors += 1;
                            out.first_error.get_or_insert_with(|| e.to_string());
                        }
                    }
                }
                let _ = conn.close();
                out
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let mut total = Outcome::default();
    for h in handles {
        let o = h.join().map_err(|_| BenchError::Worker {
            id: 0,
            message: "a Postgres client thread panicked".into(),
        })?;
        total.writes += o.writes;
        total.errors += o.errors;
        if total.first_error.is_none() {
            total.first_error = o.first_error;
        }
    }
    total.seconds = started.elapsed().as_secs_f64();
    Ok(total)
}

/// The host and port of a `postgresql://` URL, resolved.
fn server_address(url: &str) -> Option<SocketAddr> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let with_port = if host_port.contains(':') {
        host_port.to_string()
    } else {
        format!("{host_port}:5432")
    };
    with_port.to_socket_addrs().ok()?.next()
}

/// `url` pointed at 127.0.0.1:`port`.
fn via_port(url: &str, port: u16) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let user = authority.rsplit_once('@').map(|(u, _)| format!("{u}@"));
    Some(format!(
        "{scheme}://{}127.0.0.1:{port}{}",
        user.unwrap_or_default(),
        &rest[end..]
    ))
}

/// Round trips per write of each writer, counted by a relay: the
/// difference between a run of `many` writes and a run of `few` (each run
/// also connects and warms up), divided by the difference in writes.
fn round_trips(programs: &Programs, url: &str) -> Result<Vec<(Writer, Option<f64>)>> {
    let server = server_address(url)
        .ok_or_else(|| BenchError::Config(format!("cannot resolve the server address of {url}")))?;
    let relay = Relay::start(server).map_err(|e| BenchError::io("starting the relay", e))?;
    let relayed = via_port(url, relay.port())
        .ok_or_else(|| BenchError::Config(format!("cannot point {url} at the relay")))?;
    let (few, many) = (20u64, 120u64);
    let mut out = Vec::new();
    for writer in WRITERS {
        if programs.missing(writer).is_some() {
            out.push((writer, None));
            continue;
        }
        let mut counts = Vec::new();
        for writes in [few, many] {
            let before = relay.round_trips();
            let o = run_writer(programs, writer, &relayed, 1, Duration::ZERO, writes)?;
            if o.errors > 0 {
                return Err(BenchError::Worker {
                    id: 0,
                    message: format!(
                        "{} failed while round trips were counted: {}",
                        writer.label(),
                        o.first_error.unwrap_or_default()
                    ),
                });
            }
            // Let the relay see the last replies and the connection close.
            std::thread::sleep(Duration::from_millis(50));
            counts.push(relay.round_trips() - before);
        }
        let per_write = (counts[1] as f64 - counts[0] as f64) / (many - few) as f64;
        out.push((writer, Some(per_write)));
    }
    Ok(out)
}

/// Scenarios 6, 7 and 10 (`which`: whether to run each).
pub fn scenarios(
    url: &str,
    quick: bool,
    out: &Path,
    which: (bool, bool, bool),
    report: &mut Report,
) -> Result<serde_json::Value> {
    let mut db = BenchDb::create(url)?;
    let version = db.version();
    if which.0 {
        scenario6(&db.url, quick, out, report)?;
    }
    if which.1 {
        report.load_note = Some(crate::report::load_average());
        scenario7(&db.url, quick, report)?;
    }
    if which.2 {
        report.load_note = Some(crate::report::load_average());
        scenario10(&db.url, quick, report)?;
    }
    Ok(json!({"server": version}))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The goal: `write()` from Python at least 1.2 × the psycopg baseline at every client
/// count, within 10 % of the C path ([`GOAL_OF_C`]), and Rust at least as fast as Python.
const GOAL: f64 = 1.2;

/// Python `write()` ÷ the C path: at least this (within 10 %).
const GOAL_OF_C: f64 = 0.9;

fn scenario6(url: &str, quick: bool, out: &Path, report: &mut Report) -> Result<()> {
    let (dur, rounds) = if quick {
        (Duration::from_secs(1), 2)
    } else {
        (Duration::from_secs(1), 9)
    };
    let programs = Programs::find(out);
    for writer in WRITERS {
        if let Some(why) = programs.missing(writer) {
            eprintln!("writerlock-bench: {} not measured: {why}", writer.label());
        }
    }
    let counts = [1usize, 4, 16];
    // rates[writer][count] = one rate per round
    let mut rates = vec![vec![Vec::<f64>::new(); counts.len()]; WRITERS.len()];
    let mut errors = vec![vec![0u64; counts.len()]; WRITERS.len()];
    let mut first_errors: Vec<String> = Vec::new();
    for (ci, &clients) in counts.iter().enumerate() {
        for round in 0..rounds {
            // Alternate the order every round, so drift in the machine's
            // speed does not favour whoever runs first.
            let mut order: Vec<usize> = (0..WRITERS.len()).collect();
            order.rotate_left(round % WRITERS.len());
            if round % 2 == 1 {
                order.reverse();
            }
            for wi in order {
                let writer = WRITERS[wi];
                if programs.missing(writer).is_some() {
                    continue;
                }
                eprintln!(
                    "  running s6 {} with {clients} clients, round {}",
                    writer.name(),
                    round + 1
                );
                let o = run_writer(&programs, writer, url, clients, dur, 0)?;
                rates[wi][ci].push(o.writes as f64 / dur.as_secs_f64());
                errors[wi][ci] += o.errors;
                if let Some(e) = o.first_error {
                    first_errors.push(format!("{}: {e}", writer.label()));
                }
            }
        }
    }
    let rts = round_trips(&programs, url)?;
    let rt_of = |w: Writer| {
        rts.iter()
            .find(|(x, _)| *x == w)
            .and_then(|(_, r)| *r)
            .map_or("-".to_string(), |r| format!("{r:.1}"))
    };

    let mut table = Table::new(
        format!(
            "Scenario 6: Postgres ledger writes per second, the same UPDATE through the writer lock and the floor read ({rounds} alternated rounds of {} s, median)",
            dur.as_secs()
        ),
        &[
            "writer",
            "1 client",
            "4 clients",
            "16 clients",
            "÷ baseline (1 / 4 / 16)",
            "round trips per write",
            "errors",
        ],
    );
    let mut medians = vec![vec![0.0f64; counts.len()]; WRITERS.len()];
    for wi in 0..WRITERS.len() {
        for ci in 0..counts.len() {
            medians[wi][ci] = median(&mut rates[wi][ci]);
        }
    }
    let mut rows = Vec::new();
    for (wi, &writer) in WRITERS.iter().enumerate() {
        if let Some(why) = programs.missing(writer) {
            table.row(vec![
                writer.label().into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("not measured: {why}"),
                "-".into(),
                "-".into(),
            ]);
            continue;
        }
        let ratio = |ci: usize| {
            let base = medians[0][ci];
            (base > 0.0).then(|| medians[wi][ci] / base)
        };
        let ratios: Vec<String> = (0..counts.len())
            .map(|ci| ratio(ci).map_or("-".into(), |r| format!("{r:.2}")))
            .collect();
        table.row(vec![
            writer.label().into(),
            format!("{:.0}/s", medians[wi][0]),
            format!("{:.0}/s", medians[wi][1]),
            format!("{:.0}/s", medians[wi][2]),
            if writer == Writer::Psycopg {
                "1 (baseline)".into()
            } else {
                ratios.join(" / ")
            },
            rt_of(writer),
            errors[wi].iter().sum::<u64>().to_string(),
        ]);
        rows.push(json!({
            "writer": writer.name(),
            "label": writer.label(),
            "clients": counts,
            "rates_per_round": rates[wi],
            "median_writes_per_s": medians[wi],
            "over_baseline": (0..counts.len()).map(ratio).collect::<Vec<_>>(),
            "round_trips_per_write": rts.iter().find(|(x, _)| *x == writer).and_then(|(_, r)| *r),
            "errors": errors[wi],
        }));
    }
    table.note(format!(
        "Goal: Python write() ≥ {GOAL} × psycopg at every client count (1, 4 and 16), and within {:.0} % of the C path (Python ÷ C ≥ {GOAL_OF_C}); Rust at least as fast as Python.",
        (1.0 - GOAL_OF_C) * 100.0
    ));
    table.note("Every writer: BEGIN, SELECT pg_advisory_xact_lock(1279607879), the floor read (SELECT version FROM writer_floor WHERE name = 'ledger'), the UPDATE, COMMIT, with the ledger session's startup options and keepalives. psycopg, Python and C clients are processes; Rust clients are threads of one process.");
    table.note("Round trips per write are counted on the wire by a relay between one client and the server (a client send after a server reply is one).");
    table.note("The throwaway cluster runs with fsync=off and synchronous_commit=off (tests/pg-cluster.sh): these are lock and round-trip costs, not disk costs.");
    for e in first_errors.iter().take(3) {
        table.note(format!("error seen: {e}"));
    }
    report.table(table);

    for (ci, &clients) in counts.iter().enumerate() {
        let base = medians[0][ci];
        let python = medians[1][ci];
        let what = format!("S6 Postgres writes/s, {clients} client(s)");
        if programs.missing(Writer::Python).is_some() || base <= 0.0 {
            report.targets.push(Target::skipped(
                &what,
                "Python write() ÷ psycopg",
                &format!("≥ {GOAL:.2}"),
                programs.missing(Writer::Python).unwrap_or("no baseline"),
            ));
        } else {
            report.targets.push(Target::at_least(
                &what,
                "Python write() ÷ psycopg",
                python / base,
                GOAL,
                |x| format!("{x:.2}"),
            ));
        }
        let c = medians[2][ci];
        if programs.missing(Writer::C).is_none() && c > 0.0 && python > 0.0 {
            report.targets.push(Target::at_least(
                &what,
                "Python write() ÷ C",
                python / c,
                GOAL_OF_C,
                |x| format!("{x:.2}"),
            ));
        }
        if programs.missing(Writer::Rust).is_none() && python > 0.0 {
            report.targets.push(Target::at_least(
                &what,
                "Rust ÷ Python",
                medians[3][ci] / python,
                1.0,
                |x| format!("{x:.2}"),
            ));
        }
    }

    let steps = breakdown(url, if quick { 200 } else { 1000 })?;
    let mut detail = Table::new(
        "Scenario 6, detail: where one Rust write() spends its time (1 client, each round trip timed)",
        &["step", "p50", "mean", "p99"],
    );
    let mut step_json = Vec::new();
    for (name, values) in &steps {
        let d = Dist::of(values);
        detail.row(vec![
            name.to_string(),
            human(d.p50),
            human(d.mean as i64),
            human(d.p99),
        ]);
        step_json.push(json!({"step": name, "timing": d.json_us()}));
    }
    detail.note("begin_write() sends BEGIN, the writer lock and the floor read (with the refusal count) as one message; pg_locks is scanned only when the refusal count moved since the session last found no refused writer.");
    report.table(detail);
    report.record(
        "s6_pg_writes",
        json!({"duration_s": dur.as_secs_f64(), "rounds": rounds, "goal": GOAL, "writers": rows, "write_steps": step_json}),
    );
    Ok(())
}

/// Scenario 10's goal: `writerlock.postgres`'s `executemany` at least as fast as psycopg
/// 3's (psycopg's seconds ÷ writerlock's, median over the alternated rounds).
const MANY_GOAL: f64 = 1.0;

/// The rows each `executemany` of scenario 10 inserts.
const MANY_ROWS: u64 = 10_000;

/// `n` with a comma between thousands: 10,000.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Scenario 10: `executemany` of [`MANY_ROWS`] rows in a transaction, then `commit()`,
/// `writerlock.postgres` against psycopg 3 (pipelined), in alternated rounds run by
/// `bench/pg_executemany.py`.
fn scenario10(url: &str, quick: bool, report: &mut Report) -> Result<()> {
    let rounds = if quick { 3 } else { 9 };
    let what = "S10 Postgres executemany, 10,000 rows in a transaction";
    let mode = "writerlock ÷ psycopg speed";
    let goal = format!("≥ {MANY_GOAL:.2}");
    let mut table = Table::new(
        format!(
            "Scenario 10: Python executemany() of {} rows in a transaction, then commit() ({rounds} alternated rounds, median)",
            thousands(MANY_ROWS)
        ),
        &["driver", "median", "best", "rows/s (median)", "÷ psycopg speed (median of rounds)"],
    );
    let python = match find_python() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("writerlock-bench: scenario 10 not measured: {why}");
            table.row(vec![
                "writerlock.postgres / psycopg 3".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("not measured: {why}"),
            ]);
            report.table(table);
            report
                .targets
                .push(Target::skipped(what, mode, &goal, &why));
            return Ok(());
        }
    };
    eprintln!("  running s10 executemany, {rounds} rounds");
    let mut cmd = Command::new(&python);
    cmd.arg(bench_dir().join("pg_executemany.py"))
        .arg(url)
        .arg(MANY_ROWS.to_string())
        .arg(rounds.to_string());
    let shown = format!("{cmd:?}");
    let output = cmd.output().map_err(|e| BenchError::io(shown.clone(), e))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let parsed: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .ok()
        .filter(|_| output.status.success())
        .ok_or_else(|| BenchError::Worker {
            id: 0,
            message: format!(
                "{shown} printed no result ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })?;
    let seconds = |driver: &str| -> Vec<f64> {
        parsed["seconds"][driver]
            .as_array()
            .map(|v| v.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default()
    };
    let mut speed: Vec<f64> = parsed["speed_over_psycopg"]
        .as_array()
        .map(|v| v.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    if speed.is_empty() {
        return Err(BenchError::Worker {
            id: 0,
            message: format!("{shown} printed no rounds: {stdout}"),
        });
    }
    let ratio = median(&mut speed);
    let mut drivers = Vec::new();
    for (name, label) in [
        ("psycopg", "psycopg 3 executemany (pipelined; baseline)"),
        ("writerlock", "writerlock.postgres executemany"),
    ] {
        let mut s = seconds(name);
        let best = s.iter().copied().fold(f64::INFINITY, f64::min);
        let med = median(&mut s);
        table.row(vec![
            label.into(),
            human((med * 1e9) as i64),
            human((best * 1e9) as i64),
            format!("{:.0}/s", MANY_ROWS as f64 / med),
            if name == "psycopg" {
                "1 (baseline)".into()
            } else {
                format!("{ratio:.2}")
            },
        ]);
        drivers.push(json!({"driver": name, "label": label, "seconds_per_round": seconds(name), "median_s": med, "best_s": best}));
    }
    table.note(format!(
        "Goal: writerlock.postgres's executemany at least psycopg 3's speed in a transaction (psycopg's time ÷ writerlock's ≥ {MANY_GOAL:.2}, median over the rounds)."
    ));
    table.note("Each run: TRUNCATE and commit, then executemany of (int, text, float8) rows into a table of its own and commit(), timed; the rows stored are counted after every run. The drivers alternate, the order reversed every other round; one connection each, warmed up first.");
    report.table(table);
    report
        .targets
        .push(Target::at_least(what, mode, ratio, MANY_GOAL, |x| {
            format!("{x:.2}")
        }));
    report.record(
        "s10_pg_executemany",
        json!({"rows": MANY_ROWS, "rounds": rounds, "goal": MANY_GOAL, "drivers": drivers, "speed_over_psycopg_per_round": parsed["speed_over_psycopg"], "median_speed_over_psycopg": ratio}),
    );
    Ok(())
}

/// Times each round trip of a Rust write.
fn breakdown(url: &str, writes: usize) -> Result<Vec<(&'static str, Vec<i64>)>> {
    let mut conn = Connection::connect(url, &Settings::new())
        .map_err(|e| BenchError::pg("connecting the timing client", e))?;
    pg::ensure_schema(&mut conn).map_err(|e| BenchError::pg("checking the schema", e))?;
    let names = [
        "begin_write (BEGIN + writer lock + floor read)",
        "UPDATE",
        "COMMIT",
    ];
    let mut times: Vec<Vec<i64>> = vec![Vec::with_capacity(writes); names.len()];
    for _ in 0..writes {
        let mut t = Instant::now();
        let mut lap = |i: usize, times: &mut Vec<Vec<i64>>| {
            let now = Instant::now();
            times[i].push(now.duration_since(t).as_nanos() as i64);
            t = now;
        };
        let step = (|| -> Result<(), pg::Error> {
            conn.begin_write()?;
            lap(0, &mut times);
            conn.execute(UPDATE, &[Value::from("bench-0")])?;
            lap(1, &mut times);
            conn.commit()?;
            lap(2, &mut times);
            Ok(())
        })();
        if let Err(e) = step {
            let _ = conn.rollback();
            return Err(BenchError::pg("timing a write", e));
        }
    }
    Ok(names.into_iter().zip(times).collect())
}

/// One recovery measurement: a holder takes the writer lock and goes idle;
/// a waiter asks for it at once. Returns the time from the holder going
/// idle to the waiter's commit, or the time it gave up after.
fn recovery(
    url: &str,
    holder_settings: &Settings,
    waiter_settings: &Settings,
) -> Result<(Duration, Option<String>, bool)> {
    let mut holder = Connection::connect(url, holder_settings)
        .map_err(|e| BenchError::pg("connecting the holder", e))?;
    let mut waiter = Connection::connect(url, waiter_settings)
        .map_err(|e| BenchError::pg("connecting the waiter", e))?;
    pg::ensure_schema(&mut waiter).map_err(|e| BenchError::pg("checking the schema", e))?;
    holder
        .begin_write()
        .map_err(|e| BenchError::pg("the holder's write", e))?;
    let idle_since = Instant::now();
    let handle = std::thread::spawn(move || {
        let outcome = (|| {
            let mut w = waiter.write()?;
            w.execute(
                "INSERT INTO bench_writes (client, n) VALUES (?, ?)",
                &[Value::Int(-1), Value::Int(0)],
            )?;
            w.commit()
        })();
        (Instant::now(), outcome.err().map(|e| e.to_string()))
    });
    let (ended, error) = handle.join().map_err(|_| BenchError::Worker {
        id: 0,
        message: "the waiter thread panicked".into(),
    })?;
    // Was the holder's session ended by the server?
    let holder_ended = match holder.execute("SELECT 1", &[]) {
        Ok(_) => false,
        Err(e) => e.is_connection_lost() || holder.is_closed(),
    };
    let _ = holder.rollback();
    Ok((ended.duration_since(idle_since), error, holder_ended))
}

fn scenario7(url: &str, quick: bool, report: &mut Report) -> Result<()> {
    let mut table = Table::new(
        "Scenario 7: recovery, from a holder going idle in its transaction to the next writer's commit",
        &["holder's idle_in_transaction_session_timeout", "next writer", "time to commit", "holder ended by the server"],
    );
    let mut rows = Vec::new();
    eprintln!("  running s7 with the idle limit (about 15 s)");
    let (took, error, ended) = recovery(url, &Settings::new(), &Settings::new())?;
    table.row(vec![
        "15 s (the ledger session's setting)".into(),
        match &error {
            None => "committed".into(),
            Some(e) => format!("failed: {e}"),
        },
        human(took.as_nanos() as i64),
        if ended { "yes" } else { "no" }.into(),
    ]);
    rows.push(json!({"idle_limit_s": 15, "seconds": took.as_secs_f64(), "committed": error.is_none(), "error": error, "holder_ended": ended}));
    if error.is_none() {
        report.targets.push(Target::at_most(
            "S7 recovery from an idle holder",
            "pg write()",
            took.as_secs_f64(),
            15.5,
            |x| format!("{x:.2} s"),
        ));
    } else {
        report.targets.push(Target::check(
            "S7 recovery from an idle holder",
            "pg write()",
            "commits within 15.5 s",
            false,
            format!("the waiter failed after {:.2} s", took.as_secs_f64()),
        ));
    }
    if quick {
        table.note("QUICK: the run without an idle limit (unbounded, shown over a 20 s window) is skipped.");
    } else {
        eprintln!("  running s7 without an idle limit (20 s window)");
        // A limit of 0 is refused (Postgres would read it as none); the longest accepted
        // limit, about 24.8 days, never fires within the window, which is the same thing.
        let mut holder = Settings::new();
        holder.idle_in_transaction(writerlock::pg::MAX_LIMIT);
        let mut waiter = Settings::new();
        waiter.lock_tries(2);
        let window = waiter.get_lock_wait() * waiter.get_lock_tries();
        let (took, error, ended) = recovery(url, &holder, &waiter)?;
        let shown = match &error {
            Some(_) => format!("> {} (gave up)", human(took.as_nanos() as i64)),
            None => human(took.as_nanos() as i64),
        };
        table.row(vec![
            "none".into(),
            match &error {
                None => "committed".into(),
                Some(e) => format!("gave up: {e}"),
            },
            shown,
            if ended { "yes" } else { "no" }.into(),
        ]);
        rows.push(json!({"idle_limit_s": 0, "window_s": window.as_secs_f64(), "seconds": took.as_secs_f64(), "committed": error.is_none(), "error": error, "holder_ended": ended}));
        table.note(format!(
            "Without the limit nothing ends the holder: the waiter gave up after its window ({} waits of {} s here; the default is 3).",
            waiter.get_lock_tries(),
            waiter.get_lock_wait().as_secs()
        ));
    }
    table.note("Target ≤ 15.5 s: the server ends the idle holder at its 15 s limit, and the next writer commits at once.");
    report.table(table);
    report.record("s7_pg_recovery", json!(rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn thousands_are_separated() {
        assert_eq!(super::thousands(10_000), "10,000");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn replaces_the_database() {
        assert_eq!(
            with_database("postgresql://postgres@127.0.0.1:5432/postgres", "b"),
            "postgresql://postgres@127.0.0.1:5432/b"
        );
        assert_eq!(
            with_database("postgresql://u:p@h:1/db?sslmode=disable", "b"),
            "postgresql://u:p@h:1/b?sslmode=disable"
        );
        assert_eq!(with_database("postgresql://h", "b"), "postgresql://h/b");
    }
}
