//! The one error type of the Postgres writer session.
//!
//! Every variant carries typed fields, and [`Error::code`] gives the SQLSTATE where there is
//! one, like rust-postgres does. No message ever contains the password of a database
//! address.

use std::sync::LazyLock;
use std::time::Duration;

use postgres::error::{Severity, SqlState};

use super::settings::seconds_text;

/// The SQLSTATE of a writer floor refusal: `LW001`.
pub const REFUSED_SQLSTATE: &str = "LW001";

static REFUSED_CODE: LazyLock<SqlState> = LazyLock::new(|| SqlState::from_code(REFUSED_SQLSTATE));

/// The refusal text for a writer `version` below the stored `floor`:
/// `ledger writer version 0 is below version 1, the oldest the shared database allows;
/// update its code and restart it`.
pub fn refusal_message(version: i64, floor: i64) -> String {
    format!(
        "ledger writer version {version} is below version {floor}, the oldest the shared \
         database allows; update its code and restart it"
    )
}

/// The text of [`Error::WriteEnded`], with the host's own words for how a write ends (`it was
/// committed or rolled back`) and for starting a new one (`start a new write`): `this write has
/// already ended (it was committed or rolled back), so the statement was not run: a write's
/// statements run only inside its own transaction, under the writer lock; start a new write`.
pub fn write_ended_message(how_it_ends: &str, start_new: &str) -> String {
    format!(
        "this write has already ended ({how_it_ends}), so the statement was not run: a write's \
         statements run only inside its own transaction, under the writer lock; {start_new}"
    )
}

/// Reads the version and floor back out of a refusal text (the inverse of
/// [`refusal_message`]), so a refusal raised by the trigger becomes [`Error::Refused`].
pub fn parse_refusal(message: &str) -> Option<(i64, i64)> {
    let rest = message.strip_prefix("ledger writer version ")?;
    let (version, rest) = rest.split_once(" is below version ")?;
    let (floor, _) = rest.split_once(", the oldest the shared database allows")?;
    let version = version.trim().parse().ok()?;
    let floor = floor.trim().parse().ok()?;
    (refusal_message(version, floor) == message).then_some((version, floor))
}

/// What kind of [`Error`] this is, one kind per variant, without its fields: what hosts map
/// to their own classes and codes ([`Error::kind`]).
///
/// Unlike [`Error`] this enum is exhaustive: a host matches it without a wildcard arm, so a new
/// kind is a compile error in every host until the host says what it becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The database address could not be read ([`Error::InvalidUrl`]).
    InvalidUrl,
    /// No connection could be opened ([`Error::Connect`]).
    Connect,
    /// The connection set-up did not finish within the connect timeout ([`Error::ConnectTimedOut`]).
    ConnectTimedOut,
    /// A startup setting did not take effect ([`Error::SettingNotInEffect`]).
    SettingNotInEffect,
    /// Every wait for the writer lock was cancelled by `lock_timeout` ([`Error::LockNotGranted`]).
    LockNotGranted,
    /// The writer is below the stored floor ([`Error::Refused`]).
    Refused,
    /// The writer lock was asked for inside a transaction that already ran a statement ([`Error::AlreadyInTransaction`]).
    AlreadyInTransaction,
    /// The server reported an error for a statement ([`Error::Database`]).
    Database,
    /// The server ended the session ([`Error::SessionEnded`]).
    SessionEnded,
    /// The connection is closed or was lost ([`Error::Closed`]).
    Closed,
    /// The connection was lost while `COMMIT` was in flight ([`Error::CommitOutcomeUnknown`]).
    CommitOutcomeUnknown,
    /// A statement the protocol cannot carry was refused before anything was sent ([`Error::Unsendable`]).
    Unsendable,
    /// The connection was opened by the parent of this process ([`Error::Forked`]).
    Forked,
    /// A pooler refused the startup options ([`Error::StartupOptionsRejected`]).
    StartupOptionsRejected,
    /// A statement was run through a write that has already ended ([`Error::WriteEnded`]).
    WriteEnded,
    /// A connection was given back to a pool it does not belong to ([`Error::ForeignConnection`]).
    ForeignConnection,
    /// `COMMIT` could only roll back ([`Error::RolledBack`]).
    RolledBack,
    /// A statement got the wrong number of parameters ([`Error::ParameterCount`]).
    ParameterCount,
    /// A parameter value cannot be sent as the type the server expects ([`Error::Parameter`]).
    Parameter,
    /// A result column has a type this crate cannot read ([`Error::UnsupportedType`]).
    UnsupportedType,
    /// The required floor is above the writer's own version ([`Error::RequiredAboveVersion`]).
    RequiredAboveVersion,
    /// A writer version or floor does not fit the refusal lock key ([`Error::VersionOutOfRange`]).
    VersionOutOfRange,
    /// A time limit is outside the range Postgres accepts ([`Error::LimitOutOfRange`]).
    LimitOutOfRange,
    /// Any other failure of the driver ([`Error::Driver`]).
    Driver,
}

