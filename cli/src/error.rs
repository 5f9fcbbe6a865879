//! The command's one error type: every failure ends as one line on stderr.

use std::io;
use std::path::PathBuf;

/// Everything that can stop a `writerlock` command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No Postgres address was given.
    #[error(
        "no database address: pass --url postgresql://user@host:5432/dbname, set \
         WRITERLOCK_DATABASE_URL, or set the libpq variables PGHOST, PGPORT, PGUSER and \
         PGDATABASE"
    )]
    NoAddress,

    /// The Postgres session failed; the message has the password removed.
    #[error("{message}")]
    Pg {
        /// The error's text, with any password removed.
        message: String,
        /// The SQLSTATE, where the server gave one.
        code: Option<String>,
    },

    /// A table the command reads does not exist in the database.
    #[error(
        "{message}: this database has not been set up for ledger writers yet (a writer on \
         floor code sets it up on its first write, or run `writerlock pg setup`)"
    )]
    MissingTable {
        /// The server's message, such as `relation "ledgers" does not exist`.
        message: String,
    },

    /// Some writer-session settings did not take effect.
    #[error(
        "the session settings {names} are not in effect: something between this client and \
         the server (such as a connection pooler) dropped the startup options"
    )]
    SettingsNotInEffect {
        /// The settings' names, comma-separated.
        names: String,
    },

    /// The SQLite database given to `status` does not exist.
    #[error("no database at {}: check the path", .path.display())]
    NoDatabase {
        /// The path given.
        path: PathBuf,
    },

    /// The path given to `status` is not a SQLite database.
    #[error("{} is not a SQLite database: {reason}", .path.display())]
    NotSqlite {
        /// The path given.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },

    /// A SQLite call failed.
    #[error("SQLite failed on {}: {source}", .path.display())]
    Sqlite {
        /// The database.
        path: PathBuf,
        /// What SQLite reported.
        #[source]
        source: rusqlite::Error,
    },

    /// The write queue failed.
    #[error("{0}")]
    Queue(#[from] writerlock::Error),

    /// A file or process operation failed.
    #[error("{what} {}: {source}", .path.display())]
    Io {
        /// What was being done, such as `could not create`.
        what: &'static str,
        /// The file or program involved.
        path: PathBuf,
        /// What the system reported.
        #[source]
        source: io::Error,
    },

    /// A demo process did not behave.
    #[error("demo process {worker} failed: {reason}")]
    Worker {
        /// The process's number in its mode (from 0).
        worker: u32,
        /// What went wrong.
        reason: String,
    },

    /// The demo could not complete or its results do not add up.
    #[error("the demo failed: {reason}")]
    Demo {
        /// What went wrong.
        reason: String,
    },

    /// An argument was unusable.
    #[error("invalid {name}: {reason}")]
    InvalidArgument {
        /// The argument's name, such as `--interval`.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// Writing the output failed (such as a closed pipe).
    #[error("could not write the output: {0}")]
    Output(#[from] io::Error),

    /// Encoding JSON output failed.
    #[error("could not encode the JSON output: {0}")]
    Json(#[from] serde_json::Error),
}

impl CliError {
    /// The process exit status for this error: 1 for every runtime failure (clap exits with
    /// 2 on a usage error).
    pub fn exit_code(&self) -> u8 {
        1
    }

    /// A Postgres error, with the password of `address` removed from its text, and a
    /// missing table named as such.
    pub fn pg(err: &writerlock::pg::Error, address: Option<&writerlock::pg::Address>) -> CliError {
        let text = err.to_string();
        let message = match address {
            Some(a) => a.redact(&text),
            None => text,
        };
        let code = err.code().map(|c| c.code().to_string());
        if code.as_deref() == Some("42P01") {
            return CliError::MissingTable { message };
        }
        CliError::Pg { message, code }
    }
}
