//! Errors of the SQLite write queue.
//!
//! Every message a user can see says what happened and, where there is
//! something to do, what to do. The texts of [`Busy`] and
//! [`Error::NotStarted`] are an interface: administrators grep for them in
//! `var/log/error.log`, so they never change.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// The result type of the write queue.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What was waiting when a wait limit ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyKind {
    /// A transaction waited for its turn (`begin`).
    Transaction,
    /// A single write statement outside a transaction waited for its turn.
    Statement,
}

/// A wait limit ran out before the writer got its turn; nothing was written.
///
/// Displays as one of the two fixed messages, for example
/// `database is busy: the transaction could not start within 25 s (waited 25.0 s,
/// [DatabaseSettings] SQLiteTransactionWait), another write held the lock all that
/// time; nothing was written`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    /// Whether a transaction or a single statement was waiting.
    pub kind: BusyKind,
    /// How long the writer waited, wall clock.
    pub waited: Duration,
    /// The limit it was given.
    pub limit: Duration,
    /// The name of the setting the limit came from, quoted in the message.
    pub setting: String,
    /// The process that held the writer lock when the wait gave up, where
    /// `/proc/locks` shows one.
    pub holder_pid: Option<u32>,
    /// A process holding SQLite's own write lock on the database outside
    /// the queue (its own `BEGIN IMMEDIATE`, no turn taken), where
    /// `/proc/locks` shows one: the writer everyone waits for, the queue's
    /// holder included. When it is not [`Busy::holder_pid`] (the queue's
    /// holder is itself waiting for it), the message names it in a
    /// sentence after the fixed text, which otherwise stays exact.
    pub outside_pid: Option<u32>,
}