impl ErrorKind {
    /// Every kind, in declaration order (for the hosts' tests that each maps to a specific
    /// class or code).
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::InvalidUrl,
        ErrorKind::Connect,
        ErrorKind::ConnectTimedOut,
        ErrorKind::SettingNotInEffect,
        ErrorKind::LockNotGranted,
        ErrorKind::Refused,
        ErrorKind::AlreadyInTransaction,
        ErrorKind::Database,
        ErrorKind::SessionEnded,
        ErrorKind::Closed,
        ErrorKind::CommitOutcomeUnknown,
        ErrorKind::Unsendable,
        ErrorKind::Forked,
        ErrorKind::StartupOptionsRejected,
        ErrorKind::WriteEnded,
        ErrorKind::ForeignConnection,
        ErrorKind::RolledBack,
        ErrorKind::ParameterCount,
        ErrorKind::Parameter,
        ErrorKind::UnsupportedType,
        ErrorKind::RequiredAboveVersion,
        ErrorKind::VersionOutOfRange,
        ErrorKind::LimitOutOfRange,
        ErrorKind::Driver,
    ];

    /// The kind's stable name in snake case, such as `lock_not_granted`: how a host that passes
    /// kinds as text (the Python module's exception table) names it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidUrl => "invalid_url",
            ErrorKind::Connect => "connect",
            ErrorKind::ConnectTimedOut => "connect_timed_out",
            ErrorKind::SettingNotInEffect => "setting",
            ErrorKind::LockNotGranted => "lock_not_granted",
            ErrorKind::Refused => "refused",
            ErrorKind::AlreadyInTransaction => "already_in_transaction",
            ErrorKind::Database => "database",
            ErrorKind::SessionEnded => "session_ended",
            ErrorKind::Closed => "closed",
            ErrorKind::CommitOutcomeUnknown => "outcome_unknown",
            ErrorKind::Unsendable => "unsendable",
            ErrorKind::Forked => "forked",
            ErrorKind::StartupOptionsRejected => "startup_options_rejected",
            ErrorKind::WriteEnded => "write_ended",
            ErrorKind::ForeignConnection => "foreign",
            ErrorKind::RolledBack => "rolled_back",
            ErrorKind::ParameterCount => "parameter_count",
            ErrorKind::Parameter => "parameter",
            ErrorKind::UnsupportedType => "unsupported_type",
            ErrorKind::RequiredAboveVersion => "required_above_version",
            ErrorKind::VersionOutOfRange => "version_out_of_range",
            ErrorKind::LimitOutOfRange => "limit_out_of_range",
            ErrorKind::Driver => "driver",
        }
    }
}

