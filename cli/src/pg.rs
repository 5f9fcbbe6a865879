//! `writerlock pg ...`: the ledger spec's `psql` snippets and sampling loops for the shared
//! Postgres ledger database, as one command each.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Subcommand;
use serde::Serialize;
use writerlock::pg::{
    admin, refused_writers, setup_schema, stored_floor, Address, Connection, SettingStatus,
    Settings, Value, REQUIRED, VERSION,
};

use crate::duration::{human, short, utc_now};
use crate::error::CliError;
use crate::output::{print_json, print_json_line, print_line, secs, Align, Table};

/// The long help of the subcommand.
pub const PG_HELP: &str = "\
Checks a shared Postgres ledger database. The address comes from --url or the environment \
variable WRITERLOCK_DATABASE_URL, as a URL (postgresql://user:password@host:5432/dbname) or \
libpq key=value pairs, or else from the libpq variables PGHOST, PGPORT, PGUSER and \
PGDATABASE alone; what it leaves out comes from the PG* variables and the password file as \
with psql. TLS follows libpq too: sslmode (prefer by default; require, verify-ca and \
verify-full never fall back to clear text), sslrootcert, sslcert and sslkey in the address, \
or the PGSSLMODE, PGSSLROOTCERT, PGSSLCERT and PGSSLKEY variables. Its password never \
appears in output.

Every subcommand connects with the settings a writer connection carries (lock_timeout 10s, \
idle_in_transaction_session_timeout 15s, statement_timeout 60s, \
agentihooks.ledger_writer_version 1) and only reads, except `setup`.";

const SETUP_HELP: &str = "\
Runs the schema setup a writer runs once per database address: under the writer lock it \
creates the writer_floor table, the ledger_writer_floor trigger (and minimal ledgers and \
row_changes tables where missing), and stores the floor this code requires (1) with \
INSERT ... ON CONFLICT ... GREATEST(...). That is what raises the stored floor: it never \
lowers a higher one.

There is no command to lower the floor. Lowering it is a manual statement, and only makes \
sense once every newer writer is gone:

  UPDATE writer_floor SET version = <n> WHERE name = 'ledger'";

const WATCH_IDLE_HELP: &str = "\
Samples the writer lock's holder every --interval for --for, and prints one line for each \
sample in which a holder sits idle in transaction for longer than --over (the ledger spec's \
psql loop printed the same lines), and a heartbeat line for each sample that found none, so \
a quiet hour still shows the loop at work. At the end (or on Ctrl-C) it reports the figure \
the ledger spec measures: minutes per day that a writer lock holder sits idle in transaction for over \
--over, computed as samples with a stuck holder x interval, scaled from the sampled window \
to 24 hours. With the idle limit at 15 seconds every sample should show none.";

const WATCH_BUMPS_HELP: &str = "\
Samples every ledger's newest generation every --interval for --for and prints each \
unrecorded generation bump (a generation with no row_changes row) once per run, the first \
time a sample sees it. A sample sees only each ledger's newest generation, so bumps between \
samples go uncounted; a ledger nobody has written since it was created shows once without \
being a bump, because creation records no changed rows.";

/// Arguments of `writerlock pg`.
#[derive(Debug, clap::Args)]
pub struct PgArgs {
    /// The database address (a postgresql:// URL or libpq key=value pairs); its password
    /// never appears in output.
    #[arg(
        long,
        global = true,
        env = "WRITERLOCK_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub url: Option<String>,
    /// Whether to print JSON: the command line's global `--json`.
    #[arg(skip)]
    pub json: bool,
    /// What to check.
    #[command(subcommand)]
    pub command: PgCommand,
}

