//! `writerlock`: the contention demo, and the tools an administrator reaches for.
//!
//! - `writerlock demo`: many processes publishing at once on a temporary SQLite database,
//!   through the write queue, with plain `BEGIN`, and with `BEGIN IMMEDIATE` alone.
//! - `writerlock status DB`: who holds the SQLite writer lock and who waits, from
//!   `/proc/locks`.
//! - `writerlock pg ...`: the Postgres writer session's checks (settings, holders, floor,
//!   refused writers, the idle and bump sampling loops, the schema setup).
//!
//! Errors are one line on stderr and a non-zero exit; passwords in database addresses never
//! appear in output.

mod check;
mod demo;
mod duration;
mod error;
mod output;
mod pg;
mod status;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::CliError;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "writerlock",
    version,
    about = "Writers that take turns: the contention demo, SQLite queue status and Postgres \
             writer-session tools",
    long_about = "Writers that take turns.\n\n\
        `writerlock demo` shows why SQLite writers need the queue: many processes publish at \
        once, through the queue, with plain BEGIN and with BEGIN IMMEDIATE alone.\n\
        `writerlock status DB` shows who holds a database's writer lock and who waits.\n\
        `writerlock pg ...` checks a shared Postgres ledger database: session settings, lock \
        holders, the writer floor, refused writers, and sampling loops for stuck holders and \
        unrecorded generation bumps.\n\n\
        Every command takes --json for scripts. Errors are one line on stderr with a non-zero \
        exit status."
)]
struct Cli {
    /// Print JSON on stdout (one document; JSON lines for the pg watch loops); errors too,
    /// as a JSON object. Accepted before or after the subcommand.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the contention demo: many processes publishing at once on one SQLite database.
    #[command(long_about = demo::DEMO_HELP)]
    Demo(demo::DemoArgs),
    /// Show who holds a SQLite database's writer lock, and how many writers wait.
    #[command(long_about = status::STATUS_HELP)]
    Status(status::StatusArgs),
    /// Work through the SQLite write queue's checklist for an Exponential site.
    #[command(long_about = check::CHECK_HELP)]
    Check(check::CheckArgs),
    /// Check a shared Postgres ledger database (address from --url or WRITERLOCK_DATABASE_URL).
    #[command(long_about = pg::PG_HELP)]
    Pg(pg::PgArgs),
    /// One demo process (started by `writerlock demo`).
    #[command(hide = true)]
    DemoWorker(worker::WorkerArgs),
    /// Take a database's writer turn and hold it (for trying `status` and for tests).
    #[command(hide = true)]
    Hold(worker::HoldArgs),
}

impl Command {
    /// Hands the global `--json` to the subcommand that prints.
    fn set_json(&mut self, json: bool) {
        match self {
            Command::Demo(args) => args.json = json,
            Command::Status(args) => args.json = json,
            Command::Check(args) => args.json = json,
            Command::Pg(args) => args.json = json,
            Command::DemoWorker(_) | Command::Hold(_) => {}
        }
    }
}

/// Reports a failure: one line on stderr, and with `--json` also a JSON error object with
/// the same text on stdout, so a script reading stdout gets a document either way.
fn report_error(message: &str, exit_status: u8, json: bool) {
    eprintln!("writerlock: {message}");
    if json {
        let _ = output::print_json(&output::JsonError::new(message, exit_status));
    }
}

/// Parses the command line. Help and version print as usual; a usage error is one line on
/// stderr (exit status 2), like every other error.
fn parse() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            let _ = err.print();
            Err(ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2)))
        }
        Err(err) => {
            let message = usage_error(&err);
            let json = std::env::args_os().any(|a| a == "--json");
            report_error(&message, 2, json);
            Err(ExitCode::from(2))
        }
    }
}

/// A usage error as one line: clap's first sentence, its suggestion of a similar subcommand
/// or flag when it has one, and the help of the command that was being parsed
/// (`writerlock pg sttings` points to `writerlock pg --help`).
fn usage_error(err: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let text = err.to_string();
    let first = text.split("\n\n").next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let mut message = output::one_line(first).trim_end_matches('.').to_string();
    let suggested: Vec<String> = [ContextKind::SuggestedSubcommand, ContextKind::SuggestedArg]
        .into_iter()
        .filter_map(|kind| match err.get(kind) {
            Some(ContextValue::String(s)) => Some(vec![s.clone()]),
            Some(ContextValue::Strings(v)) => Some(v.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    if !suggested.is_empty() {
        let names: Vec<String> = suggested.iter().map(|s| format!("'{s}'")).collect();
        message.push_str(&format!(" (did you mean {}?)", names.join(" or ")));
    }
    format!("{message}; see {} --help", command_path(err))
}

/// The command whose arguments failed to parse, from clap's usage line
/// (`Usage: writerlock pg [OPTIONS] <COMMAND>` is `writerlock pg`).
fn command_path(err: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let usage = match err.get(ContextKind::Usage) {
        Some(ContextValue::StyledStr(s)) => s.to_string(),
        _ => String::new(),
    };
    let words: Vec<&str> = usage
        .split_whitespace()
        .skip_while(|w| w.ends_with(':'))
        .take_while(|w| !w.starts_with(['[', '<', '-']))
        .collect();
    if words.first() == Some(&"writerlock") {
        words.join(" ")
    } else {
        "writerlock".to_string()
    }
}

fn main() -> ExitCode {
    let mut cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let json = cli.json;
    cli.command.set_json(json);
    let result: Result<ExitCode, CliError> = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Pg(args) => pg::run(&args),
        Command::DemoWorker(args) => worker::run_worker(&args),
        Command::Hold(args) => worker::run_hold(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            report_error(&output::one_line(&err.to_string()), err.exit_code(), json);
            ExitCode::from(err.exit_code())
        }
    }
}