/// An error of the Postgres writer session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database address could not be read.
    #[error(
        "the database address is not valid: {reason}; use a URL such as \
         postgresql://user@host:5432/dbname or libpq key=value pairs"
    )]
    InvalidUrl {
        /// Why it could not be read, with any password removed.
        reason: String,
    },

    /// No connection could be opened.
    #[error(
        "could not connect to the database at {address}: {reason}; {}",
        connect_hint(code.as_ref(), reason)
    )]
    Connect {
        /// The address, without its password.
        address: String,
        /// What the driver or the server said, with any password removed.
        reason: String,
        /// The server's SQLSTATE when the server refused the session (for example `28P01`).
        code: Option<SqlState>,
    },

    /// The connection set-up did not finish within the connect timeout.
    #[error(
        "could not connect to the database at {address}: the connection set-up (TCP, \
         TLS, authentication and the settings check) did not finish within the connect \
         timeout of {} s; something at that address accepted the connection but did not \
         answer: check that the server is not stopped or overloaded, and that a pooler in \
         front of it can reach its server",
        seconds_text(*.limit)
    )]
    ConnectTimedOut {
        /// The address, without its password.
        address: String,
        /// The connect timeout.
        limit: Duration,
    },

    /// A startup setting did not take effect, typically because a connection pooler between
    /// the client and the server dropped the startup options.
    #[error(
        "the session setting {setting} is not in effect: it was sent as {expected} but the \
         server reports {actual}; something between this client and the server (such as a \
         connection pooler) dropped the startup options, so connect to the server directly \
         or make the pooler pass them"
    )]
    SettingNotInEffect {
        /// The setting's name, such as `lock_timeout`.
        setting: String,
        /// The value sent.
        expected: String,
        /// The value the server reports (`unset` when it has none).
        actual: String,
    },

    /// Every wait for the writer lock was cancelled by `lock_timeout`.
    #[error(
        "the ledger writer lock was not granted in {tries} waits of {} seconds",
        seconds_text(*.wait)
    )]
    LockNotGranted {
        /// How many waits were made.
        tries: u32,
        /// How long each wait lasted.
        wait: Duration,
    },

    /// The writer is below the floor the database stores (SQLSTATE `LW001`).
    #[error("{}", refusal_message(*.version, *.floor))]
    Refused {
        /// The refused writer's version (0 for code that sends none).
        version: i64,
        /// The stored floor.
        floor: i64,
    },

    /// The writer lock was asked for after the open transaction had already run a statement.
    #[error("cannot start a transaction within a transaction")]
    AlreadyInTransaction,

    /// The server reported an error; the statement failed and an open transaction is
    /// aborted.
    #[error("{message}")]
    Database {
        /// The SQLSTATE, such as `57014` for a cancelled statement.
        code: SqlState,
        /// The server's primary message.
        message: String,
        /// The server's detail, if any.
        detail: Option<String>,
        /// The server's hint, if any.
        hint: Option<String>,
    },

    /// The server ended this session (for example `pg_terminate_backend` or the idle limit).
    #[error(
        "the database server ended this session: {message}; its transaction was rolled back \
         and the connection cannot be used again, so take a new one"
    )]
    SessionEnded {
        /// The SQLSTATE, such as `57P01` or `25P03`.
        code: SqlState,
        /// The server's message.
        message: String,
    },

    /// The connection is closed or was lost.
    #[error(
        "the connection to the database is closed ({reason}); an open transaction was \
         rolled back by the server, so take a new connection"
    )]
    Closed {
        /// What closed it.
        reason: String,
    },

    /// The connection was lost while `COMMIT` was in flight: the server may or may not have
    /// committed (SQLSTATE `08007`, transaction resolution unknown).
    #[error(
        "the outcome of the commit is unknown: the connection to the database was \
         lost while COMMIT was in flight ({reason}); the transaction may or may not have \
         been committed, so check whether the write is in the database before retrying it"
    )]
    CommitOutcomeUnknown {
        /// What ended the connection.
        reason: String,
    },

    /// A statement the protocol cannot carry was refused before anything was sent.
    #[error(
        "the statement was not sent: {problem}; {}",
        if *.rolled_back {
            "the open transaction was rolled back, so nothing in it was written and the \
             writer lock is free"
        } else {
            "nothing was run"
        }
    )]
    Unsendable {
        /// What is wrong with it.
        problem: String,
        /// Whether an open transaction was rolled back because of it.
        rolled_back: bool,
    },

    /// The connection was opened by another process, the parent of this one after `fork()`.
    #[error(
        "this connection to the database was opened by process {owner} and cannot be \
         used in process {pid}, a child made by fork(): it shares the parent's session, which \
         stays the parent's; open a new connection in the child"
    )]
    Forked {
        /// The process that opened it.
        owner: u32,
        /// This process.
        pid: u32,
    },

    /// Something between client and server (a pooler) refused the startup options.
    #[error(
        "could not connect to the database at {address}: something at that address \
         refused the session's startup options ({reason}); a connection pooler sits in \
         between and does not pass them: connect to the server directly, or set the pooler \
         up as the README's section on poolers describes"
    )]
    StartupOptionsRejected {
        /// The address, without its password.
        address: String,
        /// What the pooler said.
        reason: String,
    },

    /// A statement was run through a write whose transaction has already ended.
    #[error(
        "{}",
        write_ended_message("it was committed or rolled back", "start a new write")
    )]
    WriteEnded,

    /// A connection was given back to a pool it does not belong to.
    #[error(
        "this connection cannot go back to this pool: {reason}; a pool hands out only \
         connections to its own address with its own settings, so close this one instead"
    )]
    ForeignConnection {
        /// How it differs (address or settings).
        reason: String,
    },

    /// A statement in the transaction failed, so `COMMIT` could only roll back.
    #[error(
        "the transaction was rolled back because a statement in it failed; nothing was committed"
    )]
    RolledBack,

    /// A statement got a different number of parameters than it has placeholders.
    #[error("the statement has {expected} placeholders but {given} parameters were given")]
    ParameterCount {
        /// Placeholders in the statement.
        expected: usize,
        /// Parameters given.
        given: usize,
    },

    /// A parameter value cannot be sent as the type the server expects.
    #[error("parameter {index} cannot be sent as {type_name}: {reason}")]
    Parameter {
        /// The parameter's position, from 1.
        index: usize,
        /// The type the server expects.
        type_name: String,
        /// Why not.
        reason: String,
    },

    /// A result column has a type this crate cannot read.
    #[error(
        "column {column} has type {type_name}, which writerlock cannot read; cast it in the \
         query, for example {column}::text"
    )]
    UnsupportedType {
        /// The column's name.
        column: String,
        /// Its type.
        type_name: String,
    },

    /// The required floor is above the writer's own version.
    #[error(
        "the required writer version {required} is above this code's version {version}: \
         that code would refuse its own writes"
    )]
    RequiredAboveVersion {
        /// The writer version.
        version: u16,
        /// The required floor.
        required: u16,
    },

    /// A writer version or floor does not fit the refusal lock key.
    #[error("writer version {value} is out of range; the highest allowed is {max}")]
    VersionOutOfRange {
        /// The value given.
        value: u16,
        /// The highest allowed.
        max: u16,
    },

    /// A time limit is 0, under 1 ms, or longer than Postgres accepts.
    #[error(
        "{setting} is {} seconds, outside the accepted range: it must be between {} and {} \
         seconds ({}); give a value in that range",
        limit_text(*.value),
        limit_text(*.min),
        limit_text(*.max),
        if *.value < *.min {
            "Postgres reads a limit under 1 ms as no limit at all"
        } else {
            "the longest limit Postgres accepts is 2147483647 ms"
        }
    )]
    LimitOutOfRange {
        /// The setting as the host's argument names it, such as `lock_wait`.
        setting: &'static str,
        /// The value given.
        value: Duration,
        /// The shortest accepted.
        min: Duration,
        /// The longest accepted.
        max: Duration,
    },

    /// Any other failure of the driver.
    #[error("the Postgres driver failed: {reason}")]
    Driver {
        /// What the driver said.
        reason: String,
    },
}