/// The `pg` subcommands.
#[derive(Debug, Subcommand)]
pub enum PgCommand {
    /// The session settings a writer connection carries, and whether each took effect (the
    /// ledger spec's SHOW check).
    Settings,
    /// Sessions holding or waiting for the writer lock, with state, time in state, client
    /// address and application name (the ledger spec's holder query).
    Holders,
    /// The stored writer floor: the oldest writer version the database allows.
    Floor,
    /// Refused writers still connected, with the version each sent and the floor it hit.
    Refused,
    /// Sample holders idle in transaction, and report minutes per day with a stuck holder.
    #[command(long_about = WATCH_IDLE_HELP)]
    WatchIdle {
        /// Time between samples (30, 30s, 5m, 1h).
        #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "30s")]
        interval: Duration,
        /// How long to sample.
        #[arg(long = "for", value_name = "DURATION", value_parser = crate::duration::parse, default_value = "1h")]
        duration: Duration,
        /// A holder idle in transaction for longer than this counts as stuck.
        #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "30s")]
        over: Duration,
    },
    /// Sample unrecorded generation bumps, printing each once.
    #[command(long_about = WATCH_BUMPS_HELP)]
    WatchBumps {
        /// Time between samples (5, 5s, 1m).
        #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse, default_value = "5s")]
        interval: Duration,
        /// How long to sample.
        #[arg(long = "for", value_name = "DURATION", value_parser = crate::duration::parse, default_value = "1h")]
        duration: Duration,
    },
    /// Run the schema setup, which stores (raises, never lowers) the writer floor.
    #[command(long_about = SETUP_HELP)]
    Setup,
}

/// The libpq variables that name an address without `--url` or `WRITERLOCK_DATABASE_URL`.
const LIBPQ_ADDRESS_VARS: &[&str] = &["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE"];

/// A connected session with the address it was opened at.
struct Session {
    conn: Connection,
    address: Address,
}

impl Session {
    fn open(url: Option<&str>, verify: bool) -> Result<Session, CliError> {
        let url = match url.map(str::trim).filter(|u| !u.is_empty()) {
            Some(url) => url,
            // As psql: the libpq variables alone name an address (completed in
            // `Address::parse`).
            None if LIBPQ_ADDRESS_VARS
                .iter()
                .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())) =>
            {
                "postgresql://"
            }
            None => return Err(CliError::NoAddress),
        };
        let address = Address::parse(url).map_err(|e| CliError::pg(&e, None))?;
        let conn = Connection::open(&address, &Settings::new(), verify)
            .map_err(|e| CliError::pg(&e, Some(&address)))?;
        Ok(Session { conn, address })
    }

    fn err(&self, e: writerlock::pg::Error) -> CliError {
        CliError::pg(&e, Some(&self.address))
    }
}

/// Runs `writerlock pg ...`.
pub fn run(args: &PgArgs) -> Result<ExitCode, CliError> {
    let url = args.url.as_deref();
    match &args.command {
        PgCommand::Settings => settings(url, args.json),
        PgCommand::Holders => holders(url, args.json),
        PgCommand::Floor => floor(url, args.json),
        PgCommand::Refused => refused(url, args.json),
        PgCommand::WatchIdle {
            interval,
            duration,
            over,
        } => watch_idle(url, args.json, *interval, *duration, *over),
        PgCommand::WatchBumps { interval, duration } => {
            watch_bumps(url, args.json, *interval, *duration)
        }
        PgCommand::Setup => setup(url, args.json),
    }
}

/// One setting as sent and as shown.
#[derive(Debug, Serialize)]
struct SettingRow {
    name: String,
    sent: String,
    shown: Option<String>,
    /// `in_effect`, `not_in_effect`, `not_applicable` or `client_side`.
    status: &'static str,
}

#[derive(Debug, Serialize)]
struct SettingsReport {
    address: String,
    pid: i32,
    settings: Vec<SettingRow>,
    all_in_effect: bool,
}