/// Formats a limit in seconds the way the messages quote it: `25`, `1.5`.
pub(crate) fn format_limit(limit: Duration) -> String {
    let millis = limit.as_millis();
    if millis % 1000 == 0 {
        format!("{}", millis / 1000)
    } else {
        let text = format!("{:.3}", limit.as_secs_f64());
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = format_limit(self.limit);
        let waited = self.waited.as_secs_f64();
        match self.kind {
            BusyKind::Transaction => write!(
                f,
                "database is busy: the transaction could not start within {limit} s \
                 (waited {waited:.1} s, {}), another write held the lock all that time; \
                 nothing was written",
                self.setting
            ),
            BusyKind::Statement => write!(
                f,
                "database is busy: the statement waited {waited:.1} s for another write to end \
                 (limit {limit} s, {}) and was not run; nothing was written",
                self.setting
            ),
        }?;
        // The sentence is added only where it tells something new: when the writer
        // waited for is itself the one outside the queue, `holder_pid` names it and the
        // fixed text stays exactly as it is.
        if let Some(pid) = self.outside_pid.filter(|&pid| Some(pid) != self.holder_pid) {
            write!(
                f,
                ". Process {pid} holds SQLite's write lock on the database outside the queue \
                 (a transaction begun without taking the writer turn), so every queued writer \
                 waits for it; make that program write through the queue"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Busy {}

/// A failure reported by SQLite itself: its result code and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqliteFailure {
    /// SQLite's (possibly extended) result code, such as 5 for `SQLITE_BUSY`.
    pub code: i32,
    /// SQLite's message, as `sqlite3_errmsg` gives it.
    pub message: String,
}

impl SqliteFailure {
    /// Makes a failure from a result code and a message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        SqliteFailure {
            code,
            message: message.into(),
        }
    }

    /// The primary result code (the low byte of an extended code).
    pub fn primary_code(&self) -> i32 {
        self.code & 0xff
    }

    /// True for `SQLITE_BUSY` and `SQLITE_LOCKED`: another connection holds a
    /// lock this statement needs.
    pub fn is_busy(&self) -> bool {
        matches!(self.primary_code(), 5 | 6)
    }
}

/// Everything that can go wrong in the write queue.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The wait limit ran out; nothing was written.
    #[error("{0}")]
    Busy(Busy),

    /// The wait's interrupt check ([`crate::wait::Interrupt`]) ended the
    /// wait before the writer got its turn: the turn was not taken and
    /// nothing was written.
    #[error(
        "the wait for the writer turn was interrupted after {:.1} s; nothing was written",
        .waited.as_secs_f64()
    )]
    Interrupted {
        /// Whether a transaction or a single statement was waiting.
        kind: BusyKind,
        /// How long the writer had waited, wall clock.
        waited: Duration,
    },

    /// `BEGIN IMMEDIATE` failed for a reason other than a busy database;
    /// the turn was given back and nothing was written.
    #[error("the transaction could not start: {}; nothing was written", .failure.message)]
    NotStarted {
        /// What SQLite reported.
        failure: SqliteFailure,
    },

    /// A statement failed in SQLite (COMMIT, ROLLBACK or a queued statement).
    #[error("{statement} failed: {}", .failure.message)]
    Sqlite {
        /// What ran: `COMMIT`, `ROLLBACK` or `the statement`.
        statement: &'static str,
        /// What SQLite reported.
        failure: SqliteFailure,
    },

    /// A lock file next to the database could not be opened.
    #[error(
        "could not open the writer lock file {}: {source}; {}",
        .path.display(),
        open_advice(.source)
    )]
    LockFile {
        /// The lock file.
        path: PathBuf,
        /// Why the open failed.
        #[source]
        source: io::Error,
    },

    /// A lock file exists but this user may open it neither for writing nor
    /// for reading.
    #[error(
        "could not open the writer lock file {}: permission denied: it belongs to {owner} \
         with mode {mode:04o}, and this process runs as {user}; let this user read it \
         (chmod a+r, or chown it to the user the writers run as), or delete it so that the \
         next writer creates it with the database file's owner and mode",
        .path.display()
    )]
    LockFileAccess {
        /// The lock file.
        path: PathBuf,
        /// Its owner, as a user name where one is known (else the uid).
        owner: String,
        /// Its permission bits.
        mode: u32,
        /// The user this process runs as (name or uid).
        user: String,
        /// What `open()` reported.
        #[source]
        source: io::Error,
    },

    /// A lock file is not one the queue may use: lock files are untrusted
    /// input (the database's directory may be group-writable, or in `/tmp`).
    #[error("the writer lock file {} {problem}; nothing was written", .path.display())]
    UnsafeLockFile {
        /// The lock file.
        path: PathBuf,
        /// What is wrong with it.
        problem: LockFileProblem,
    },

    /// `flock()` itself failed (not a held lock: an error of the system call).
    #[error(
        "flock() failed on {}: {source}; the file system may not support file locks, \
         keep the database on a local disk",
        .path.display()
    )]
    Flock {
        /// The lock file.
        path: PathBuf,
        /// What the system call reported.
        #[source]
        source: io::Error,
    },

    /// The calling thread already holds this queue's turn.
    #[error(
        "this writer queue already holds the writer turn for this thread; \
         commit or roll back the open transaction before beginning another"
    )]
    AlreadyHolding,

    /// The calling thread already holds the turn of this database through
    /// another queue handle: waiting would wait for itself until the limit.
    #[error(
        "this thread already holds the writer turn of {} through another writer queue handle, \
         so waiting for it here would only wait for itself; commit or roll back that \
         transaction first, or use the same handle; nothing was written",
        .database.display()
    )]
    HeldThroughAnotherHandle {
        /// The database whose turn this thread holds.
        database: PathBuf,
    },

    /// COMMIT or ROLLBACK was asked of a queue that holds no turn.
    #[error(
        "there is no queued transaction to end: this writer queue does not hold the writer turn; \
         call begin() first"
    )]
    NotHolding,

    /// The connection was already inside a transaction when `begin` was called.
    #[error(
        "the connection is already inside a transaction; end it (COMMIT or ROLLBACK) before \
         beginning a queued one, and open the connection in autocommit mode"
    )]
    InTransaction,

    /// The connection's main database is not the file this queue serves, so
    /// its writers would not exclude the writers of that database; nothing
    /// was run.
    #[error("{}", wrong_database_message(.queue_database, .connection_database, None))]
    WrongDatabase {
        /// The database the queue was made for (absolute).
        queue_database: PathBuf,
        /// The connection's main database file, as SQLite names it (empty
        /// for an in-memory or temporary database).
        connection_database: PathBuf,
    },

    /// The connection's open main database file is no longer the file at its
    /// path: a restore or a deploy renamed another file over it, or it was
    /// removed. Its writes would go to the orphaned file, which nobody reads
    /// any more, so nothing was run.
    #[error(
        "the database file {} was replaced or removed after this connection opened it (a \
         restore or deploy that renamed another file over it?): this connection still has the \
         old file open, and its writes would be lost there, so nothing was run; close this \
         connection and open the database again",
        .path.display()
    )]
    DatabaseReplaced {
        /// The database's path, as the connection names it.
        path: PathBuf,
    },

    /// An argument from the caller was unusable (the C and script bindings
    /// report bad input through this).
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument {
        /// The argument's name.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// What to do about a lock file that could not be opened: at the limit of
/// open descriptors (`EMFILE` for the process, `ENFILE` for the system) the
/// directory is not the problem.
fn open_advice(source: &io::Error) -> &'static str {
    match source.raw_os_error() {
        Some(libc::EMFILE) => {
            "this process has as many files open as its descriptor limit allows (ulimit -n, \
             RLIMIT_NOFILE): close files it no longer needs or raise the limit"
        }
        Some(libc::ENFILE) => {
            "the system has as many files open as its limit allows (fs.file-max): close files \
             or raise the limit"
        }
        _ => "check that the database's directory exists and that this user may read it",
    }
}

