//! The coordinator side of a run: re-executes this binary once per worker
//! (a fresh process, never a fork of this threaded one), waits until every
//! worker is ready, hands them one start instant (CLOCK_MONOTONIC, shared by
//! all processes), waits until every worker is done, then closes their
//! stdin and collects their JSON result lines.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

use crate::clock::now_ns;
use crate::error::{BenchError, Result};
use crate::worker::{Config, Mode};

/// A transaction a worker could not commit.
#[derive(Debug, Clone)]
pub struct Failure {
    /// When it was asked for (ns after the start instant).
    pub call: i64,
    /// When it failed.
    pub at: i64,
    /// Whether it gave up waiting (busy) rather than failing otherwise.
    pub busy: bool,
    /// The error's text.
    pub error: String,
}

/// What one worker reported.
#[derive(Debug, Clone)]
pub struct WorkerResult {
    /// Its index in the run.
    pub id: usize,
    /// How it took its turn.
    pub mode: Mode,
    /// Per committed transaction: when it was asked for.
    pub call: Vec<i64>,
    /// Per committed transaction: when `BEGIN` was granted.
    pub granted: Vec<i64>,
    /// Per committed transaction: when the commit call returned.
    pub released: Vec<i64>,
    /// Per committed transaction, when asked for: the turn held.
    pub turns: Vec<(i64, i64)>,
    /// Transactions that did not commit.
    pub failures: Vec<Failure>,
    /// Waits still running when a timed run ended: (asked, ended).
    pub censored: Vec<(i64, i64)>,
}

/// Every worker's result, times relative to the shared start instant.
#[derive(Debug, Clone)]
pub struct Run {
    /// The workers' results, in spawn order.
    pub workers: Vec<WorkerResult>,
}

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

fn ints(v: &Value, name: &str) -> Vec<i64> {
    v.get(name)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

fn parse_result(id: usize, mode: Mode, v: &Value) -> WorkerResult {
    let turns = ints(v, "turn_start")
        .into_iter()
        .zip(ints(v, "turn_end"))
        .collect();
    let failures = v
        .get("failures")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|f| Failure {
                    call: f.get("call").and_then(Value::as_i64).unwrap_or(0),
                    at: f.get("at").and_then(Value::as_i64).unwrap_or(0),
                    busy: f.get("busy").and_then(Value::as_bool).unwrap_or(false),
                    error: f
                        .get("error")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let censored = v
        .get("censored")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p.get(0)?.as_i64()?, p.get(1)?.as_i64()?)))
                .collect()
        })
        .unwrap_or_default();
    WorkerResult {
        id,
        mode,
        call: ints(v, "call"),
        granted: ints(v, "granted"),
        released: ints(v, "released"),
        turns,
        failures,
        censored,
    }
}

fn read_line(id: usize, p: &mut Proc, what: &str) -> Result<Value> {
    let mut line = String::new();
    let n = p
        .stdout
        .read_line(&mut line)
        .map_err(|e| BenchError::io(format!("reading worker {id}'s {what}"), e))?;
    if n == 0 {
        let status = p
            .child
            .wait()
            .map(|s| s.to_string())
            .unwrap_or_else(|e| e.to_string());
        return Err(BenchError::Worker {
            id,
            message: format!("exited before its {what} line ({status})"),
        });
    }
    serde_json::from_str(&line).map_err(|e| BenchError::Worker {
        id,
        message: format!("unreadable {what} line: {e}"),
    })
}

fn kill_all(procs: &mut [Proc]) {
    for p in procs.iter_mut() {
        // Only our own children, by their handle.
        let _ = p.child.kill();
        let _ = p.child.wait();
    }
}

/// Runs one worker process per configuration, started together.
pub fn run(configs: &[Config]) -> Result<Run> {
    let exe = std::env::current_exe().map_err(|e| BenchError::io("finding this binary", e))?;
    let mut procs: Vec<Proc> = Vec::with_capacity(configs.len());
    for cfg in configs {
        let mut command = if cfg.python {
            let python = match crate::hosts::python() {
                Ok(p) => p,
                Err(why) => {
                    kill_all(&mut procs);
                    return Err(BenchError::Worker {
                        id: cfg.id,
                        message: format!("cannot start a Python worker: {why}"),
                    });
                }
            };
            let mut c = Command::new(python);
            c.arg(crate::hosts::bench_dir().join("hosts/py_worker.py"));
            c
        } else {
            let mut c = Command::new(&exe);
            c.arg("worker");
            c
        };
        let spawned = command
            .arg(cfg.to_json())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut procs);
                return Err(BenchError::io("starting a worker", e));
            }
        };
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            kill_all(&mut procs);
            return Err(BenchError::Worker {
                id: cfg.id,
                message: "no stdout pipe".into(),
            });
        };
        procs.push(Proc {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        });
    }
    let outcome = drive(configs, &mut procs);
    if outcome.is_err() {
        kill_all(&mut procs);
    }
    outcome
}

fn drive(configs: &[Config], procs: &mut [Proc]) -> Result<Run> {
    for (i, p) in procs.iter_mut().enumerate() {
        read_line(i, p, "ready")?;
    }
    // Everyone is ready: one instant, a little ahead so every worker is
    // asleep on it before it passes.
    let start = now_ns() + 20_000_000 + 50_000 * procs.len() as u64;
    for (i, p) in procs.iter_mut().enumerate() {
        let Some(stdin) = p.stdin.as_mut() else {
            continue;
        };
        writeln!(stdin, "{start}")
            .and_then(|()| stdin.flush())
            .map_err(|e| BenchError::io(format!("sending worker {i} the start"), e))?;
    }
    for (i, p) in procs.iter_mut().enumerate() {
        read_line(i, p, "done")?;
    }
    // Everyone is done: let them report and exit.
    for p in procs.iter_mut() {
        drop(p.stdin.take());
    }
    let mut workers = Vec::with_capacity(procs.len());
    for (i, p) in procs.iter_mut().enumerate() {
        let v = read_line(i, p, "result")?;
        let status = p
            .child
            .wait()
            .map_err(|e| BenchError::io(format!("waiting for worker {i}"), e))?;
        if !status.success() {
            return Err(BenchError::Worker {
                id: i,
                message: format!("exited with {status}"),
            });
        }
        workers.push(parse_result(configs[i].id, configs[i].mode, &v));
    }
    Ok(Run { workers })
}