fn settings(url: Option<&str>, json: bool) -> Result<ExitCode, CliError> {
    let mut s = Session::open(url, false)?;
    let checks = s.conn.check_settings().map_err(|e| s.err(e))?;
    let mut rows: Vec<SettingRow> = checks
        .into_iter()
        .map(|c| SettingRow {
            name: c.name,
            sent: c.sent,
            shown: c.shown,
            status: match c.status {
                SettingStatus::InEffect => "in_effect",
                SettingStatus::NotInEffect => "not_in_effect",
                SettingStatus::NotApplicable => "not_applicable",
            },
        })
        .collect();
    let cfg = s.conn.settings().clone();
    let client = [
        (
            "keepalives",
            if cfg.get_keepalives() { "1" } else { "0" }.to_string(),
        ),
        (
            "keepalives_idle",
            cfg.get_keepalives_idle().as_secs().to_string(),
        ),
        (
            "keepalives_interval",
            cfg.get_keepalives_interval().as_secs().to_string(),
        ),
        ("keepalives_count", cfg.get_keepalives_count().to_string()),
    ];
    rows.extend(client.into_iter().map(|(name, sent)| SettingRow {
        name: name.to_string(),
        sent,
        shown: None,
        status: "client_side",
    }));
    let missing: Vec<String> = rows
        .iter()
        .filter(|r| r.status == "not_in_effect")
        .map(|r| r.name.clone())
        .collect();
    let report = SettingsReport {
        address: s.address.to_string(),
        pid: s.conn.pid(),
        settings: rows,
        all_in_effect: missing.is_empty(),
    };
    if json {
        print_json(&report)?;
    } else {
        let mut t = Table::new(&[
            ("setting", Align::Left),
            ("sent", Align::Left),
            ("server shows", Align::Left),
            ("in effect", Align::Left),
        ]);
        for r in &report.settings {
            t.row(vec![
                r.name.clone(),
                r.sent.clone(),
                r.shown.clone().unwrap_or_else(|| "-".to_string()),
                match r.status {
                    "in_effect" => "yes",
                    "not_in_effect" => "NO",
                    "not_applicable" => "n/a (Unix socket: no TCP)",
                    _ => "client side (libpq TCP keepalives)",
                }
                .to_string(),
            ]);
        }
        let mut out = format!(
            "a writer session at {} (backend pid {})\n\n",
            report.address, report.pid
        );
        out.push_str(&t.render());
        out.push_str(
            "\nA psql session of your own shows the server defaults, not these values: the \
             settings belong to each writer connection.",
        );
        print_line(&out)?;
    }
    if missing.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::SettingsNotInEffect {
            names: missing.join(", "),
        })
    }
}

#[derive(Debug, Serialize)]
struct HolderRow {
    pid: i32,
    granted: bool,
    state: Option<String>,
    in_state_s: Option<f64>,
    client_addr: Option<String>,
    application_name: Option<String>,
}