/// A database path as the messages show it: the path, or what an empty or
/// `:memory:` path stands for.
fn shown(path: &std::path::Path) -> String {
    if crate::paths::is_in_memory(path) {
        String::from("an in-memory or temporary database")
    } else {
        path.display().to_string()
    }
}

/// The text of [`Error::WrongDatabase`]. `for_connection` is the host's own call that makes a
/// queue from a connection (such as `writerlock.WriterQueue.for_connection(conn)`), named
/// after the advice where the host has one.
pub fn wrong_database_message(
    queue_database: &std::path::Path,
    connection_database: &std::path::Path,
    for_connection: Option<&str>,
) -> String {
    let call = for_connection.map(|c| format!(": {c}")).unwrap_or_default();
    format!(
        "this writer queue is for {} but the connection's database is {}; writers exclude each \
         other only through the queue of the database they write, so nothing was run: make the \
         queue for the connection's own database file (or from the connection itself{call})",
        shown(queue_database),
        shown(connection_database)
    )
}

/// What is wrong with a lock file the queue refuses to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockFileProblem {
    /// It is a symbolic link, which the queue never follows (it could point
    /// at any file, which a writer running as root would then lock).
    SymbolicLink,
    /// It is not a regular file: `kind` says what it is ("a FIFO", "a
    /// directory", ...).
    NotRegular {
        /// What the file is.
        kind: &'static str,
    },
    /// The lock file and the queue file are one file (a hard link, a bind
    /// mount), so every writer would wait for itself.
    SameFile {
        /// The other lock file.
        other: PathBuf,
    },
    /// Another process holds a lease on it and did not give it up within
    /// the wait.
    Leased,
}

