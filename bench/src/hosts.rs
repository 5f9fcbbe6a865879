//! Scenario 9: one writer, from every host, by hand against the queue.
//!
//! One process, one connection, a WAL database with `synchronous=NORMAL`, a
//! one-row `INSERT` per transaction. Each host's program (the Rust one is
//! this binary's `host-rust` subcommand; C, Python and PHP are under
//! `bench/hosts/`) runs the same number of transactions per variant in every
//! round, the variants' order reversed every other round, and prints every
//! variant's rate per round; the figure is the median over rounds of the
//! queue's rate divided by the hand-written one of the same round.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};
use serde_json::{json, Value};
use writerlock::{BusyKind, Wait, WriterQueue};

use crate::error::{BenchError, Result};
use crate::report::{Report, Table, Target};

/// The goal: through the queue at least this fraction of the hand-written rate.
pub const GOAL: f64 = 0.95;

/// The directory of the bench crate (its sources and host programs).
pub fn bench_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The project virtualenv's Python with the writerlock module installed
/// (`WL_BENCH_PYTHON` overrides it), or why there is none.
pub fn python() -> std::result::Result<PathBuf, String> {
    static FOUND: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let python = match std::env::var_os("WL_BENCH_PYTHON") {
                Some(p) => PathBuf::from(p),
                None => bench_dir().join("../.venv/bin/python"),
            };
            match Command::new(&python).args(["-c", "import writerlock"]).output() {
                Ok(o) if o.status.success() => Ok(python),
                Ok(o) => Err(format!(
                    "{} cannot import writerlock ({}); bench/run.sh builds and installs the module into the project virtualenv (make deps creates it)",
                    python.display(),
                    String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").trim()
                )),
                Err(e) => Err(format!("no Python at {} ({e}); run make deps", python.display())),
            }
        })
        .clone()
}

/// The directory of this binary, where `cargo build --release` put the
/// C library and the PHP extension too.
fn target_dir() -> std::result::Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the bench binary: {e}"))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "the bench binary has no directory".to_string())
}

/// Compiles bench/hosts/c_host.c against the release libwriterlock.so
/// (copied into `out`, so a later build cannot change it under the run).
fn build_c_host(out: &Path) -> std::result::Result<PathBuf, String> {
    let lib = target_dir()?.join("libwriterlock.so");
    if !lib.exists() {
        return Err(format!(
            "{} is missing; build it with cargo build --release -p writerlock-c (bench/run.sh does)",
            lib.display()
        ));
    }
    let dir = out.join("c-host");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for name in ["libwriterlock.so.0", "libwriterlock.so"] {
        let _ = std::fs::remove_file(dir.join(name));
        std::fs::copy(&lib, dir.join(name))
            .map_err(|e| format!("copying {}: {e}", lib.display()))?;
    }
    let program = dir.join("c_host");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let built = Command::new(&cc)
        .arg("-O2")
        .arg("-I")
        .arg(bench_dir().join("../include"))
        .arg(bench_dir().join("hosts/c_host.c"))
        .arg("-o")
        .arg(&program)
        .arg(format!("-L{}", dir.display()))
        .arg("-lwriterlock")
        .arg("-lsqlite3")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .output()
        .map_err(|e| format!("cannot run the C compiler {cc}: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "compiling bench/hosts/c_host.c failed: {}",
            String::from_utf8_lossy(&built.stderr).trim()
        ));
    }
    Ok(program)
}

/// PHP with the writerlock extension built by `cargo build --release -p
/// writerlock-php` (bench/run.sh builds it where PHP's headers are
/// installed), and its sqlite3 and pdo_sqlite extensions.
fn php() -> std::result::Result<(String, PathBuf), String> {
    let php = std::env::var("PHP").unwrap_or_else(|_| "php".to_string());
    let ext = target_dir()?.join("libwriterlock_php.so");
    if !ext.exists() {
        return Err(format!(
            "{} is missing; build it with cargo build --release -p writerlock-php (needs php8.2-dev; bench/run.sh builds it when php-config is installed)",
            ext.display()
        ));
    }
    let modules = Command::new(&php)
        .arg("-d")
        .arg(format!("extension={}", ext.display()))
        .arg("-m")
        .output()
        .map_err(|e| {
            format!("cannot run {php} ({e}); install it with apt-get install php8.2-cli")
        })?;
    let list = String::from_utf8_lossy(&modules.stdout);
    for (module, package) in [
        ("writerlock", "the extension failed to load"),
        ("sqlite3", "apt-get install php8.2-sqlite3"),
        ("pdo_sqlite", "apt-get install php8.2-sqlite3"),
    ] {
        if !list.lines().any(|l| l.trim() == module) {
            return Err(format!(
                "{php} has no {module} module ({package}){}",
                String::from_utf8_lossy(&modules.stderr)
                    .lines()
                    .next()
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            ));
        }
    }
    Ok((php, ext))
}

