//! The Postgres scenarios: writes per second through the writer lock
//! (scenario 6) and recovery from an idle holder (scenario 7), on the
//! cluster named by TEST_DATABASE_URL, in a database of their own.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::json;
use writerlock::pg::{self, Connection, Settings, Value};

use crate::analysis::Dist;
use crate::clock::human;
use crate::error::{BenchError, Result};
use crate::report::{Report, Table, Target};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    NoLock,
    LockOnly,
    Library,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::NoLock => "no writer lock (BEGIN; INSERT; COMMIT)",
            Variant::LockOnly => "writer lock only (lock_writer(); INSERT; COMMIT)",
            Variant::Library => "writerlock::pg write() (lock + floor check; INSERT; COMMIT)",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Variant::NoLock => "no-lock",
            Variant::LockOnly => "lock-only",
            Variant::Library => "write",
        }
    }
}

fn one_write(
    conn: &mut Connection,
    variant: Variant,
    client: i64,
    n: i64,
) -> Result<(), pg::Error> {
    let params = [Value::Int(client), Value::Int(n)];
    let insert = "INSERT INTO bench_writes (client, n) VALUES (?, ?)";
    match variant {
        Variant::NoLock => {
            conn.begin()?;
            conn.execute(insert, &params)?;
            conn.commit()
        }
        Variant::LockOnly => {
            conn.lock_writer()?;
            conn.execute(insert, &params)?;
            conn.commit()
        }
        Variant::Library => {
            let mut w = conn.write()?;
            w.execute(insert, &params)?;
            w.commit()
        }
    }
}

struct Outcome {
    writes: usize,
    errors: usize,
    latencies: Vec<i64>,
}

fn run_clients(url: &str, variant: Variant, clients: usize, dur: Duration) -> Result<Outcome> {
    let mut conns = Vec::with_capacity(clients);
    for _ in 0..clients {
        conns.push(
            Connection::connect(url, &Settings::new())
                .map_err(|e| BenchError::pg("connecting a client", e))?,
        );
    }
    // The schema check runs once per address per process: do it before timing.
    if variant == Variant::Library {
        if let Some(c) = conns.first_mut() {
            pg::ensure_schema(c).map_err(|e| BenchError::pg("checking the schema", e))?;
        }
    }
    let barrier = Arc::new(Barrier::new(clients));
    let handles: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut conn)| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut out = Outcome {
                    writes: 0,
                    errors: 0,
                    latencies: Vec::new(),
                };
                let mut n = 0i64;
                while start.elapsed() < dur {
                    let t = Instant::now();
                    match one_write(&mut conn, variant, i as i64, n) {
                        Ok(()) if start.elapsed() <= dur => {
                            out.writes += 1;
                            out.latencies.push(t.elapsed().as_nanos() as i64);
                        }
                        Ok(()) => {}
                        Err(_) => out.errors += 1,
                    }
                    n += 1;
                }
                let _ = conn.close();
                out
            })
        })
        .collect();
    let mut total = Outcome {
        writes: 0,
        errors: 0,
        latencies: Vec::new(),
    };
    for h in handles {
        let o = h.join().map_err(|_| BenchError::Worker {
            id: 0,
            message: "a Postgres client thread panicked".into(),
        })?;
        total.writes += o.writes;
        total.errors += o.errors;
        total.latencies.extend(o.latencies);
    }
    Ok(total)
}

/// Scenarios 6 and 7.
pub fn scenarios(url: &str, quick: bool, report: &mut Report) -> Result<serde_json::Value> {
    let mut db = BenchDb::create(url)?;
    let version = db.version();
    scenario6(&db.url, quick, report)?;
    report.load_note = Some(crate::report::load_average());
    scenario7(&db.url, quick, report)?;
    Ok(json!({"server": version}))
}