impl Error {
    /// This error's kind, which hosts map to their own class or code.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidUrl { .. } => ErrorKind::InvalidUrl,
            Error::Connect { .. } => ErrorKind::Connect,
            Error::ConnectTimedOut { .. } => ErrorKind::ConnectTimedOut,
            Error::SettingNotInEffect { .. } => ErrorKind::SettingNotInEffect,
            Error::LockNotGranted { .. } => ErrorKind::LockNotGranted,
            Error::Refused { .. } => ErrorKind::Refused,
            Error::AlreadyInTransaction => ErrorKind::AlreadyInTransaction,
            Error::Database { .. } => ErrorKind::Database,
            Error::SessionEnded { .. } => ErrorKind::SessionEnded,
            Error::Closed { .. } => ErrorKind::Closed,
            Error::CommitOutcomeUnknown { .. } => ErrorKind::CommitOutcomeUnknown,
            Error::Unsendable { .. } => ErrorKind::Unsendable,
            Error::Forked { .. } => ErrorKind::Forked,
            Error::StartupOptionsRejected { .. } => ErrorKind::StartupOptionsRejected,
            Error::WriteEnded => ErrorKind::WriteEnded,
            Error::ForeignConnection { .. } => ErrorKind::ForeignConnection,
            Error::RolledBack => ErrorKind::RolledBack,
            Error::ParameterCount { .. } => ErrorKind::ParameterCount,
            Error::Parameter { .. } => ErrorKind::Parameter,
            Error::UnsupportedType { .. } => ErrorKind::UnsupportedType,
            Error::RequiredAboveVersion { .. } => ErrorKind::RequiredAboveVersion,
            Error::VersionOutOfRange { .. } => ErrorKind::VersionOutOfRange,
            Error::LimitOutOfRange { .. } => ErrorKind::LimitOutOfRange,
            Error::Driver { .. } => ErrorKind::Driver,
        }
    }

    /// The SQLSTATE of this error, where there is one: the server's code for server errors,
    /// `LW001` for a refusal, `55P03` when the writer lock was not granted, `25001` for a
    /// lock asked for inside a transaction, `08003` for a closed connection, `40000` for a
    /// commit that rolled back, `08007` for a commit whose outcome is unknown.
    pub fn code(&self) -> Option<&SqlState> {
        match self {
            Error::Database { code, .. } | Error::SessionEnded { code, .. } => Some(code),
            Error::Connect { code, .. } => code.as_ref(),
            Error::Refused { .. } => Some(&REFUSED_CODE),
            Error::LockNotGranted { .. } => Some(&SqlState::LOCK_NOT_AVAILABLE),
            Error::AlreadyInTransaction => Some(&SqlState::ACTIVE_SQL_TRANSACTION),
            Error::Closed { .. } => Some(&SqlState::CONNECTION_DOES_NOT_EXIST),
            Error::RolledBack => Some(&SqlState::TRANSACTION_ROLLBACK),
            Error::CommitOutcomeUnknown { .. } => Some(&SqlState::TRANSACTION_RESOLUTION_UNKNOWN),
            Error::WriteEnded => Some(&SqlState::INVALID_TRANSACTION_STATE),
            Error::StartupOptionsRejected { .. } => Some(&SqlState::PROTOCOL_VIOLATION),
            Error::ConnectTimedOut { .. } => {
                Some(&SqlState::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION)
            }
            Error::InvalidUrl { .. }
            | Error::SettingNotInEffect { .. }
            | Error::Unsendable { .. }
            | Error::Forked { .. }
            | Error::ForeignConnection { .. }
            | Error::ParameterCount { .. }
            | Error::Parameter { .. }
            | Error::UnsupportedType { .. }
            | Error::RequiredAboveVersion { .. }
            | Error::VersionOutOfRange { .. }
            | Error::LimitOutOfRange { .. }
            | Error::Driver { .. } => None,
        }
    }

    /// Whether the connection that raised this error is gone for good (closed, lost or ended
    /// by the server). A pool drops such connections.
    pub fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            Error::Closed { .. } | Error::SessionEnded { .. } | Error::CommitOutcomeUnknown { .. }
        )
    }

    /// Turns a driver error into this error type.
    pub(crate) fn from_driver(err: postgres::Error) -> Error {
        if let Some(db) = err.as_db_error() {
            let code = db.code().clone();
            if code.code() == REFUSED_SQLSTATE {
                if let Some((version, floor)) = parse_refusal(db.message()) {
                    return Error::Refused { version, floor };
                }
            }
            if matches!(
                db.parsed_severity(),
                Some(Severity::Fatal) | Some(Severity::Panic)
            ) {
                return Error::SessionEnded {
                    code,
                    message: db.message().to_string(),
                };
            }
            return Error::Database {
                code,
                message: db.message().to_string(),
                detail: db.detail().map(str::to_string),
                hint: db.hint().map(str::to_string),
            };
        }
        if err
            .to_string()
            .starts_with("error encoding message to server")
        {
            // Nothing was sent; the session is as it was.
            return Error::Unsendable {
                problem: describe(&err),
                rolled_back: false,
            };
        }
        if err.is_closed() {
            return Error::Closed {
                reason: describe(&err),
            };
        }
        if source_is_io(&err) {
            return Error::Closed {
                reason: describe(&err),
            };
        }
        Error::Driver {
            reason: describe(&err),
        }
    }
}