/// One host program and the variants it measures.
struct Host {
    /// Short name (JSON, targets).
    name: &'static str,
    /// The host and driver, for the table.
    label: &'static str,
    /// Its by-hand transaction, for the table.
    hand: &'static str,
    /// Its queue variants: key in the program's output, and how it reads.
    variants: &'static [(&'static str, &'static str)],
    /// The command, without its DATABASE TRANSACTIONS ROUNDS arguments, or
    /// why the host cannot run here.
    command: std::result::Result<Command, String>,
}

fn hosts(out: &Path) -> Vec<Host> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the bench binary: {e}"));
    let rust = exe.map(|exe| {
        let mut c = Command::new(exe);
        c.arg("host-rust");
        c
    });
    let c = build_c_host(out).map(Command::new);
    let py = python().map(|python| {
        let mut c = Command::new(python);
        c.arg(bench_dir().join("hosts/py_host.py"));
        c
    });
    let php_for = |driver: &str| {
        php().map(|(php, ext)| {
            let mut c = Command::new(php);
            c.arg("-d")
                .arg(format!("extension={}", ext.display()))
                .arg(bench_dir().join("hosts/php_host.php"))
                .arg(driver);
            c
        })
    };
    vec![
        Host {
            name: "rust",
            label: "Rust (rusqlite)",
            hand: "conn.transaction_with_behavior(Immediate), INSERT, commit()",
            variants: &[
                (
                    "begin_commit",
                    "queue.begin(&conn, &wait) … queue.commit(&conn)",
                ),
                (
                    "take_release",
                    "queue.take(…) + the same hand-written transaction + queue.release()",
                ),
            ],
            command: rust,
        },
        Host {
            name: "c",
            label: "C (SQLite's C API)",
            hand: "sqlite3_exec(\"BEGIN IMMEDIATE\"), INSERT, sqlite3_exec(\"COMMIT\")",
            variants: &[(
                "begin_commit",
                "wl_queue_begin(queue, db, …) … wl_queue_commit(queue, db)",
            )],
            command: c,
        },
        Host {
            name: "python",
            label: "Python sqlite3",
            hand: "conn.execute(\"BEGIN IMMEDIATE\"), INSERT, conn.execute(\"COMMIT\")",
            variants: &[
                ("begin_commit", "queue.begin(conn) … queue.commit(conn)"),
                ("helper", "with queue.transaction(conn):"),
            ],
            command: py,
        },
        Host {
            name: "php-sqlite3",
            label: "PHP SQLite3",
            hand: "$db->exec('BEGIN IMMEDIATE'), INSERT, $db->exec('COMMIT')",
            variants: &[
                ("begin_commit", "$q->begin($db) … $q->commit($db)"),
                ("helper", "$q->transaction($db, fn)"),
            ],
            command: php_for("sqlite3"),
        },
        Host {
            name: "php-pdo",
            label: "PHP PDO SQLite",
            hand: "$pdo->exec('BEGIN IMMEDIATE'), INSERT, $pdo->exec('COMMIT')",
            variants: &[
                ("begin_commit", "$q->begin($pdo) … $q->commit($pdo)"),
                ("helper", "$q->transaction($pdo, fn)"),
            ],
            command: php_for("pdo"),
        },
    ]
}

/// The median of `values` (NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn rates(rounds: &[Value], key: &str) -> Vec<f64> {
    rounds
        .iter()
        .map(|r| r.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN))
        .collect()
}

fn list(v: &[f64], f: impl Fn(f64) -> String) -> String {
    v.iter().map(|&x| f(x)).collect::<Vec<_>>().join(" · ")
}