fn scenario6(url: &str, quick: bool, report: &mut Report) -> Result<()> {
    let dur = if quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(3)
    };
    let mut table = Table::new(
        format!(
            "Scenario 6: Postgres writes per second (one-row INSERT transactions, {} s per row, client threads)",
            dur.as_secs()
        ),
        &["clients", "writes", "writes/s", "÷ no lock", "latency p50 / p99 / max", "errors"],
    );
    let mut rows = Vec::new();
    for clients in [1usize, 4, 16] {
        let mut base = 0.0;
        for variant in [Variant::NoLock, Variant::LockOnly, Variant::Library] {
            eprintln!("  running s6 {} with {clients} clients", variant.name());
            let o = run_clients(url, variant, clients, dur)?;
            let rate = o.writes as f64 / dur.as_secs_f64();
            if variant == Variant::NoLock {
                base = rate;
            }
            let lat = Dist::of(&o.latencies);
            table.row(vec![
                clients.to_string(),
                variant.label().into(),
                format!("{rate:.0}"),
                format!("{:.2}", rate / base),
                lat.cell(),
                o.errors.to_string(),
            ]);
            rows.push(json!({
                "clients": clients,
                "variant": variant.name(),
                "writes": o.writes,
                "writes_per_s": rate,
                "over_no_lock": rate / base,
                "latency": lat.json_us(),
                "errors": o.errors,
            }));
        }
    }
    table.note("The throwaway cluster runs with fsync=off and synchronous_commit=off (tests/pg-cluster.sh): these are lock and round-trip costs, not disk costs.");
    table.note("write() adds the floor check and the refused-writers query under the lock; lock_writer() is the advisory lock alone.");
    report.table(table);
    let steps = breakdown(url, if quick { 200 } else { 1000 })?;
    let mut detail = Table::new(
        "Scenario 6, detail: where one write() spends its time (1 client, the statements write() sends, timed one by one)",
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
    detail.note("The floor read and the refused-writers query are the statements begin_write() runs under the lock (see src/pg/writer.rs).");
    report.table(detail);
    report.record(
        "s6_pg_writes",
        json!({"duration_s": dur.as_secs_f64(), "rows": rows, "write_steps": step_json}),
    );
    Ok(())
}

/// Times each statement of a library write separately.
fn breakdown(url: &str, writes: usize) -> Result<Vec<(&'static str, Vec<i64>)>> {
    let mut conn = Connection::connect(url, &Settings::new())
        .map_err(|e| BenchError::pg("connecting the timing client", e))?;
    let names = [
        "BEGIN + pg_advisory_xact_lock (lock_writer)",
        "floor read (SELECT version FROM writer_floor)",
        "refused-writers query (refused_writers)",
        "INSERT",
        "COMMIT",
    ];
    let mut times: Vec<Vec<i64>> = vec![Vec::with_capacity(writes); names.len()];
    let floor_sql = "SELECT version FROM writer_floor WHERE name = $1";
    for n in 0..writes {
        let mut t = Instant::now();
        let mut lap = |i: usize, times: &mut Vec<Vec<i64>>| {
            let now = Instant::now();
            times[i].push(now.duration_since(t).as_nanos() as i64);
            t = now;
        };
        let step = (|| -> Result<(), pg::Error> {
            conn.lock_writer()?;
            lap(0, &mut times);
            conn.execute(floor_sql, &[Value::Text(pg::FLOOR_NAME.to_string())])?;
            lap(1, &mut times);
            pg::refused_writers(&mut conn)?;
            lap(2, &mut times);
            conn.execute(
                "INSERT INTO bench_writes (client, n) VALUES (?, ?)",
                &[Value::Int(-2), Value::Int(n as i64)],
            )?;
            lap(3, &mut times);
            conn.commit()?;
            lap(4, &mut times);
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
        "15 s (the seed's setting)".into(),
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
            7,
            "S7 recovery from an idle holder",
            "pg write()",
            took.as_secs_f64(),
            15.5,
            |x| format!("{x:.2} s"),
        ));
    } else {
        report.targets.push(Target::check(
            7,
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
        let mut holder = Settings::new();
        holder.idle_in_transaction(Duration::ZERO);
        let mut waiter = Settings::new();
        waiter.lock_tries(2);
        let window = waiter.get_lock_wait() * waiter.get_lock_tries();
        let (took, error, ended) = recovery(url, &holder, &waiter)?;
        let shown = match &error {
            Some(_) => format!("> {} (gave up)", human(took.as_nanos() as i64)),
            None => human(took.as_nanos() as i64),
        };
        table.row(vec![
            "0 (none)".into(),
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
    table.note("The seed: 15.0 s with the idle limit; the base still waiting after 90 s. Target ≤ 15.5 s (issue 7).");
    report.table(table);
    report.record("s7_pg_recovery", json!(rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::with_database;

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