/// What to check after a failed connect, by its cause: the server's SQLSTATE where it
/// refused the session, else the driver's words.
pub fn connect_hint(code: Option<&SqlState>, reason: &str) -> &'static str {
    let lower = reason.to_ascii_lowercase();
    if code == Some(&SqlState::TOO_MANY_CONNECTIONS) || lower.contains("too many clients") {
        return "the server has no free connection slot (max_connections, or the role's or \
                database's connection limit): close idle sessions, share connections through \
                a pool, or raise the limit";
    }
    if lower.contains("channel binding") {
        return "channel binding (channel_binding=require) needs SCRAM authentication over TLS, \
                which this session does not have: connect over TLS with a SCRAM password, or \
                set channel_binding=prefer";
    }
    if let Some(hint) = tls_hint(&lower) {
        return hint;
    }
    if lower.contains("no pg_hba.conf entry") {
        return "the server's pg_hba.conf has no entry for this client address, user and \
                database: add one, or connect as a user and database it admits";
    }
    if code == Some(&SqlState::INVALID_PASSWORD)
        || lower.contains("password authentication failed")
        || lower.contains("password missing")
    {
        return "check the user name and the password (in the address, PGPASSWORD or the \
                password file)";
    }
    if code == Some(&SqlState::INVALID_CATALOG_NAME) {
        return "check the database name, or create the database";
    }
    if code == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION) {
        return "check that the user exists and may log in to this database";
    }
    if code == Some(&SqlState::CANNOT_CONNECT_NOW) {
        return "the server is starting up, shutting down or in recovery: retry once it is \
                ready";
    }
    if code.is_none() {
        return "check that the server is running and reachable at that address (host, port, \
                socket directory, firewall)";
    }
    "check that the server is running and reachable at that address, and that the user, \
     password and database name are right"
}