impl fmt::Display for LockFileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockFileProblem::SymbolicLink => f.write_str(
                "is a symbolic link, which writers never follow (it could point at any file): \
                 remove it, and the next writer creates a regular file",
            ),
            LockFileProblem::NotRegular { kind } => write!(
                f,
                "is {kind}, not a regular file: remove it, and the next writer creates a \
                 regular file"
            ),
            LockFileProblem::SameFile { other } => write!(
                f,
                "is the same file as {} (a hard link or a bind mount), so every writer would \
                 wait for itself: remove one of the two, and the next writer creates it anew",
                other.display()
            ),
            LockFileProblem::Leased => f.write_str(
                "is under a lease (fcntl F_SETLEASE) that another process did not give up \
                 within the wait: stop that process or have it release the lease",
            ),
        }
    }
}

impl Error {
    /// This error's kind, which hosts map to their own class or code.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Busy(_) => ErrorKind::Busy,
            Error::Interrupted { .. } => ErrorKind::Interrupted,
            Error::NotStarted { .. } => ErrorKind::NotStarted,
            Error::Sqlite { .. } => ErrorKind::Sqlite,
            Error::LockFile { .. } => ErrorKind::LockFile,
            Error::LockFileAccess { .. } => ErrorKind::LockFileAccess,
            Error::UnsafeLockFile { .. } => ErrorKind::UnsafeLockFile,
            Error::Flock { .. } => ErrorKind::Flock,
            Error::AlreadyHolding => ErrorKind::AlreadyHolding,
            Error::HeldThroughAnotherHandle { .. } => ErrorKind::HeldThroughAnotherHandle,
            Error::NotHolding => ErrorKind::NotHolding,
            Error::InTransaction => ErrorKind::InTransaction,
            Error::WrongDatabase { .. } => ErrorKind::WrongDatabase,
            Error::DatabaseReplaced { .. } => ErrorKind::DatabaseReplaced,
            Error::InvalidArgument { .. } => ErrorKind::InvalidArgument,
        }
    }

    /// SQLite's result code, where SQLite reported the failure.
    pub fn sqlite_error_code(&self) -> Option<i32> {
        match self {
            Error::NotStarted { failure } | Error::Sqlite { failure, .. } => Some(failure.code),
            Error::Busy(_) => Some(5),
            _ => None,
        }
    }

    /// The [`Busy`] details when this is a wait that ran out.
    pub fn busy(&self) -> Option<&Busy> {
        match self {
            Error::Busy(busy) => Some(busy),
            _ => None,
        }
    }
}

/// What kind of [`Error`] this is, one kind per variant, without its fields: what hosts map
/// to their own classes and codes ([`Error::kind`]). Exhaustive: a host matches it without a
/// wildcard arm, so a new kind is a compile error in every host until the host maps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A wait limit ran out ([`Error::Busy`]).
    Busy,
    /// The wait's interrupt check ended the wait ([`Error::Interrupted`]).
    Interrupted,
    /// `BEGIN IMMEDIATE` failed for a reason other than a busy database ([`Error::NotStarted`]).
    NotStarted,
    /// A statement failed in SQLite ([`Error::Sqlite`]).
    Sqlite,
    /// A lock file could not be opened ([`Error::LockFile`]).
    LockFile,
    /// A lock file may be opened neither for writing nor for reading ([`Error::LockFileAccess`]).
    LockFileAccess,
    /// A lock file is not one the queue may use ([`Error::UnsafeLockFile`]).
    UnsafeLockFile,
    /// `flock()` itself failed ([`Error::Flock`]).
    Flock,
    /// The calling thread already holds this queue's turn ([`Error::AlreadyHolding`]).
    AlreadyHolding,
    /// The calling thread holds the turn through another queue handle ([`Error::HeldThroughAnotherHandle`]).
    HeldThroughAnotherHandle,
    /// COMMIT or ROLLBACK was asked of a queue that holds no turn ([`Error::NotHolding`]).
    NotHolding,
    /// The connection was already inside a transaction ([`Error::InTransaction`]).
    InTransaction,
    /// The connection's database is not the queue's ([`Error::WrongDatabase`]).
    WrongDatabase,
    /// The connection's database file was replaced or removed ([`Error::DatabaseReplaced`]).
    DatabaseReplaced,
    /// An argument from the caller was unusable ([`Error::InvalidArgument`]).
    InvalidArgument,
}