/// Runs every host on its own fresh database (made by `fresh_db`) and
/// reports the host table and its targets.
pub fn scenario(
    quick: bool,
    out: &Path,
    report: &mut Report,
    mut fresh_db: impl FnMut(&str) -> Result<PathBuf>,
) -> Result<()> {
    let (txns, rounds) = if quick { (3_000, 3) } else { (20_000, 5) };
    let mut table = Table::new(
        format!(
            "Scenario 9: one writer from every host, by hand against the queue ({txns} one-row transactions per variant and round, {rounds} alternated rounds)"
        ),
        &[
            "host",
            "transaction",
            "tx/s (median)",
            "÷ by hand, per round",
            "median ÷ by hand",
            "goal ≥ 0.95",
            "by CPU time: median ÷ by hand",
        ],
    );
    let mut json_rows = Vec::new();
    for host in hosts(out) {
        eprintln!("  running the {} host", host.label);
        let measured = match host.command {
            Err(why) => Err(why),
            Ok(mut cmd) => {
                let db = fresh_db(&format!("s9-{}", host.name))?;
                cmd.arg(&db).arg(txns.to_string()).arg(rounds.to_string());
                let result = run_host(cmd);
                if let Some(dir) = db.parent() {
                    let _ = std::fs::remove_dir_all(dir);
                }
                result
            }
        };
        let parsed = match measured {
            Ok(v) => v,
            Err(why) => {
                eprintln!(
                    "writerlock-bench: the {} host not measured: {why}",
                    host.label
                );
                table.row(vec![
                    host.label.into(),
                    "-".into(),
                    "not measured (below)".into(),
                ]);
                table.note(format!("{}: not measured: {why}", host.label));
                for (key, _) in host.variants {
                    report.targets.push(Target::skipped(
                        "S9 one writer: queue ÷ by hand",
                        &format!("{} {key}", host.name),
                        "≥ 0.95",
                        &why,
                    ));
                }
                json_rows
                    .push(json!({"host": host.name, "label": host.label, "not_measured": why}));
                continue;
            }
        };
        let rounds_v = parsed
            .get("rounds")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let hand = rates(&rounds_v, "hand");
        let cpu_rounds = parsed
            .get("cpu_rounds")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let cpu_hand = rates(&cpu_rounds, "hand");
        table.row(vec![
            host.label.into(),
            format!("by hand: {}", host.hand),
            format!("{:.0}", median(&hand)),
            String::new(),
            String::new(),
            String::new(),
        ]);
        let mut variants_json = Vec::new();
        for (key, label) in host.variants {
            let queue = rates(&rounds_v, key);
            let ratios: Vec<f64> = queue.iter().zip(&hand).map(|(q, h)| q / h).collect();
            let m = median(&ratios);
            let cpu_ratios: Vec<f64> = rates(&cpu_rounds, key)
                .iter()
                .zip(&cpu_hand)
                .map(|(q, h)| q / h)
                .collect();
            let cpu_m = median(&cpu_ratios);
            let target = Target::at_least(
                "S9 one writer: queue ÷ by hand",
                &format!("{} {key}", host.name),
                m,
                GOAL,
                |x| format!("{x:.2}"),
            );
            table.row(vec![
                String::new(),
                format!("queue: {label}"),
                format!("{:.0}", median(&queue)),
                list(&ratios, |x| format!("{x:.2}")),
                format!("{m:.2}"),
                if m >= GOAL {
                    "met".into()
                } else {
                    "missed".into()
                },
                format!("{cpu_m:.2}"),
            ]);
            report.targets.push(target);
            variants_json.push(json!({
                "variant": key,
                "label": label,
                "commits_per_s": queue,
                "ratios": ratios,
                "median_ratio": m,
                "cpu_ratios": cpu_ratios,
                "cpu_median_ratio": cpu_m,
            }));
        }
        json_rows.push(json!({
            "host": host.name,
            "label": host.label,
            "hand_label": host.hand,
            "hand_commits_per_s": hand,
            "versions": parsed.as_object().map(|o| o.iter().filter(|(k, _)| *k != "rounds" && *k != "host").map(|(k, v)| (k.clone(), v.clone())).collect::<serde_json::Map<_, _>>()),
            "variants": variants_json,
        }));
    }
    table.note("Each host: one process, one connection, the INSERT prepared once where the host allows; in every round each variant runs the same number of transactions on the same connection, in reversed order every other round; ÷ by hand divides a variant's rate by the hand-written rate of the same round.");
    table.note("By CPU time: the same rounds, each variant's transactions per second of the process's own CPU time (user and system), which other work on a shared machine disturbs less than the clock; the goal is judged on the clock.");
    table.note("Goal: through the queue at least 0.95 × the hand-written BEGIN IMMEDIATE … COMMIT of the same host, for begin/commit and for each host's transaction helper.");
    report.table(table);
    report.record(
        "s9_hosts",
        json!({"transactions_per_round": txns, "rounds": rounds, "goal": GOAL, "hosts": json_rows}),
    );
    Ok(())
}

