//! `writerlock demo` with small counts: real worker processes on a real SQLite database.

mod common;

use common::*;

#[test]
fn small_demo_reports_every_mode_and_the_queue_loses_nothing() {
    let dir = TempDir::new("demo-json");
    let db = dir.file("demo.db");
    let report = run_json(&[
        "demo",
        "--db",
        &db,
        "--processes",
        "8",
        "--writes",
        "2",
        "--hold-ms",
        "2",
        "--json",
    ]);
    assert_eq!(report["database"], db.as_str());
    assert_eq!(report["temporary"], false);
    assert_eq!(report["processes"], 8);
    assert_eq!(report["writes"], 2);
    let modes = report["modes"].as_array().expect("modes");
    let names: Vec<&str> = modes
        .iter()
        .map(|m| m["mode"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["queue", "plain", "immediate"]);
    for m in modes {
        let committed = m["committed"].as_u64().expect("committed");
        let failed = m["failed"].as_u64().expect("failed");
        assert_eq!(m["publishes"], 16, "{m}");
        assert_eq!(committed + failed, 16, "{m}");
        // The database holds exactly what the workers reported, and no update was lost.
        assert_eq!(m["rows_in_db"].as_u64(), Some(committed), "{m}");
        assert_eq!(m["counter"].as_u64(), Some(committed), "{m}");
        let listed: u64 = m["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .map(|e| e["count"].as_u64().expect("count"))
            .sum();
        assert_eq!(listed, failed, "every failure has its error listed: {m}");
    }
    let queue = &modes[0];
    assert_eq!(queue["committed"], 16, "{queue}");
    assert_eq!(queue["failed"], 0, "{queue}");
    assert!(queue["errors"].as_array().is_some_and(|e| e.is_empty()));
    let p50 = queue["wait_p50_ms"].as_f64().expect("p50");
    let p99 = queue["wait_p99_ms"].as_f64().expect("p99");
    let max = queue["wait_max_ms"].as_f64().expect("max");
    assert!(p50 <= p99 && p99 <= max, "{queue}");
    // Queued transactions never overlap: their time holding the lock, added up, fits in
    // the run's total time (and each held at least its 2 ms of work).
    let serial = queue["serial_sum_s"].as_f64().expect("serial sum");
    let total = queue["total_s"].as_f64().expect("total");
    assert!(serial >= 16.0 * 0.002, "{queue}");
    assert!(
        serial <= total + 0.002,
        "serial sum {serial} s above total {total} s"
    );
    assert!(queue["passed_over_max"].as_u64().is_some());

    // The demo's own database now has lock files, and nobody holds or waits.
    let status = run_json(&["status", &db, "--json"]);
    assert_eq!(status["lock_file"]["exists"], true);
    assert!(status["holder"].is_null(), "{status}");
    assert_eq!(status["waiting"], 0);
}

#[test]
fn default_database_is_temporary_and_the_table_is_printed() {
    let out = command(&[
        "demo",
        "--processes",
        "4",
        "--writes",
        "1",
        "--hold-ms",
        "1",
        "--modes",
        "queue,immediate",
    ])
    .stdin(std::process::Stdio::null())
    .output()
    .expect("run the demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    for needle in [
        "mode",
        "committed",
        "wait p50",
        "wait p99",
        "wait max",
        "passed over",
        "queue: total",
        "serial sum",
        "checked: every committed publish is logged",
        "wall time",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let queue_row = text
        .lines()
        .find(|l| l.starts_with("queue "))
        .expect("a queue row");
    assert!(queue_row.contains("4/4"), "{queue_row}");
    assert!(!text.lines().any(|l| l.starts_with("plain ")), "{text}");
    // The temporary database is gone.
    let db_line = text
        .lines()
        .find_map(|l| l.strip_prefix("database: "))
        .expect("the database line");
    let path = db_line
        .strip_suffix(" (temporary, removed)")
        .expect("marked temporary");
    assert!(!std::path::Path::new(path).exists(), "{path} still exists");
    // Progress goes to stderr (plain lines when stderr is not a terminal).
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(
        progress.contains("queue: 4 of 4 publishes done"),
        "{progress}"
    );
    // One total per mode, the table's: the progress line gives none of its own (measured
    // from another start, it disagreed with the table's).
    assert!(
        !progress
            .lines()
            .any(|l| l.contains("publishes done") && l.contains(" in ")),
        "{progress}"
    );
    // While the BEGIN IMMEDIATE mode runs, stderr says why it takes seconds, before its
    // progress.
    let why = progress
        .find("immediate: running BEGIN IMMEDIATE without the queue")
        .unwrap_or_else(|| panic!("no note for the immediate mode: {progress}"));
    let done = progress
        .find("immediate: 4 of 4")
        .expect("the immediate mode's progress");
    assert!(why < done, "{progress}");
}

#[test]
fn bad_arguments_are_refused() {
    for args in [
        &["demo", "--modes", "queue,bogus"][..],
        &["demo", "--processes", "0"][..],
        &["demo", "--hold-ms", "soon"][..],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let line = assert_one_line_error(&out);
        assert!(line.contains("invalid value"), "{line}");
    }
}

#[test]
fn help_defines_passed_over() {
    let help = run_ok(&["demo", "--help"]);
    assert!(help.contains("passed over"), "{help}");
    assert!(help.contains("arrived later"), "{help}");
    for flag in [
        "--db",
        "--processes",
        "--writes",
        "--hold-ms",
        "--modes",
        "--json",
    ] {
        assert!(help.contains(flag), "missing {flag}");
    }
}

#[test]
fn the_heading_comes_first_while_the_demo_still_runs() {
    use std::io::{BufRead, BufReader};
    let mut child = command(&[
        "demo",
        "--processes",
        "2",
        "--writes",
        "2",
        "--hold-ms",
        "400",
        "--modes",
        "queue,immediate",
    ])
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("start the demo");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut heading = Vec::new();
    for _ in 0..5 {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the heading");
        heading.push(line);
    }
    // Four 400 ms publishes in turn take 1.6 s: the heading arrived before they ended.
    let running = child.try_wait().expect("try_wait").is_none();
    let rest: String = stdout.lines().map(|l| l.expect("a line") + "\n").collect();
    let status = child.wait().expect("wait");
    assert!(status.success(), "{heading:?}{rest}");
    assert!(
        running,
        "the heading came only after the demo ended: {heading:?}"
    );
    assert!(
        heading[0].starts_with("writerlock demo: 2 processes publish 2 times each"),
        "{heading:?}"
    );
    assert!(heading[1].starts_with("database: "), "{heading:?}");
    assert!(heading[2].trim_start().starts_with("queue "), "{heading:?}");
    assert!(
        heading[3].trim_start().starts_with("immediate "),
        "{heading:?}"
    );
    assert!(heading[4].contains("takes seconds"), "{heading:?}");
    assert!(rest.contains("committed"), "the table follows: {rest}");
}