impl From<&admin::Holder> for HolderRow {
    fn from(h: &admin::Holder) -> HolderRow {
        HolderRow {
            pid: h.pid,
            granted: h.granted,
            state: h.state.clone(),
            in_state_s: h.in_state.map(secs),
            client_addr: h.client_addr.clone(),
            application_name: h.application_name.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
struct HoldersReport {
    address: String,
    holders: Vec<HolderRow>,
}

fn holders(url: Option<&str>, json: bool) -> Result<ExitCode, CliError> {
    let mut s = Session::open(url, false)?;
    let list = admin::holders(&mut s.conn).map_err(|e| s.err(e))?;
    let report = HoldersReport {
        address: s.address.to_string(),
        holders: list.iter().map(HolderRow::from).collect(),
    };
    if json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    if report.holders.is_empty() {
        print_line("Nobody holds or waits for the writer lock.")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&[
        ("pid", Align::Right),
        ("granted", Align::Left),
        ("state", Align::Left),
        ("in state", Align::Right),
        ("client", Align::Left),
        ("application", Align::Left),
    ]);
    for h in &list {
        t.row(vec![
            h.pid.to_string(),
            if h.granted { "holds" } else { "waits" }.to_string(),
            h.state.clone().unwrap_or_else(|| "-".to_string()),
            h.in_state.map(human).unwrap_or_else(|| "-".to_string()),
            h.client_addr
                .clone()
                .unwrap_or_else(|| "local socket".to_string()),
            h.application_name
                .clone()
                .unwrap_or_else(|| "-".to_string()),
        ]);
    }
    let waiting = list.iter().filter(|h| !h.granted).count();
    let mut out = t.render();
    out.push_str(&format!(
        "\n{} holder, {waiting} waiting. A holder stays idle in transaction for at most about \
         15 seconds with the writer settings; each waiter waits at most 10 seconds per attempt.",
        list.iter().filter(|h| h.granted).count()
    ));
    print_line(&out)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Serialize)]
struct FloorReport {
    address: String,
    table_exists: bool,
    floor: Option<i64>,
    code_version: u16,
    code_required: u16,
}

fn floor_table_exists(s: &mut Session) -> Result<bool, CliError> {
    let rows = s
        .conn
        .execute(writerlock::pg::floor::FLOOR_TABLE_SQL, &[])
        .map_err(|e| s.err(e))?;
    Ok(rows.first().and_then(|r| r.get(0)).and_then(Value::as_bool) == Some(true))
}

fn read_floor(s: &mut Session) -> Result<(bool, Option<i64>), CliError> {
    let exists = floor_table_exists(s)?;
    let floor = stored_floor(&mut s.conn).map_err(|e| s.err(e))?;
    Ok((exists, floor))
}

fn floor(url: Option<&str>, json: bool) -> Result<ExitCode, CliError> {
    let mut s = Session::open(url, false)?;
    let (table_exists, floor) = read_floor(&mut s)?;
    let report = FloorReport {
        address: s.address.to_string(),
        table_exists,
        floor,
        code_version: VERSION,
        code_required: REQUIRED,
    };
    if json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = match (table_exists, floor) {
        (false, _) => "No stored floor: the writer_floor table does not exist, so no writer on \
                       floor code has set this database up yet (`writerlock pg setup` does)."
            .to_string(),
        (true, None) => "No stored floor: writer_floor has no 'ledger' row, so no writer on \
                         floor code has stored one yet (`writerlock pg setup` does)."
            .to_string(),
        (true, Some(f)) => format!(
            "{f}\nThe stored floor is {f}: writers below version {f} are refused. This code \
             writes as version {VERSION} and stores {REQUIRED}."
        ),
    };
    print_line(&text)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Serialize)]
struct RefusedRow {
    writer: String,
    pid: i32,
    version: i64,
    floor: i64,
    refusal: String,
}

#[derive(Debug, Serialize)]
struct RefusedReport {
    address: String,
    refused: Vec<RefusedRow>,
}

fn refused(url: Option<&str>, json: bool) -> Result<ExitCode, CliError> {
    let mut s = Session::open(url, false)?;
    let list = refused_writers(&mut s.conn).map_err(|e| s.err(e))?;
    let report = RefusedReport {
        address: s.address.to_string(),
        refused: list
            .iter()
            .map(|w| RefusedRow {
                writer: w.writer.clone(),
                pid: w.pid,
                version: w.version,
                floor: w.floor,
                refusal: w.refusal(),
            })
            .collect(),
    };
    if json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    if report.refused.is_empty() {
        print_line("No refused writer is connected.")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&[
        ("writer", Align::Left),
        ("pid", Align::Right),
        ("version", Align::Right),
        ("floor", Align::Right),
    ]);
    for w in &report.refused {
        t.row(vec![
            w.writer.clone(),
            w.pid.to_string(),
            w.version.to_string(),
            w.floor.to_string(),
        ]);
    }
    let mut out = t.render();
    out.push_str(
        "\nEach is a ledger server on code older than the stored floor, still connected: \
         update and restart it.",
    );
    print_line(&out)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Serialize)]
