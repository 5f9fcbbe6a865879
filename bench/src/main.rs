//! `writerlock-bench`: the benchmark suite behind `make bench`.
//!
//! Runs the SQLite write queue (`Strategy::Poll`, Exponential's driver protocol, and
//! `Strategy::Handoff`, the futex hand-off page) and the Postgres writer
//! lock against what users would otherwise run, in one run on one machine,
//! and prints a table per scenario with its targets, baselines marked as baselines.
//! Figures are reported, never asserted.
//!
//! ```text
//! writerlock-bench [--quick] [--only 1,2,3,4,5,8,9,6,7,10] [--out DIR] [--record DIR]
//! writerlock-bench worker CONFIG      (internal: one worker process)
//! ```

mod analysis;
mod chart;
mod clock;
mod driverlock;
mod error;
mod hosts;
mod pg;
mod provenance;
mod report;
mod rtcount;
mod spawn;
mod sqlite;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::json;

use crate::report::{Report, Target};

const USAGE: &str =
    "usage: writerlock-bench [--quick] [--only 1,2,3,4,5,8,9,6,7,10] [--writers 1,2,4,8,16] [--out DIR] [--record DIR]
  --quick    the short run (also QUICK=1 in the environment)
  --only     run only these scenarios (4 and 5 use the runs of 1 and 3)
  --writers  scenario 3's writer counts (default 1,2,4,8,16; targets need 16)
  --out      where results.json, results.txt and waits.svg go (default target/bench)
  --record   also write results.json as DIR/MACHINE.json (the committed results file),
             only after a complete run: every scenario, the default writer counts, no
             errors; MACHINE is BENCH_MACHINE, or the CPU count and model (2cpu-amd-epyc)
The Postgres scenarios (6, 7, 10) need TEST_DATABASE_URL; bench/run.sh provides a throwaway cluster.";

/// One SQLite scenario.
type Step = fn(&mut sqlite::Sqlite) -> error::Result<()>;

struct Options {
    quick: bool,
    only: Vec<String>,
    writers: Vec<usize>,
    out: PathBuf,
    record: Option<PathBuf>,
}