impl ErrorKind {
    /// Every kind, in declaration order (for the hosts' tests that each maps to a specific
    /// class or code).
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::Busy,
        ErrorKind::Interrupted,
        ErrorKind::NotStarted,
        ErrorKind::Sqlite,
        ErrorKind::LockFile,
        ErrorKind::LockFileAccess,
        ErrorKind::UnsafeLockFile,
        ErrorKind::Flock,
        ErrorKind::AlreadyHolding,
        ErrorKind::HeldThroughAnotherHandle,
        ErrorKind::NotHolding,
        ErrorKind::InTransaction,
        ErrorKind::WrongDatabase,
        ErrorKind::DatabaseReplaced,
        ErrorKind::InvalidArgument,
    ];

    /// The kind's stable name in snake case, such as `wrong_database`: how a host that passes
    /// kinds as text names it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Busy => "busy",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::NotStarted => "not_started",
            ErrorKind::Sqlite => "sqlite",
            ErrorKind::LockFile => "lock_file",
            ErrorKind::LockFileAccess => "lock_file_access",
            ErrorKind::UnsafeLockFile => "unsafe_lock_file",
            ErrorKind::Flock => "flock",
            ErrorKind::AlreadyHolding => "already_holding",
            ErrorKind::HeldThroughAnotherHandle => "held_through_another_handle",
            ErrorKind::NotHolding => "not_holding",
            ErrorKind::InTransaction => "in_transaction",
            ErrorKind::WrongDatabase => "wrong_database",
            ErrorKind::DatabaseReplaced => "database_replaced",
            ErrorKind::InvalidArgument => "invalid_argument",
        }
    }
}