/// Runs one host program and reads its JSON line.
fn run_host(mut cmd: Command) -> std::result::Result<Value, String> {
    let shown = format!("{cmd:?}");
    let output = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or("");
    match serde_json::from_str::<Value>(line) {
        Ok(v) if output.status.success() && v.get("rounds").is_some() => Ok(v),
        _ => Err(format!(
            "{shown} printed no result ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

/// The CPU time this process has used, in seconds.
fn cpu_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; CLOCK_PROCESS_CPUTIME_ID always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// `writerlock-bench host-rust DATABASE TRANSACTIONS ROUNDS`: the Rust host.
pub fn rust_host(args: &[String]) -> Result<()> {
    let [db, txns, rounds] = args else {
        return Err(BenchError::Config(
            "usage: writerlock-bench host-rust DATABASE TRANSACTIONS ROUNDS".into(),
        ));
    };
    let number = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| BenchError::Config(format!("{s:?} is not a count")))
    };
    let (txns, rounds) = (number(txns)?, number(rounds)?);
    let mut conn = Connection::open(db).map_err(|e| BenchError::sqlite("opening", e))?;
    conn.busy_timeout(Duration::from_secs(5))
        .and_then(|()| conn.execute_batch("PRAGMA synchronous=NORMAL"))
        .map_err(|e| BenchError::sqlite("setting up the connection", e))?;
    let queue = WriterQueue::new(db);
    let wait = Wait::transaction(writerlock::wait::TRANSACTION_WAIT);
    let payload = "x".repeat(64);
    const INSERT: &str = "INSERT INTO t (writer, seq, payload) VALUES (?1, ?2, ?3)";
    let sql = |e: rusqlite::Error| BenchError::sqlite("a transaction", e);
    let queue_err = |e: writerlock::Error| BenchError::Config(format!("the queue: {e}"));
    let row = |conn: &Connection, writer: i64, seq: u64| -> Result<()> {
        conn.prepare_cached(INSERT)
            .and_then(|mut s| s.execute(rusqlite::params![writer, seq as i64, payload]))
            .map(|_| ())
            .map_err(sql)
    };
    let hand = |conn: &mut Connection, writer: i64, seq: u64| -> Result<()> {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        row(&tx, writer, seq)?;
        tx.commit().map_err(sql)
    };
    type Run<'a> = Box<dyn Fn(&mut Connection, u64, u64) -> Result<()> + 'a>;
    let variants: Vec<(&str, Run)> = vec![
        (
            "hand",
            Box::new(|conn, n, seq| (0..n).try_for_each(|i| hand(conn, 0, seq + i))),
        ),
        (
            "begin_commit",
            Box::new(|conn, n, seq| {
                (0..n).try_for_each(|i| {
                    queue.begin(&*conn, &wait).map_err(queue_err)?;
                    row(conn, 1, seq + i)?;
                    queue.commit(&*conn).map_err(queue_err)
                })
            }),
        ),
        (
            "take_release",
            Box::new(|conn, n, seq| {
                (0..n).try_for_each(|i| {
                    queue
                        .take(BusyKind::Transaction, &wait)
                        .map_err(queue_err)?;
                    let done = hand(conn, 2, seq + i);
                    queue.release().map_err(queue_err)?;
                    done
                })
            }),
        ),
    ];
    let mut seq = 0;
    let warm = txns.min(500);
    for (_, run) in &variants {
        run(&mut conn, warm, seq)?;
        seq += warm;
    }
    let mut results = Vec::new();
    let mut cpu_results = Vec::new();
    for r in 0..rounds {
        let order: Vec<&(&str, Run)> = if r % 2 == 0 {
            variants.iter().collect()
        } else {
            variants.iter().rev().collect()
        };
        let mut rates = serde_json::Map::new();
        let mut cpu_rates = serde_json::Map::new();
        for (name, run) in order {
            let start = Instant::now();
            let used = cpu_time();
            run(&mut conn, txns, seq)?;
            rates.insert(
                name.to_string(),
                json!(txns as f64 / start.elapsed().as_secs_f64()),
            );
            cpu_rates.insert(
                name.to_string(),
                json!(txns as f64 / (cpu_time() - used).max(1e-9)),
            );
            seq += txns;
        }
        results.push(Value::Object(rates));
        cpu_results.push(Value::Object(cpu_rates));
    }
    println!(
        "{}",
        json!({"host": "rust", "sqlite": rusqlite::version(), "rounds": results, "cpu_rounds": cpu_results})
    );
    Ok(())
}