/// The hint for a connect that failed over TLS, or for lack of it.
fn tls_hint(lower: &str) -> Option<&'static str> {
    Some(if lower.contains("server does not support tls") {
        "the server does not offer TLS (ssl is off in its postgresql.conf), and sslmode \
         require, verify-ca and verify-full never fall back to clear text: turn ssl on at the \
         server, or connect with sslmode=prefer on a network you trust"
    } else if lower.contains("no pg_hba.conf entry") && lower.contains("no encryption") {
        "the server's pg_hba.conf admits no session without TLS from this client (its entries \
         for it are hostssl): connect with sslmode=prefer (the default), require, verify-ca or \
         verify-full instead of disable, or add a host entry for this client"
    } else if lower.contains("pg_hba.conf rejects connection") && lower.contains("ssl encryption") {
        "the server's pg_hba.conf refuses this client over TLS (a reject entry for hostssl, or \
         only hostnossl entries for it): connect with sslmode=prefer or allow where clear text \
         is acceptable, or change the server's entry"
    } else if lower.contains("host name mismatch")
        || lower.contains("hostname mismatch")
        || lower.contains("ip address mismatch")
    {
        "sslmode=verify-full checks that the server's certificate names the host connected \
         to, and it names others: connect with a host name the certificate names (keep the \
         IP address in hostaddr if need be), have the server's certificate issued for this \
         name, or use sslmode=verify-ca to check the certificate's signer only"
    } else if lower.contains("root certificate file") && lower.contains("does not exist") {
        "sslmode=verify-ca and verify-full check the server's certificate against trusted \
         root certificates: name the file of the certificate authority that signed it with \
         sslrootcert (or PGSSLROOTCERT, or put it at ~/.postgresql/root.crt), use \
         sslrootcert=system for a certificate from a public authority, or use \
         sslmode=require to encrypt without checking"
    } else if lower.contains("certificate revoked") {
        "the server's certificate is revoked in the certificate revocation list (sslcrl, \
         sslcrldir or ~/.postgresql/root.crl): give the server a new certificate, or use an \
         up-to-date list"
    } else if lower.contains("certificate has expired") || lower.contains("not yet valid") {
        "the server's certificate has expired or is not valid yet: renew it at the server, \
         or check this machine's clock"
    } else if lower.contains("server certificate not verified")
        || lower.contains("certificate verify failed")
    {
        "the server's certificate is not signed by a certificate authority this client \
         trusts: name the file of the authority that signed it with sslrootcert (or \
         PGSSLROOTCERT, or ~/.postgresql/root.crt), sslrootcert=system for a certificate \
         from a public authority, or check that this is the server you meant"
    } else if lower.contains("requires a valid client certificate") {
        "the server's pg_hba.conf asks this user for a client certificate (cert): give it \
         with sslcert and sslkey (or PGSSLCERT and PGSSLKEY, or ~/.postgresql/postgresql.crt \
         and postgresql.key)"
    } else if lower.contains("certificate authentication failed") {
        "the client certificate was accepted but its common name (CN) is not the user name: \
         connect as the user the certificate names, or map it in the server's pg_ident.conf"
    } else if lower.contains("sslpassword") {
        "give the private key's passphrase with sslpassword in the address, or use a key \
         file that is not encrypted"
    } else if lower.contains("private key file") || lower.contains("client certificate") {
        "check the client certificate and key files (sslcert and sslkey, PGSSLCERT and \
         PGSSLKEY, or ~/.postgresql/postgresql.crt and postgresql.key)"
    } else if lower.contains("tls handshake") || lower.contains("setting up tls") {
        "the TLS handshake failed: check the TLS options (sslrootcert, sslcert, sslkey, \
         ssl_min_protocol_version) and the server's TLS set-up; the server's log says more"
    } else {
        return None;
    })
}