/// Scenario 3's writer counts unless `--writers` says otherwise.
const DEFAULT_WRITERS: [usize; 5] = [1, 2, 4, 8, 16];

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        quick: std::env::var("QUICK").is_ok_and(|v| !v.is_empty() && v != "0"),
        only: Vec::new(),
        writers: DEFAULT_WRITERS.to_vec(),
        out: PathBuf::from("target/bench"),
        record: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--only" => {
                let v = it.next().ok_or("--only needs a list")?;
                o.only = v.split(',').map(|s| s.trim().to_string()).collect();
            }
            "--writers" => {
                let v = it.next().ok_or("--writers needs a list")?;
                o.writers = v
                    .split(',')
                    .map(|s| s.trim().parse::<usize>().ok().filter(|&n| n > 0))
                    .collect::<Option<Vec<_>>>()
                    .ok_or(format!("--writers wants positive counts, got {v:?}"))?;
            }
            "--out" => o.out = PathBuf::from(it.next().ok_or("--out needs a directory")?),
            "--record" => {
                o.record = Some(PathBuf::from(
                    it.next().ok_or("--record needs a directory")?,
                ));
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    read_trimmed("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("host-rust") {
        return match hosts::rust_host(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("writerlock-bench host-rust: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("worker") {
        let Some(config) = args.get(1) else {
            eprintln!("writerlock-bench worker: missing CONFIG");
            return ExitCode::from(2);
        };
        return match worker::main(config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("writerlock-bench worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let opts = match parse(&args) {
        Ok(o) => o,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("writerlock-bench: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    run(&opts)
}

fn run(opts: &Options) -> ExitCode {
    let wants = |s: &str| opts.only.is_empty() || opts.only.iter().any(|o| o == s);
    let started = Instant::now();
    let load_before = read_trimmed("/proc/loadavg");
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let machine = provenance::machine(cores, &cpu_model());
    // The code measured: read before the first scenario, the build being done.
    let checkout = provenance::checkout();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // SAFETY: getpriority reads this process's nice value.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    println!(
        "writerlock-bench{}: {cores} cores ({}), load average {load_before}, nice {nice}, SQLite {}",
        if opts.quick { " (QUICK)" } else { "" },
        cpu_model(),
        rusqlite::version()
    );
    println!();
    let mut report = Report::default();
    let mut errors: Vec<String> = Vec::new();
    let tmp = std::env::temp_dir().join(format!("writerlock-bench-{}", std::process::id()));

    {
        let mut sq = sqlite::Sqlite::new(opts.quick, &tmp, &mut report);
        sq.set_s3_writers(&opts.writers);
        sq.set_out(&opts.out);
        let steps: [(&str, Step); 7] = [
            ("1", |s| s.scenario1()),
            ("2", |s| s.scenario2()),
            ("3", |s| s.scenario3()),
            ("4", |s| s.scenario4()),
            ("5", |s| s.scenario5()),
            ("8", |s| s.mixed()),
            ("9", |s| s.hosts()),
        ];
        for (id, step) in steps {
            if wants(id) {
                eprintln!("scenario {id}");
                sq.report().load_note = Some(report::load_average());
                if let Err(e) = step(&mut sq) {
                    eprintln!("writerlock-bench: scenario {id} failed: {e}");
                    errors.push(format!("scenario {id}: {e}"));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);

    let mut pg_meta = json!(null);
    if wants("6") || wants("7") || wants("10") {
        match std::env::var("TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => {
                eprintln!("scenarios 6, 7 and 10 (Postgres)");
                report.load_note = Some(report::load_average());
                match pg::scenarios(
                    &url,
                    opts.quick,
                    &opts.out,
                    (wants("6"), wants("7"), wants("10")),
                    &mut report,
                ) {
                    Ok(meta) => pg_meta = meta,
                    Err(e) => {
                        eprintln!("writerlock-bench: Postgres scenarios failed: {e}");
                        errors.push(format!("Postgres: {e}"));
                    }
                }
            }
            _ => {
                let msg = "the Postgres scenarios (6, 7, 10) need TEST_DATABASE_URL: run bench/run.sh, which starts a throwaway cluster (tests/with-postgres.sh; apt-get install -y postgresql)";
                eprintln!("writerlock-bench: {msg}");
                errors.push(msg.into());
                report.targets.push(Target::skipped(
                    "S7 recovery from an idle holder",
                    "pg write()",
                    "≤ 15.50 s",
                    "no TEST_DATABASE_URL",
                ));
                if wants("10") {
                    report.targets.push(Target::skipped(
                        "S10 Postgres executemany, 10,000 rows in a transaction",
                        "writerlock ÷ psycopg speed",
                        "≥ 1.00",
                        "no TEST_DATABASE_URL",
                    ));
                }
            }
        }
    }

    // A figure that could not be measured (a client program or module missing, say) makes
    // the run incomplete: committed results hold every figure. A figure a QUICK run leaves
    // out by design (Target::omitted) is no such failure.
    errors.extend(not_measured(&report.targets));
    let targets = report.targets_table();
    report.table(targets);
    let elapsed = started.elapsed();
    let load_after = read_trimmed("/proc/loadavg");
    let left_out = report.targets.iter().filter(|t| t.is_left_out()).count();
    let complete = opts.only.is_empty()
        && opts.writers == DEFAULT_WRITERS
        && errors.is_empty()
        && left_out == 0;
    let meta = json!({
        "machine": machine,
        "run": if opts.quick { "quick" } else { "full" },
        "complete": complete,
        "commit": checkout["commit"],
        "uncommitted_changes": checkout["uncommitted_changes"],
        "date": provenance::iso_utc(started_unix),
        "cores": cores,
        "cpu": cpu_model(),
        "kernel": read_trimmed("/proc/sys/kernel/osrelease"),
        "load_before": load_before,
        "nice": nice,
        "load_after": load_after,
        "elapsed_s": elapsed.as_secs_f64(),
        "sqlite": sqlite::describe(opts.quick),
        "postgres": pg_meta,
        "unix_time": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        "errors": errors,
    });
    let subtitle = format!(
        "{cores} cores ({}), SQLite {}, {}; load average before {load_before}, nice {nice}",
        cpu_model(),
        rusqlite::version(),
        if opts.quick { "QUICK run" } else { "full run" }
    );
    match write_outputs(opts, &report, meta, &subtitle) {
        Ok(text) => {
            if let Some(dir) = &opts.record {
                let file = dir.join(format!("{machine}.json"));
                if let Err(e) = record(&file, &text, opts, &errors) {
                    eprintln!("writerlock-bench: {e}");
                    errors.push(e);
                }
            }
        }
        Err(e) => {
            eprintln!("writerlock-bench: {e}");
            errors.push(e.to_string());
        }
    }
    println!(
        "writerlock-bench: done in {:.1} s (load average after: {load_after}); results in {}",
        elapsed.as_secs_f64(),
        opts.out.display()
    );
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        for e in &errors {
            eprintln!("writerlock-bench: not measured: {e}");
        }
        ExitCode::FAILURE
    }
}

/// The figures that could not be measured, each as an error of the run; the
/// figures a QUICK run leaves out by design are not among them.
fn not_measured(targets: &[Target]) -> Vec<String> {
    targets
        .iter()
        .filter(|t| t.not_measured())
        .map(|t| format!("{} ({}): {}", t.what, t.mode, t.distance))
        .collect()
}

/// Writes the results file `text` to `file` after a complete run; after
/// any other run says why it leaves `file` as it is.
fn record(
    file: &std::path::Path,
    text: &str,
    opts: &Options,
    errors: &[String],
) -> Result<(), String> {
    let why_not = if !opts.only.is_empty() {
        Some("only some scenarios ran (--only)".to_string())
    } else if opts.writers != DEFAULT_WRITERS {
        Some("scenario 3 ran other writer counts (--writers)".to_string())
    } else if !errors.is_empty() {
        Some(format!(
            "{} scenario(s) could not be measured",
            errors.len()
        ))
    } else {
        None
    };
    if let Some(why) = why_not {
        println!("writerlock-bench: {} left as it was: {why}", file.display());
        return Ok(());
    }
    let written = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(file, text));
    written.map_err(|e| format!("writing {}: {e}", file.display()))?;
    println!(
        "writerlock-bench: results recorded in {} (make bench-readme puts them in docs/performance.md)",
        file.display()
    );
    Ok(())
}

/// Writes results.json, results.txt and waits.svg; returns the JSON text.
fn write_outputs(
    opts: &Options,
    report: &Report,
    meta: serde_json::Value,
    subtitle: &str,
) -> error::Result<String> {
    let io = |what: &str, e| error::BenchError::io(what.to_string(), e);
    std::fs::create_dir_all(&opts.out).map_err(|e| io("creating the output directory", e))?;
    let json = report.to_json(meta);
    let text = serde_json::to_string_pretty(&json).unwrap_or_default();
    let text = text + "\n";
    std::fs::write(opts.out.join("results.json"), &text)
        .map_err(|e| io("writing results.json", e))?;
    let tables: String = report
        .tables
        .iter()
        .map(|t| t.render())
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(opts.out.join("results.txt"), tables)
        .map_err(|e| io("writing results.txt", e))?;
    std::fs::write(
        opts.out.join("waits.svg"),
        chart::svg(&report.series, subtitle),
    )
    .map_err(|e| io("writing waits.svg", e))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::{not_measured, parse, record};
    use crate::report::Target;

    #[test]
    fn a_figure_left_out_by_design_is_no_failure() {
        let quick = Target::omitted(
            "S2 nothing lost, 256 processes × 3",
            "queue",
            "all committed, none lost",
            "a QUICK run skips the 256 processes",
        );
        assert!(quick.is_left_out() && !quick.not_measured());
        assert!(not_measured(std::slice::from_ref(&quick)).is_empty());
        let missing = Target::skipped(
            "S9 one writer: queue ÷ by hand",
            "python begin_commit",
            "≥ 0.95",
            "no Python",
        );
        let errors = not_measured(&[quick, missing]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("python begin_commit") && errors[0].contains("no Python"));
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_a_complete_run_is_recorded() {
        let dir =
            std::env::temp_dir().join(format!("writerlock-bench-record-{}", std::process::id()));
        let file = dir.join("results").join("m.json");
        let _ = std::fs::remove_dir_all(&dir);
        let partial = [
            (args(&["--only", "1"]), Vec::new()),
            (args(&["--writers", "1,16"]), Vec::new()),
            (Vec::new(), vec!["Postgres: no server".to_string()]),
        ];
        for (argv, errors) in &partial {
            let opts = parse(argv).expect("arguments");
            record(&file, "{}\n", &opts, errors).expect("a partial run is no error");
            assert!(!file.exists(), "{argv:?} {errors:?} recorded its results");
        }
        let opts = parse(&args(&["--quick"])).expect("arguments");
        record(&file, "{\"x\": 1}\n", &opts, &[]).expect("recording");
        assert_eq!(
            std::fs::read_to_string(&file).expect("the results file"),
            "{\"x\": 1}\n"
        );
        std::fs::remove_dir_all(&dir).expect("cleaning up");
    }
}