impl From<Busy> for Error {
    fn from(busy: Busy) -> Self {
        Error::Busy(busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Each kind's place in [`ErrorKind::ALL`] (exhaustive: a new kind must be placed here).
    fn position(kind: ErrorKind) -> usize {
        match kind {
            ErrorKind::Busy => 0,
            ErrorKind::Interrupted => 1,
            ErrorKind::NotStarted => 2,
            ErrorKind::Sqlite => 3,
            ErrorKind::LockFile => 4,
            ErrorKind::LockFileAccess => 5,
            ErrorKind::UnsafeLockFile => 6,
            ErrorKind::Flock => 7,
            ErrorKind::AlreadyHolding => 8,
            ErrorKind::HeldThroughAnotherHandle => 9,
            ErrorKind::NotHolding => 10,
            ErrorKind::InTransaction => 11,
            ErrorKind::WrongDatabase => 12,
            ErrorKind::DatabaseReplaced => 13,
            ErrorKind::InvalidArgument => 14,
        }
    }

    #[test]
    fn wrong_database_names_the_hosts_call() {
        let e = Error::WrongDatabase {
            queue_database: PathBuf::from("/srv/a.db"),
            connection_database: PathBuf::new(),
        };
        let core = "this writer queue is for /srv/a.db but the connection's database is an \
                    in-memory or temporary database; writers exclude each other only through \
                    the queue of the database they write, so nothing was run: make the queue \
                    for the connection's own database file (or from the connection itself";
        assert_eq!(e.to_string(), format!("{core})"));
        assert_eq!(
            wrong_database_message(Path::new("/srv/a.db"), Path::new(""), Some("q.for(c)")),
            format!("{core}: q.for(c))")
        );
        let mut names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn every_kind_is_listed_once_in_all() {
        let places: Vec<usize> = ErrorKind::ALL.iter().map(|k| position(*k)).collect();
        assert_eq!(places, (0..ErrorKind::ALL.len()).collect::<Vec<_>>());
        assert_eq!(Error::NotHolding.kind(), ErrorKind::NotHolding);
        let e = Error::NotStarted {
            failure: SqliteFailure::new(26, "file is not a database"),
        };
        assert_eq!(e.kind(), ErrorKind::NotStarted);
    }

    #[test]
    fn transaction_message_is_the_drivers_text() {
        let busy = Busy {
            kind: BusyKind::Transaction,
            waited: Duration::from_millis(25_040),
            limit: Duration::from_secs(25),
            setting: "[DatabaseSettings] SQLiteTransactionWait".into(),
            holder_pid: Some(42),
            outside_pid: None,
        };
        assert_eq!(
            busy.to_string(),
            "database is busy: the transaction could not start within 25 s (waited 25.0 s, \
             [DatabaseSettings] SQLiteTransactionWait), another write held the lock all that \
             time; nothing was written"
        );
    }

    #[test]
    fn statement_message_is_the_drivers_text() {
        let busy = Busy {
            kind: BusyKind::Statement,
            waited: Duration::from_millis(5_010),
            limit: Duration::from_millis(5000),
            setting: "[DatabaseSettings] SQLiteBusyTimeout".into(),
            holder_pid: None,
            outside_pid: None,
        };
        assert_eq!(
            busy.to_string(),
            "database is busy: the statement waited 5.0 s for another write to end (limit 5 s, \
             [DatabaseSettings] SQLiteBusyTimeout) and was not run; nothing was written"
        );
    }

    #[test]
    fn a_writer_outside_the_queue_is_named_after_the_fixed_text() {
        let busy = Busy {
            kind: BusyKind::Transaction,
            waited: Duration::from_millis(1_020),
            limit: Duration::from_secs(1),
            setting: "[DatabaseSettings] SQLiteTransactionWait".into(),
            holder_pid: Some(42),
            outside_pid: Some(77),
        };
        assert_eq!(
            busy.to_string(),
            "database is busy: the transaction could not start within 1 s (waited 1.0 s, \
             [DatabaseSettings] SQLiteTransactionWait), another write held the lock all that \
             time; nothing was written. Process 77 holds SQLite's write lock on the database \
             outside the queue (a transaction begun without taking the writer turn), so every \
             queued writer waits for it; make that program write through the queue"
        );
        // When the process waited for is the outsider itself, holder_pid names it and the
        // text is the driver's, word for word.
        let busy = Busy {
            holder_pid: Some(77),
            ..busy
        };
        assert!(
            busy.to_string().ends_with("; nothing was written"),
            "{busy}"
        );
    }

    #[test]
    fn the_descriptor_limit_is_named_as_such() {
        let e = Error::LockFile {
            path: PathBuf::from("/srv/site.db.writer-lock"),
            source: io::Error::from_raw_os_error(libc::EMFILE),
        };
        let text = e.to_string();
        assert!(text.contains("descriptor limit"), "{text}");
        assert!(!text.contains("directory exists"), "{text}");
    }

    #[test]
    fn not_started_message() {
        let e = Error::NotStarted {
            failure: SqliteFailure::new(26, "file is not a database"),
        };
        assert_eq!(
            e.to_string(),
            "the transaction could not start: file is not a database; nothing was written"
        );
    }

    #[test]
    fn interrupted_message() {
        let e = Error::Interrupted {
            kind: BusyKind::Transaction,
            waited: Duration::from_millis(1_260),
        };
        assert_eq!(
            e.to_string(),
            "the wait for the writer turn was interrupted after 1.3 s; nothing was written"
        );
    }

    #[test]
    fn fractional_limits() {
        assert_eq!(format_limit(Duration::from_millis(1500)), "1.5");
        assert_eq!(format_limit(Duration::from_millis(250)), "0.25");
        assert_eq!(format_limit(Duration::from_secs(300)), "300");
    }
}