struct SetupReport {
    address: String,
    before: Option<i64>,
    after: Option<i64>,
    required: u16,
}

fn setup(url: Option<&str>, json: bool) -> Result<ExitCode, CliError> {
    // The setup writes: it needs a session whose settings took effect.
    let mut s = Session::open(url, true)?;
    let (_, before) = read_floor(&mut s)?;
    setup_schema(&mut s.conn, None).map_err(|e| s.err(e))?;
    let (_, after) = read_floor(&mut s)?;
    let report = SetupReport {
        address: s.address.to_string(),
        before,
        after,
        required: REQUIRED,
    };
    if json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let was = before.map_or_else(|| "none".to_string(), |b| b.to_string());
    let now = after.map_or_else(|| "none".to_string(), |a| a.to_string());
    let mut text = format!("Schema set up; stored floor {now} (was {was}).");
    if after.is_some_and(|a| a > i64::from(REQUIRED)) {
        text.push_str(&format!(
            " It stays above this code's {REQUIRED}: the setup never lowers it."
        ));
    }
    print_line(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Set by SIGINT/SIGTERM: the watch loops stop and print their summary.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn catch_stop_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// Sleeps until `at`, waking early when a stop signal arrives. Returns false if stopped.
fn sleep_until(at: Instant) -> bool {
    loop {
        if STOP.load(Ordering::SeqCst) {
            return false;
        }
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// What a sampling loop is about to do, on stderr when it is a terminal (so that an error
/// stays the only line on stderr in scripts).
fn banner(text: &str) {
    if crate::output::is_tty(2) {
        eprintln!("{text}");
    }
}

fn check_window(interval: Duration, duration: Duration) -> Result<u64, CliError> {
    if interval.is_zero() {
        return Err(CliError::InvalidArgument {
            name: "--interval",
            reason: "it must be above zero".to_string(),
        });
    }
    // One sample per interval covering the window: at 0, interval, 2 x interval, ...
    let samples = (duration.as_secs_f64() / interval.as_secs_f64())
        .ceil()
        .max(1.0);
    Ok(samples as u64)
}

/// Runs `sample` at 0, interval, 2 x interval, ... for `planned` samples or until stopped.
/// Returns how many samples ran.
fn sample_loop(
    interval: Duration,
    planned: u64,
    mut sample: impl FnMut() -> Result<(), CliError>,
) -> Result<u64, CliError> {
    catch_stop_signals();
    let start = Instant::now();
    let mut taken = 0;
    for k in 0..planned {
        let at = start + interval.mul_f64(k as f64);
        if !sleep_until(at) {
            break;
        }
        sample()?;
        taken += 1;
    }
    Ok(taken)
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum IdleEvent {
    Sample {
        at: String,
        holders: Vec<HolderRow>,
    },
    /// A sample that found no stuck holder: proof the loop is alive.
    Heartbeat {
        at: String,
        sample: u64,
        of: u64,
        stuck_samples: u64,
    },
    Summary {
        address: String,
        samples: u64,
        stuck_samples: u64,
        interval_s: f64,
        over_s: f64,
        window_s: f64,
        stuck_minutes: f64,
        minutes_per_day: f64,
    },
}

fn watch_idle(
    url: Option<&str>,
    json: bool,
    interval: Duration,
    duration: Duration,
    over: Duration,
) -> Result<ExitCode, CliError> {
    let planned = check_window(interval, duration)?;
    let mut s = Session::open(url, false)?;
    banner(&format!(
        "sampling the writer lock holder every {} for {} ({} samples); a line for each \
         sample with a holder idle in transaction for over {}; Ctrl-C ends early with the \
         summary",
        short(interval),
        short(duration),
        planned,
        short(over)
    ));
    let mut stuck = 0u64;
    let mut sample = 0u64;
    let taken = sample_loop(interval, planned, || {
        let idle = admin::idle_holders(&mut s.conn, over).map_err(|e| s.err(e))?;
        sample += 1;
        let at = utc_now();
        if idle.is_empty() {
            // A heartbeat each quiet interval, so an hour of good news is not silence.
            return if json {
                print_json_line(&IdleEvent::Heartbeat {
                    at,
                    sample,
                    of: planned,
                    stuck_samples: stuck,
                })
            } else {
                print_line(&format!(
                    "{at}  sample {sample} of {planned}: no writer lock holder idle in \
                     transaction for over {} ({stuck} stuck samples so far)",
                    short(over)
                ))
            };
        }
        stuck += 1;
        if json {
            print_json_line(&IdleEvent::Sample {
                at,
                holders: idle.iter().map(HolderRow::from).collect(),
            })
        } else {
            for h in &idle {
                print_line(&format!(
                    "{at}  pid {}  idle in transaction for {}  client {}  application {}",
                    h.pid,
                    h.in_state.map(human).unwrap_or_else(|| "?".to_string()),
                    h.client_addr.as_deref().unwrap_or("local socket"),
                    h.application_name.as_deref().unwrap_or("-")
                ))?;
            }
            Ok(())
        }
    })?;
    let window = interval.mul_f64(taken as f64);
    let stuck_time = interval.mul_f64(stuck as f64);
    let stuck_minutes = stuck_time.as_secs_f64() / 60.0;
    let per_day = if window.is_zero() {
        0.0
    } else {
        stuck_minutes * 86_400.0 / window.as_secs_f64()
    };
    if json {
        print_json_line(&IdleEvent::Summary {
            address: s.address.to_string(),
            samples: taken,
            stuck_samples: stuck,
            interval_s: secs(interval),
            over_s: secs(over),
            window_s: secs(window),
            stuck_minutes: (stuck_minutes * 1000.0).round() / 1000.0,
            minutes_per_day: (per_day * 10.0).round() / 10.0,
        })?;
    } else {
        print_line(&format!(
            "{stuck} of {taken} samples (every {} over {}) saw a writer lock holder idle in \
             transaction for over {}: {:.1} minutes in this window, {:.1} minutes per day at \
             this rate.",
            short(interval),
            human(window),
            short(over),
            stuck_minutes,
            per_day
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum BumpEvent {
    Bump {
        at: String,
        slug: String,
        generation: i64,
    },
    Summary {
        address: String,
        samples: u64,
        unrecorded: usize,
        interval_s: f64,
    },
}

fn watch_bumps(
    url: Option<&str>,
    json: bool,
    interval: Duration,
    duration: Duration,
) -> Result<ExitCode, CliError> {
    let planned = check_window(interval, duration)?;
    let mut s = Session::open(url, false)?;
    banner(&format!(
        "sampling every ledger's newest generation every {} for {} ({} samples); each \
         unrecorded generation is printed once; Ctrl-C ends early",
        short(interval),
        short(duration),
        planned
    ));
    let mut seen: HashSet<(String, i64)> = HashSet::new();
    let taken = sample_loop(interval, planned, || {
        let bumps = admin::unrecorded_bumps(&mut s.conn).map_err(|e| s.err(e))?;
        for b in bumps {
            if !seen.insert((b.slug.clone(), b.generation)) {
                continue;
            }
            if json {
                print_json_line(&BumpEvent::Bump {
                    at: utc_now(),
                    slug: b.slug,
                    generation: b.generation,
                })?;
            } else {
                print_line(&format!("{}  {}  {}", utc_now(), b.slug, b.generation))?;
            }
        }
        Ok(())
    })?;
    if json {
        print_json_line(&BumpEvent::Summary {
            address: s.address.to_string(),
            samples: taken,
            unrecorded: seen.len(),
            interval_s: secs(interval),
        })?;
    } else {
        print_line(&format!(
            "{} unrecorded generations in {taken} samples (every {}). A ledger nobody has \
             written since it was created shows once without being a bump.",
            seen.len(),
            short(interval)
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