fn source_is_io(err: &postgres::Error) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// A duration in seconds for a limit message: `0`, `0.0005`, `1.5`, `2147483.647`.
fn limit_text(value: Duration) -> String {
    let text = format!("{:.6}", value.as_secs_f64());
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A driver error with its causes: `error connecting to server: Connection refused (os
/// error 111)`.
pub(crate) fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// What a failed `COMMIT` means. A lost connection, or a session ended while `COMMIT` was
/// in flight, leaves the outcome unknown; only an ended session that was idle before the
/// `COMMIT` arrived (the idle limit) or a server error answering it is a known rollback.
pub(crate) fn commit_failure(err: Error) -> Error {
    match err {
        Error::Closed { reason } | Error::Driver { reason } => {
            Error::CommitOutcomeUnknown { reason }
        }
        Error::SessionEnded { code, message }
            if code != SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT =>
        {
            Error::CommitOutcomeUnknown {
                reason: format!("the server ended the session: {message}"),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind's place in [`ErrorKind::ALL`]: the match is exhaustive, so a new kind must be
    /// placed here, and the test below then fails until it is in `ALL` too.
    fn position(kind: ErrorKind) -> usize {
        match kind {
            ErrorKind::InvalidUrl => 0,
            ErrorKind::Connect => 1,
            ErrorKind::ConnectTimedOut => 2,
            ErrorKind::SettingNotInEffect => 3,
            ErrorKind::LockNotGranted => 4,
            ErrorKind::Refused => 5,
            ErrorKind::AlreadyInTransaction => 6,
            ErrorKind::Database => 7,
            ErrorKind::SessionEnded => 8,
            ErrorKind::Closed => 9,
            ErrorKind::CommitOutcomeUnknown => 10,
            ErrorKind::Unsendable => 11,
            ErrorKind::Forked => 12,
            ErrorKind::StartupOptionsRejected => 13,
            ErrorKind::WriteEnded => 14,
            ErrorKind::ForeignConnection => 15,
            ErrorKind::RolledBack => 16,
            ErrorKind::ParameterCount => 17,
            ErrorKind::Parameter => 18,
            ErrorKind::UnsupportedType => 19,
            ErrorKind::RequiredAboveVersion => 20,
            ErrorKind::VersionOutOfRange => 21,
            ErrorKind::LimitOutOfRange => 22,
            ErrorKind::Driver => 23,
        }
    }

    #[test]
    fn every_kind_is_listed_once_in_all() {
        let places: Vec<usize> = ErrorKind::ALL.iter().map(|k| position(*k)).collect();
        assert_eq!(places, (0..ErrorKind::ALL.len()).collect::<Vec<_>>());
    }

    #[test]
    fn names_are_distinct_snake_case() {
        let mut names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert!(names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn write_ended_text_is_unchanged() {
        assert_eq!(
            Error::WriteEnded.to_string(),
            "this write has already ended (it was committed or rolled back), so the statement \
             was not run: a write's statements run only inside its own transaction, under the \
             writer lock; start a new write"
        );
    }

    #[test]
    fn kind_follows_the_variant() {
        let cases = [
            (
                Error::InvalidUrl { reason: "x".into() },
                ErrorKind::InvalidUrl,
            ),
            (
                Error::Refused {
                    version: 0,
                    floor: 1,
                },
                ErrorKind::Refused,
            ),
            (Error::WriteEnded, ErrorKind::WriteEnded),
            (Error::RolledBack, ErrorKind::RolledBack),
            (Error::Driver { reason: "x".into() }, ErrorKind::Driver),
        ];
        for (err, kind) in cases {
            assert_eq!(err.kind(), kind, "{err}");
        }
    }

    #[test]
    fn refusal_text_and_code() {
        let err = Error::Refused {
            version: 0,
            floor: 1,
        };
        assert_eq!(
            err.to_string(),
            "ledger writer version 0 is below version 1, the oldest the shared database \
             allows; update its code and restart it"
        );
        assert_eq!(err.code().map(|c| c.code()), Some("LW001"));
        assert_eq!(parse_refusal(&err.to_string()), Some((0, 1)));
        assert_eq!(parse_refusal("ledger writer version x is below"), None);
    }

    #[test]
    fn lock_not_granted_text() {
        let err = Error::LockNotGranted {
            tries: 3,
            wait: Duration::from_secs(10),
        };
        assert_eq!(
            err.to_string(),
            "the ledger writer lock was not granted in 3 waits of 10 seconds"
        );
        assert_eq!(err.code(), Some(&SqlState::LOCK_NOT_AVAILABLE));
    }

    #[test]
    fn connect_hints_follow_the_cause() {
        let connect = |code: Option<SqlState>, reason: &str| {
            Error::Connect {
                address: "postgresql://u@h:5432/d".into(),
                reason: reason.into(),
                code,
            }
            .to_string()
        };
        let full = connect(
            Some(SqlState::TOO_MANY_CONNECTIONS),
            "db error: FATAL: sorry, too many clients already",
        );
        assert!(
            full.starts_with("could not connect to the database at postgresql://u@h:5432/d: "),
            "{full}"
        );
        assert!(full.contains("max_connections"), "{full}");
        assert!(!full.contains("password"), "{full}");
        let tls = connect(
            Some(SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "db error: FATAL: no pg_hba.conf entry for host \"127.0.0.1\", user \"u\", database \"d\", no encryption",
        );
        assert!(tls.contains("hostssl"), "{tls}");
        let binding = connect(
            None,
            "error performing authentication: channel binding required but not supported",
        );
        assert!(binding.contains("channel_binding=prefer"), "{binding}");
        let auth = connect(
            Some(SqlState::INVALID_PASSWORD),
            "db error: FATAL: password authentication failed for user \"u\"",
        );
        assert!(
            auth.contains("check the user name and the password"),
            "{auth}"
        );
        assert!(!auth.contains("running"), "{auth}");
        let down = connect(
            None,
            "error connecting to server: Connection refused (os error 111)",
        );
        assert!(
            down.contains("check that the server is running and reachable"),
            "{down}"
        );
        assert!(!down.contains("password"), "{down}");
        for text in [full, tls, binding, auth, down] {
            assert!(!text.contains("ledger database"), "{text}");
        }
    }

    #[test]
    fn tls_hints_name_the_cause() {
        for (reason, hint) in [
            (
                "error performing TLS handshake: server does not support TLS",
                "ssl is off",
            ),
            (
                "db error: FATAL: no pg_hba.conf entry for host \"h\", user \"u\", database \"d\", no encryption",
                "instead of disable",
            ),
            (
                "db error: FATAL: pg_hba.conf rejects connection for host \"h\", user \"u\", database \"d\", SSL encryption",
                "refuses this client over TLS",
            ),
            (
                "error performing TLS handshake: server certificate host name mismatch: the certificate is for a, not for host \"b\"",
                "sslmode=verify-ca",
            ),
            (
                "error setting up TLS: root certificate file \"/x\" does not exist, and sslmode=verify-full checks",
                "sslrootcert=system",
            ),
            (
                "error performing TLS handshake: server certificate not verified: certificate revoked",
                "revocation list",
            ),
            (
                "error performing TLS handshake: server certificate not verified: unable to get local issuer certificate",
                "not signed by a certificate authority this client trusts",
            ),
            (
                "db error: FATAL: connection requires a valid client certificate",
                "sslcert and sslkey",
            ),
            (
                "db error: FATAL: certificate authentication failed for user \"u\"",
                "common name",
            ),
        ] {
            let text = connect_hint(None, reason);
            assert!(text.contains(hint), "{reason}: {text}");
            assert!(!text.contains("speak no TLS"), "{text}");
        }
    }

    #[test]
    fn already_in_transaction_text() {
        assert_eq!(
            Error::AlreadyInTransaction.to_string(),
            "cannot start a transaction within a transaction"
        );
    }
}
