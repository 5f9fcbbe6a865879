//! A connection that carries the writer-session settings.
//!
//! [`Connection::connect`] sends the settings as `-c` startup options, turns on client TCP
//! keepalives, and then checks that every startup option took effect: something between
//! client and server that drops them (a connection pooler) is an
//! [`Error::SettingNotInEffect`] naming the setting, not a session without limits. The
//! server-side `tcp_*` settings cannot apply on a Unix socket and are not checked there.
//!
//! Statements take `?` or `$n` placeholders and [`Value`] parameters. Outside
//! [`Connection::begin`] each statement commits on its own.
//!
//! Nothing here depends on session state between transactions: every statement with
//! parameters goes as an unnamed statement (Parse, Bind, Describe, Execute and Sync in one
//! message, one round trip), never as a named prepared statement, so a transaction pooler
//! that hands each transaction to another server connection runs each statement with its
//! own parameters. (A statement that may return rows but returned none is described once
//! more, Parse and Describe only, for its columns; nothing runs twice. That statement is
//! named, as the driver describes only named ones, and lives inside one transaction. A result
//! holding OID-alias values, `regclass` and the like, which come as bare OIDs, is followed by
//! one more unnamed statement that asks the server for their names.)

use std::mem::ManuallyDrop;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use postgres::config::{Host, SslMode as DriverSslMode, SslNegotiation};
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{FromSql, Type};
use postgres::{NoTls, SimpleQueryMessage};

use super::address::{Address, TargetSession};
use super::error::{commit_failure, describe, Error};
use super::placeholder::{may_return_rows, parameter_count, translate};
use super::prepared::{drops_prepared, Plan, Prepared};
use super::settings::{verify_checks, Settings};
pub use super::settings::{SettingCheck, SettingStatus};
use super::socket::{Peer, SessionSocket};
use super::tls::SslMode as TlsMode;
use super::value::{decode_named, may_hold_reg, reg_oids, Column, RegNames, Row, Rows, Value};

/// Where a connection stands with respect to a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tx {
    /// No transaction is open.
    Idle,
    /// A transaction is open.
    Open {
        /// Statements run in it so far.
        statements: u32,
        /// Whether one of them failed (the server aborted the transaction).
        failed: bool,
    },
}

/// The rows of each statement of a simple-query message, each value as [`Value::Text`] (or
/// [`Value::Null`]).
pub(crate) type TextResults = Vec<Vec<Vec<Value>>>;

/// What [`Connection::execute_each`] hands each row to, with the result's columns.
pub type RowSink<'a> = dyn FnMut(&[Column], Row) -> Result<(), Error> + 'a;

/// The most parameters one statement can carry: the protocol counts them in 16 bits.
pub const MAX_PARAMETERS: usize = 65_535;

/// A session with the ledger database that carries the [`Settings`].
///
/// A connection belongs to the process that opened it: after `fork()` the child gets
/// [`Error::Forked`] at its first use and never writes to the parent's session, not even
/// when it drops the connection.
pub struct Connection {
    /// Dropped by hand in [`Drop`]: only in the process that opened it.
    client: ManuallyDrop<postgres::Client>,
    settings: Settings,
    address: Address,
    pub(crate) tx: Tx,
    /// The refusal count at which this session last found no refused writer's lock (see
    /// [`Protocol::known_clean`](super::protocol::Protocol::known_clean)).
    pub(crate) refusals_clean: Option<i64>,
    lost: Option<String>,
    /// Whether the session was lost with a transaction open (never committed).
    lost_in_tx: bool,
    pid: i32,
    owner: u32,
    /// Counts the transactions opened on this session, so a [`Write`](super::Write) knows
    /// whether the open one is still its own.
    pub(crate) serial: u64,
    /// Whether the server sees this session come from another address or port than the
    /// one dialled: a pooler or proxy sits in between.
    via_proxy: bool,
    /// The session's own socket, when it could be told apart (see [`super::socket`]).
    socket: Option<SessionSocket>,
    released: bool,
    /// The statements kept prepared on the server (only while `socket` is known: the
    /// session talks to the server directly).
    prepared: Prepared,
    /// Whether the writer protocol's floor check is prepared on this session (`None`: not
    /// tried; `Some(false)`: preparing it failed, the check runs unprepared).
    pub(crate) floor_check_prepared: Option<bool>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        if let Some(socket) = self.socket.take() {
            socket.release();
        }
        if self.owner != crate::process::current_pid() {
            // A child after fork(): closing would send the parent's session a Terminate,
            // and closing its kept statements would close the parent's. The child's copy
            // of the socket closes with the process; the parent keeps it.
            std::mem::forget(self.prepared.take_all());
            return;
        }
        // SAFETY: `released` guards this; the client is taken out exactly once, here or in
        // `close`, and never touched afterwards.
        let client = unsafe { ManuallyDrop::take(&mut self.client) };
        drop(client);
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .field("pid", &self.pid)
            .field("tx", &self.tx)
            .field("lost", &self.lost)
            .field("via_proxy", &self.via_proxy)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Begin,
    End,
    RollbackTo,
    Other,
}

/// The kind of transaction control a statement is, from its first words.
fn classify(sql: &str) -> Kind {
    let mut words = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(' || c == ';')
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase);
    let first = words.next().unwrap_or_default();
    match first.as_str() {
        "BEGIN" | "START" => Kind::Begin,
        "COMMIT" | "END" => Kind::End,
        "ROLLBACK" | "ABORT" => match words.next().as_deref() {
            Some("TO") => Kind::RollbackTo,
            _ => Kind::End,
        },
        _ => Kind::Other,
    }
}

/// A driver's connect error followed by what completing the address noticed (a password
/// file that was not used, and why).
fn with_notes(mut reason: String, notes: &[String]) -> String {
    for note in notes {
        reason.push_str("; ");
        reason.push_str(note);
    }
    reason
}

/// `config` with the session's settings: the startup options after the address's own, the
/// program's `application_name` unless the address names one, keepalives and timeouts.
fn prepared(mut config: postgres::Config, settings: &Settings) -> postgres::Config {
    let ours = settings.startup_options();
    let options = match config.get_options() {
        Some(theirs) if !theirs.trim().is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    config.options(&options);
    if config.get_application_name().is_none() {
        config.application_name(&default_application_name());
    }
    config
        .keepalives(settings.get_keepalives())
        .keepalives_idle(settings.get_keepalives_idle())
        .keepalives_interval(settings.get_keepalives_interval())
        .keepalives_retries(settings.get_keepalives_count())
        .tcp_user_timeout(settings.get_tcp_user_timeout())
        .connect_timeout(settings.get_connect_timeout());
    config
}

/// Why one attempt to connect failed: the reason (not yet redacted) and the server's
/// SQLSTATE, when the server refused the session.
type Failed = (String, Option<SqlState>);

/// A failed driver connect, with the reason a server certificate was not accepted in
/// place of OpenSSL's terse words when there is one.
fn failed(err: &postgres::Error, verify_failure: &Mutex<Option<String>>) -> Failed {
    let mut reason = describe(err);
    let why = verify_failure.lock().ok().and_then(|mut w| w.take());
    if let Some(why) = why.filter(|_| reason.starts_with("error performing TLS handshake")) {
        // In place of OpenSSL's "certificate verify failed" with its source position.
        reason = format!("error performing TLS handshake: {why}");
    }
    (reason, err.code().cloned())
}

/// One connect with the driver in `mode`: without TLS, or with OpenSSL set up from the
/// address's TLS options.
fn attempt(
    address: &Address,
    config: &postgres::Config,
    mode: DriverSslMode,
) -> Result<postgres::Client, Failed> {
    let mut config = config.clone();
    config.ssl_mode(mode);
    if mode == DriverSslMode::Disable {
        return config
            .connect(NoTls)
            .map_err(|e| failed(&e, &Mutex::new(None)));
    }
    let verify_failure = Arc::new(Mutex::new(None));
    let direct = config.get_ssl_negotiation() == SslNegotiation::Direct;
    let connector = address
        .tls()
        .connector(direct, Arc::clone(&verify_failure))
        .map_err(|reason| (format!("error setting up TLS: {reason}"), None))?;
    config
        .connect(connector)
        .map_err(|e| failed(&e, &verify_failure))
}

/// Connects with `config` (one or all of the address's hosts) as libpq does for the
/// address's `sslmode`: `allow` tries again with TLS when the server's `pg_hba.conf` refuses
/// the session without it, `prefer` tries again without TLS when the TLS handshake fails or
/// `pg_hba.conf` refuses the session with it; the error is the TLS attempt's. Other refusals
/// (a wrong password, a missing database) are not tried twice: the other attempt would only
/// repeat them. Unix sockets never use TLS.
fn dial(
    address: &Address,
    config: postgres::Config,
    settings: &Settings,
) -> Result<postgres::Client, Failed> {
    let config = prepared(config, settings);
    if config
        .get_hosts()
        .iter()
        .all(|h| matches!(h, Host::Unix(_)))
    {
        return attempt(address, &config, DriverSslMode::Disable);
    }
    match address.tls().mode() {
        TlsMode::Disable => attempt(address, &config, DriverSslMode::Disable),
        TlsMode::Allow => match attempt(address, &config, DriverSslMode::Disable) {
            Err((reason, Some(_))) if reason.contains("no encryption") => {
                attempt(address, &config, DriverSslMode::Require)
            }
            other => other,
        },
        TlsMode::Prefer => match attempt(address, &config, DriverSslMode::Prefer) {
            Err(first)
                if first.0.contains("TLS handshake")
                    || (first.1.is_some() && first.0.contains("SSL encryption")) =>
            {
                attempt(address, &config, DriverSslMode::Disable).map_err(|_| first)
            }
            other => other,
        },
        TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => {
            attempt(address, &config, DriverSslMode::Require)
        }
    }
}

/// This crate's error for a failed connect to `address`.
fn connect_error(address: &Address, (reason, code): Failed) -> Error {
    let reason = address.redact(&with_notes(reason, address.notes()));
    if reason.contains("unsupported startup parameter") {
        Error::StartupOptionsRejected {
            address: address.to_string(),
            reason,
        }
    } else {
        Error::Connect {
            address: address.to_string(),
            reason,
            code,
        }
    }
}

/// Connects to the first host of `address` that is the kind of server its
/// `target_session_attrs` asks for (`primary`, `standby`, `prefer-standby`), trying the
/// hosts in order as libpq does: a server in recovery is a standby, one that is not a
/// primary; `prefer-standby` takes any server when no host is a standby.
fn connect_to_target(address: &Address, settings: &Settings) -> Result<postgres::Client, Error> {
    let target = address.target();
    let passes: &[Option<bool>] = match target {
        TargetSession::PreferStandby => &[Some(true), None],
        TargetSession::Standby => &[Some(true)],
        TargetSession::Primary => &[Some(false)],
        _ => &[None],
    };
    let mut reasons = Vec::new();
    let mut code = None;
    for want in passes {
        for (host, config) in address.per_host() {
            let mut client = match dial(address, config, settings) {
                Ok(client) => client,
                Err((reason, err_code)) => {
                    if want == &passes[0] {
                        code = code.or(err_code);
                        reasons.push(format!("{host}: {}", address.redact(&reason)));
                    }
                    continue;
                }
            };
            let Some(want) = want else {
                return Ok(client);
            };
            let standby = client
                .simple_query("SELECT pg_is_in_recovery()")
                .map_err(|err| connect_error(address, (describe(&err), err.code().cloned())))?
                .into_iter()
                .find_map(|m| match m {
                    SimpleQueryMessage::Row(row) => row.get(0).map(|v| v == "t"),
                    _ => None,
                })
                .unwrap_or(false);
            if standby == *want {
                return Ok(client);
            }
            reasons.push(format!(
                "{host}: the server is {}",
                if standby {
                    "a standby (in recovery)"
                } else {
                    "a primary (not in recovery)"
                }
            ));
        }
    }
    Err(Error::Connect {
        address: address.to_string(),
        reason: format!(
            "no host is a {} server, as target_session_attrs={} asks ({})",
            if target == TargetSession::Primary {
                "primary"
            } else {
                "standby"
            },
            target.name(),
            with_notes(reasons.join("; "), address.notes())
        ),
        code,
    })
}

/// A column value as raw bytes, decoded afterwards with the column's type.
struct Raw<'a>(Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> Result<Raw<'a>, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Raw<'a>, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

impl Connection {
    /// Opens a session at `url` with `settings`, and checks that every startup setting took
    /// effect.
    pub fn connect(url: &str, settings: &Settings) -> Result<Connection, Error> {
        let address = Address::parse(url)?;
        Connection::open(&address, settings, true)
    }

    /// Opens a session like [`Connection::connect`] but does not check the settings; for
    /// tools that report them with [`Connection::check_settings`].
    pub fn connect_unverified(url: &str, settings: &Settings) -> Result<Connection, Error> {
        let address = Address::parse(url)?;
        Connection::open(&address, settings, false)
    }

    /// Opens a session at a parsed `address`.
    ///
    /// The whole set-up (TCP, TLS, authentication, and the settings check when `verify`)
    /// runs within the settings' connect timeout; past it this fails with
    /// [`Error::Connect`] saying so, and a set-up still stuck on a frozen server is left to
    /// finish or fail on its own.
    pub fn open(address: &Address, settings: &Settings, verify: bool) -> Result<Connection, Error> {
        settings.validate()?;
        let limit = settings.get_connect_timeout();
        let (sender, receiver) = mpsc::sync_channel(1);
        let (a, s) = (address.clone(), settings.clone());
        let spawned = std::thread::Builder::new()
            .name("writerlock-connect".to_string())
            .spawn(move || {
                let _ = sender.send(Connection::open_now(&a, &s, verify));
            });
        if spawned.is_err() {
            return Connection::open_now(address, settings, verify);
        }
        match receiver.recv_timeout(limit) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::ConnectTimedOut {
                address: address.to_string(),
                limit,
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Driver {
                reason: "the connection set-up ended without a result".to_string(),
            }),
        }
    }

    fn open_now(address: &Address, settings: &Settings, verify: bool) -> Result<Connection, Error> {
        let client = match address.target().wants_standby() {
            None => dial(address, address.config().clone(), settings)
                .map_err(|failed| connect_error(address, failed))?,
            Some(_) => connect_to_target(address, settings)?,
        };
        Connection::opened(client, address, settings, verify)
    }

    fn opened(
        client: postgres::Client,
        address: &Address,
        settings: &Settings,
        verify: bool,
    ) -> Result<Connection, Error> {
        let mut conn = Connection {
            client: ManuallyDrop::new(client),
            settings: settings.clone(),
            address: address.clone(),
            tx: Tx::Idle,
            refusals_clean: None,
            lost: None,
            lost_in_tx: false,
            pid: 0,
            owner: crate::process::current_pid(),
            serial: 0,
            via_proxy: false,
            socket: None,
            released: false,
            prepared: Prepared::default(),
            floor_check_prepared: None,
        };
        let first = conn.execute(
            "SELECT pg_backend_pid(), inet_server_port(), inet_client_port()",
            &[],
        )?;
        let row = first.first();
        conn.pid = row
            .and_then(|r| r.get(0))
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(0);
        let server_port = row.and_then(|r| r.get(1)).and_then(Value::as_i64);
        conn.via_proxy = proxied(address, server_port);
        if !conn.via_proxy {
            let client_port = row.and_then(|r| r.get(2)).and_then(Value::as_i64);
            conn.socket = socket_peer(address, server_port, client_port)
                .and_then(|peer| SessionSocket::find(&peer));
        }
        if verify {
            conn.verify_settings()?;
        }
        Ok(conn)
    }

    /// The settings this session was opened with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The address this session was opened at (its display form has no password).
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The server process id of this session (`pg_backend_pid()`).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the session is closed or was lost; it cannot run statements any more.
    pub fn is_closed(&self) -> bool {
        self.lost.is_some() || self.client.is_closed()
    }

    /// Whether this process opened the connection (false in a child after `fork()`).
    pub fn is_own(&self) -> bool {
        self.owner == crate::process::current_pid()
    }

    /// How this session dialled the server, for the writer protocol's refusal lock
    /// ([`Protocol::dialled`](super::protocol::Protocol::dialled)): `Some(Some(port))` over
    /// TCP, `Some(None)` over a Unix socket, `None` when the address names several hosts.
    pub(crate) fn dialled_port(&self) -> Option<Option<u16>> {
        dialled(&self.address)
    }

    /// Whether the server sees this session come from another port or kind of socket than
    /// the one dialled, which means a pooler or proxy sits in between. Such a session takes
    /// no session-scoped lock: behind a transaction pooler it would stay on a server
    /// connection that other clients share.
    pub fn via_proxy(&self) -> bool {
        self.via_proxy
    }

    /// Checks with one empty round trip, bounded by `limit`, that the server still answers.
    /// A session that does not is marked lost.
    pub fn check_alive(&mut self, limit: Duration) -> Result<(), Error> {
        self.usable()?;
        match self.client.is_valid(limit) {
            Ok(()) => Ok(()),
            Err(err) => {
                let reason = describe(&err);
                self.lost = Some(reason.clone());
                self.tx = Tx::Idle;
                Err(Error::Closed { reason })
            }
        }
    }

    /// Whether the server already ended this idle session (a restart, a failover,
    /// `pg_terminate_backend`), told without a round trip: an idle session's socket has
    /// nothing to read unless the server sent its termination notice or closed it (see
    /// [`super::socket`]). Returns the server's words as the error ([`Error::SessionEnded`],
    /// or [`Error::Closed`] at end of file) and marks the session lost; `None` when the
    /// session is alive, in a transaction, or its socket is unknown.
    pub(crate) fn ended_while_idle(&mut self) -> Option<Error> {
        if self.tx != Tx::Idle || self.lost.is_some() || !self.is_own() {
            return None;
        }
        if !self.socket.is_some_and(|s| s.readable()) {
            return None;
        }
        // Let the driver read what is waiting (the notice comes before the end of file).
        let read = self
            .client
            .notifications()
            .timeout_iter(Duration::from_millis(100))
            .next();
        let err = match read {
            Err(err) => match Error::from_driver(err) {
                Error::Database { message, code, .. } => Error::SessionEnded { code, message },
                Error::SessionEnded { code, message } => Error::SessionEnded { code, message },
                _ => Error::Closed {
                    reason: "the server closed it while it was idle, as a restart or failover \
                             does; nothing was sent"
                        .into(),
                },
            },
            Ok(_) if self.client.is_closed() => Error::Closed {
                reason: "the server closed it while it was idle, as a restart or failover \
                         does; nothing was sent"
                    .into(),
            },
            // A notice or notification: the session is alive.
            Ok(_) => return None,
        };
        self.lost = Some(match &err {
            Error::SessionEnded { message, .. } => message.clone(),
            other => other.to_string(),
        });
        self.lost_in_tx = false;
        Some(err)
    }

    /// Fails, sending nothing, when the server already ended this idle session.
    fn not_ended(&mut self) -> Result<(), Error> {
        match self.ended_while_idle() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Whether a transaction is open on this session.
    pub fn in_transaction(&self) -> bool {
        matches!(self.tx, Tx::Open { .. })
    }

    /// Runs one statement with `?` or `$n` placeholders and returns its rows.
    ///
    /// `BEGIN`, `COMMIT` and `ROLLBACK` sent this way are tracked like [`Connection::begin`]
    /// and friends.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Rows, Error> {
        let mut rows = Vec::new();
        let (columns, affected) = self.execute_each(sql, params, &mut |_, row| {
            rows.push(row);
            Ok(())
        })?;
        Ok(Rows::new(columns, rows, affected))
    }

    /// Runs one statement like [`Connection::execute`], handing each row to `sink` as it is
    /// read (with the result's columns) instead of keeping them all; returns the columns and
    /// the row count of the command tag. When `sink` fails, the remaining rows are read
    /// and dropped (the session stays in step) and its error is returned.
    pub fn execute_each(
        &mut self,
        sql: &str,
        params: &[Value],
        sink: &mut RowSink<'_>,
    ) -> Result<(Vec<Column>, u64), Error> {
        let sql = translate(sql);
        let kind = classify(&sql);
        let committing = kind == Kind::End && is_commit(&sql) && self.in_transaction();
        self.sendable(&sql, params)?;
        let result = self.query(&sql, params, sink);
        self.track(kind, result.as_ref().err());
        match result {
            Err(Error::Unsendable { problem, .. }) => Err(self.unsendable(problem)),
            Err(err) if committing => Err(commit_failure(err)),
            other => other,
        }
    }

    /// Refuses, before anything is sent, a statement the protocol cannot carry (a NUL byte
    /// in the SQL text, more than [`MAX_PARAMETERS`] parameters). An open transaction is
    /// rolled back, so the writer lock is free at once and nothing in it is written.
    fn sendable(&mut self, sql: &str, params: &[Value]) -> Result<(), Error> {
        let problem = if let Some(at) = sql.find('\0') {
            format!(
                "the SQL text contains a NUL byte (at byte {at}), which Postgres cannot \
                 receive; remove it, or pass binary data as a bytea parameter"
            )
        } else if params.len() > MAX_PARAMETERS {
            format!(
                "it has {} parameters, more than the {MAX_PARAMETERS} one statement can carry; \
                 split it, or pass the values as one array parameter",
                params.len()
            )
        } else {
            return Ok(());
        };
        Err(self.unsendable(problem))
    }

    /// The error for a statement that was never sent, after rolling back an open
    /// transaction.
    fn unsendable(&mut self, problem: String) -> Error {
        let rolled_back = self.in_transaction();
        if rolled_back {
            if let Err(err) = self.rollback() {
                return err;
            }
        }
        Error::Unsendable {
            problem,
            rolled_back,
        }
    }

    /// Runs a script of statements separated by `;`, without parameters (the simple query
    /// protocol), such as DDL.
    pub fn execute_batch(&mut self, sql: &str) -> Result<(), Error> {
        self.sendable(sql, &[])?;
        let result = self.simple(sql);
        // One statement (`COMMIT`, say, sent through a write's connection) moves the
        // transaction as it says; a longer script counts as work in it (its parts cannot be
        // told apart from here: a function body has `;` and `END` of its own).
        let statement = sql.trim().trim_end_matches(';');
        let kind = if statement.contains(';') {
            Kind::Other
        } else {
            classify(statement)
        };
        self.track(kind, result.as_ref().err());
        result
    }

    /// Runs a script like [`Connection::execute_batch`] and returns how many rows its
    /// statements inserted, updated, deleted or returned in all.
    pub fn execute_batch_counted(&mut self, sql: &str) -> Result<u64, Error> {
        self.sendable(sql, &[])?;
        let result = self
            .usable()
            .and_then(|()| self.not_ended())
            .and_then(|()| {
                self.mind_prepared(sql);
                self.client
                    .simple_query(sql)
                    .map_err(Error::from_driver)
                    .map(|messages| {
                        messages
                            .iter()
                            .map(|m| match m {
                                SimpleQueryMessage::CommandComplete(n) => *n,
                                _ => 0,
                            })
                            .sum()
                    })
            });
        self.track(Kind::Other, result.as_ref().err());
        result
    }

    /// Opens a transaction. Inside an open transaction this fails with `cannot start a
    /// transaction within a transaction`.
    pub fn begin(&mut self) -> Result<(), Error> {
        if self.in_transaction() {
            return Err(Error::AlreadyInTransaction);
        }
        let result = self.simple("BEGIN");
        self.track(Kind::Begin, result.as_ref().err());
        result
    }

    /// Commits the open transaction; does nothing when none is open. If a statement in it
    /// failed, the server can only roll back: the transaction is rolled back and this returns
    /// [`Error::RolledBack`].
    ///
    /// When the connection is lost while `COMMIT` is in flight, nobody can tell whether the
    /// server committed: that is [`Error::CommitOutcomeUnknown`], never a rollback. A
    /// connection lost before `COMMIT` was sent is [`Error::Closed`]: nothing was committed.
    pub fn commit(&mut self) -> Result<(), Error> {
        if self.lost_in_tx {
            return Err(self.lost_error());
        }
        match self.tx {
            Tx::Idle => Ok(()),
            Tx::Open { failed: true, .. } => {
                self.rollback()?;
                Err(Error::RolledBack)
            }
            Tx::Open { .. } => {
                let result = self.simple("COMMIT");
                self.track(Kind::End, result.as_ref().err());
                result.map_err(commit_failure)
            }
        }
    }

    /// Rolls back the open transaction; does nothing when none is open.
    pub fn rollback(&mut self) -> Result<(), Error> {
        if self.tx == Tx::Idle {
            return Ok(());
        }
        let result = self.simple("ROLLBACK");
        self.track(Kind::End, result.as_ref().err());
        result
    }

    /// What `SHOW name` prints on this session (`None` for an unset custom setting).
    pub fn show(&mut self, name: &str) -> Result<Option<String>, Error> {
        let rows = self.execute(
            "SELECT current_setting($1, true)",
            &[Value::Text(name.to_string())],
        )?;
        Ok(rows
            .first()
            .and_then(|r| r.get(0))
            .and_then(Value::as_str)
            .map(str::to_string))
    }

    /// Reports, for every startup setting, the value sent and whether the server applied it.
    pub fn check_settings(&mut self) -> Result<Vec<SettingCheck>, Error> {
        let rows = self.execute(&self.settings.check_sql(), &[])?;
        let rows: Vec<Vec<Value>> = rows
            .into_rows()
            .into_iter()
            .map(|r| r.into_values())
            .collect();
        Ok(self.settings.read_checks(&rows))
    }

    /// Fails with [`Error::SettingNotInEffect`] naming the first startup setting the server
    /// did not apply.
    pub fn verify_settings(&mut self) -> Result<(), Error> {
        let checks = self.check_settings()?;
        verify_checks(checks)
    }

    /// Closes the session (an open transaction rolls back on the server). Closing a session
    /// that is already lost or ended succeeds silently; in a child after `fork()` it only
    /// lets go of the child's copy and leaves the parent's session alone.
    pub fn close(mut self) -> Result<(), Error> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        if let Some(socket) = self.socket.take() {
            socket.release();
        }
        if !self.is_own() {
            return Ok(());
        }
        let dead = self.is_closed();
        // SAFETY: `released` was false and is now true; the client is taken out exactly once
        // and `Drop` will not touch it.
        let client = unsafe { ManuallyDrop::take(&mut self.client) };
        match client.close().map_err(Error::from_driver) {
            Err(err) if !dead && !err.is_connection_lost() => Err(err),
            _ => Ok(()),
        }
    }

    fn lost_error(&self) -> Error {
        Error::Closed {
            reason: match &self.lost {
                Some(reason) => format!("lost earlier: {reason}"),
                None => "an earlier error ended the session".to_string(),
            },
        }
    }

    /// Fails when the session cannot be used: opened by another process (a parent before
    /// `fork()`), or lost earlier.
    fn usable(&self) -> Result<(), Error> {
        if !self.is_own() {
            return Err(Error::Forked {
                owner: self.owner,
                pid: crate::process::current_pid(),
            });
        }
        if self.lost.is_some() {
            return Err(self.lost_error());
        }
        Ok(())
    }

    fn simple(&mut self, sql: &str) -> Result<(), Error> {
        self.usable()?;
        self.not_ended()?;
        self.mind_prepared(sql);
        self.client.batch_execute(sql).map_err(Error::from_driver)
    }

    /// Whether this session talks to the server directly: it found its own socket, whose
    /// port is the one the server sees the session come from. Only such a session keeps
    /// statements prepared.
    pub(crate) fn is_direct(&self) -> bool {
        self.socket.is_some()
    }

    /// Before `sql` runs: when it may drop the server's prepared statements (`DISCARD ALL`,
    /// `DEALLOCATE`), forgets the kept ones (see [`super::prepared`]); returns whether it
    /// did.
    fn mind_prepared(&mut self, sql: &str) -> bool {
        let drops = drops_prepared(sql);
        if drops {
            self.prepared.clear();
            self.floor_check_prepared = None;
        }
        drops
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[Value],
        sink: &mut RowSink<'_>,
    ) -> Result<(Vec<Column>, u64), Error> {
        self.usable()?;
        self.not_ended()?;
        // Counted here, before anything is sent, so a wrong count leaves the transaction as
        // it was.
        let expected = parameter_count(sql);
        if expected != params.len() {
            return Err(Error::ParameterCount {
                expected,
                given: params.len(),
            });
        }
        // Each parameter declares the type of its value (see `Value::declared_type`), in
        // text format except bytes.
        let types: Vec<Type> = params.iter().map(Value::declared_type).collect();
        // A session that talks to the server directly keeps the statements it runs often
        // prepared (see `prepared`); behind a pooler, every statement is unnamed.
        let plan = if self.is_direct() && !self.mind_prepared(sql) {
            self.prepared.plan(sql, &types)
        } else {
            Plan::Unnamed
        };
        let statement = match plan {
            Plan::Kept(statement) => Some(statement),
            Plan::Prepare => match self.client.prepare_typed(sql, &types) {
                Ok(statement) => {
                    self.prepared.keep(sql, &types, statement.clone());
                    Some(statement)
                }
                Err(err) => {
                    self.prepared.forget(sql, &types);
                    return Err(Error::from_driver(err));
                }
            },
            Plan::Unnamed => None,
        };
        let kept = statement.is_some();
        let prepared = &mut self.prepared;
        let mut iter = match &statement {
            Some(statement) => self.client.query_raw(statement, params.iter()),
            // One unnamed statement, one round trip.
            None => self
                .client
                .query_typed_raw(sql, params.iter().zip(types.iter().cloned())),
        }
        .map_err(|err| {
            if kept {
                // The server refused the kept statement (dropped, or its result type
                // changed): prepare it again later.
                prepared.forget(sql, &types);
            }
            Error::from_driver(err)
        })?;
        let mut columns: Option<(Vec<Column>, Vec<Type>)> = None;
        let mut failed: Option<Error> = None;
        // Rows with OID-alias columns (`regclass`...) wait until their names are looked up.
        let mut waiting: Option<Vec<postgres::Row>> = None;
        // Rows without OID-alias columns need no names looked up.
        let no_names = RegNames::default();
        while let Some(row) = iter.next().map_err(Error::from_driver)? {
            if failed.is_some() {
                continue; // read the rest, so the session stays in step
            }
            let (cols, types) = columns.get_or_insert_with(|| {
                let types: Vec<Type> = row.columns().iter().map(|c| c.type_().clone()).collect();
                if types.iter().any(may_hold_reg) {
                    waiting = Some(Vec::new());
                }
                (
                    row.columns()
                        .iter()
                        .map(|c| Column::new(c.name(), c.type_()))
                        .collect(),
                    types,
                )
            });
            if let Some(rows) = waiting.as_mut() {
                rows.push(row);
                continue;
            }
            // Every type reads (NULL of any type is `Value::Null`); a value no decoder
            // reads fails on its own, naming its column.
            match read_row(&row, cols, types, &no_names)
                .and_then(|values| sink(cols, Row::new(values)))
            {
                Ok(()) => {}
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let affected = iter.rows_affected().unwrap_or(0);
        drop(iter);
        if let (Some(rows), Some((cols, types))) = (waiting, columns.as_ref()) {
            let names = self.reg_names(&rows, cols, types)?;
            let mut failed = None;
            for row in &rows {
                if failed.is_some() {
                    break;
                }
                if let Err(e) = read_row(row, cols, types, &names)
                    .and_then(|values| sink(cols, Row::new(values)))
                {
                    failed = Some(e);
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        let columns = match (columns, statement) {
            (Some((c, _)), _) => c,
            // No row came back: a kept statement was described when it was prepared.
            (None, Some(statement)) => statement
                .columns()
                .iter()
                .map(|c| Column::new(c.name(), c.type_()))
                .collect(),
            // Else describe the statement (no rows run) for its columns.
            (None, None) if may_return_rows(sql) => self.describe_columns(sql, params)?,
            (None, None) => Vec::new(),
        };
        Ok((columns, affected))
    }

    /// The names of the OID-alias values (`regclass`, `regtype`...) in `rows`, as the
    /// server prints them (the text psycopg reads): one more statement, run only when such
    /// values came back, one unnamed statement in one round trip that casts each OID to
    /// its type and to text (an OID without an object prints as its number).
    fn reg_names(
        &mut self,
        rows: &[postgres::Row],
        columns: &[Column],
        types: &[Type],
    ) -> Result<RegNames, Error> {
        let mut wanted = std::collections::BTreeSet::new();
        for row in rows {
            for (i, ty) in types.iter().enumerate() {
                let raw: Raw<'_> = row.try_get(i).map_err(Error::from_driver)?;
                reg_oids(ty, raw.0, &mut wanted).map_err(|reason| Error::Driver {
                    reason: format!(
                        "could not read column {} ({}): {reason}",
                        columns[i].name(),
                        ty.name()
                    ),
                })?;
            }
        }
        let mut names = RegNames::default();
        if wanted.is_empty() {
            return Ok(names);
        }
        let mut by_type: Vec<(u32, Vec<u32>)> = Vec::new();
        for (type_oid, oid) in wanted {
            match by_type.last_mut() {
                Some((t, oids)) if *t == type_oid => oids.push(oid),
                _ => by_type.push((type_oid, vec![oid])),
            }
        }
        let mut select = Vec::with_capacity(by_type.len());
        for (type_oid, oids) in &by_type {
            let name = Type::from_oid(*type_oid)
                .map_or_else(|| "oid".to_string(), |t| t.name().to_string());
            let list: Vec<String> = oids.iter().map(u32::to_string).collect();
            select.push(format!("'{{{}}}'::oid[]::{name}[]::text[]", list.join(",")));
        }
        let sql = format!("SELECT {}", select.join(", "));
        let found = self
            .client
            .query_typed(&sql, &[])
            .map_err(Error::from_driver)?;
        let row = found.first().ok_or_else(|| Error::Driver {
            reason: "the names of regclass (or other OID-alias) values did not come back"
                .to_string(),
        })?;
        for (i, (type_oid, oids)) in by_type.iter().enumerate() {
            let texts: Vec<Option<String>> = row.try_get(i).map_err(Error::from_driver)?;
            for (oid, text) in oids.iter().zip(texts) {
                if let Some(text) = text {
                    names.insert(*type_oid, *oid, text);
                }
            }
        }
        Ok(names)
    }

    /// The result columns of `sql`, described by the server without running it. The driver
    /// describes through a named statement, so it is prepared and closed inside one
    /// transaction (a short one of its own when none is open): behind a transaction pooler
    /// the name never outlives the server connection's transaction.
    fn describe_columns(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Column>, Error> {
        let types: Vec<Type> = params.iter().map(Value::declared_type).collect();
        let own = !self.in_transaction();
        if own {
            self.client
                .batch_execute("BEGIN")
                .map_err(Error::from_driver)?;
        }
        let described = self
            .client
            .prepare_typed(sql, &types)
            .map(|statement| {
                statement
                    .columns()
                    .iter()
                    .map(|c| Column::new(c.name(), c.type_()))
                    .collect()
            })
            .map_err(Error::from_driver);
        // The statement was dropped above: its Close goes out before the ROLLBACK.
        if own {
            let ended = self
                .client
                .batch_execute("ROLLBACK")
                .map_err(Error::from_driver);
            if let (Ok(_), Err(err)) = (&described, ended) {
                return Err(err);
            }
        }
        described
    }

    /// Runs `sql` (several statements, no parameters) as one simple-query message, one
    /// round trip, and returns each statement's rows, every value as text. When `opens` is true, `sql`
    /// starts with `BEGIN`: the transaction is tracked as open from there, and a failure
    /// after it leaves it aborted (roll it back).
    pub(crate) fn simple_rows(
        &mut self,
        sql: &str,
        opens: bool,
        statements: u32,
    ) -> Result<TextResults, Error> {
        self.usable()?;
        self.sendable(sql, &[])?;
        self.not_ended()?;
        if opens && !self.in_transaction() {
            self.serial = self.serial.wrapping_add(1);
        }
        let result = self.client.simple_query(sql).map_err(Error::from_driver);
        if let Err(e) = result {
            if e.is_connection_lost() || self.client.is_closed() {
                self.lost = Some(e.to_string());
                self.lost_in_tx = opens || self.in_transaction();
                self.tx = Tx::Idle;
                return Err(e);
            }
            // BEGIN ran (a failure in the message's first statement would leave nothing to
            // track, and these messages never fail there): the transaction is aborted.
            if opens || self.in_transaction() {
                self.tx = Tx::Open {
                    statements: statements.max(1),
                    failed: true,
                };
            }
            return Err(e);
        }
        let base = match (opens, self.tx) {
            (true, _) => 0,
            (false, Tx::Open { statements, .. }) => statements,
            (false, Tx::Idle) => 0,
        };
        if opens || self.in_transaction() {
            self.tx = Tx::Open {
                statements: base.saturating_add(statements),
                failed: false,
            };
        }
        let messages = result?;
        let mut out: TextResults = vec![Vec::new()];
        for m in messages {
            match m {
                SimpleQueryMessage::Row(row) => {
                    let values = (0..row.len())
                        .map(|i| row.get(i).map_or(Value::Null, Value::from))
                        .collect();
                    if let Some(last) = out.last_mut() {
                        last.push(values);
                    }
                }
                SimpleQueryMessage::CommandComplete(_) => out.push(Vec::new()),
                _ => {}
            }
        }
        out.pop();
        Ok(out)
    }

    fn track(&mut self, kind: Kind, err: Option<&Error>) {
        if let Some(e) = err {
            if matches!(e, Error::Forked { .. }) {
                return;
            }
            if e.is_connection_lost() || self.client.is_closed() {
                self.lost = Some(match e {
                    Error::Closed { reason } | Error::CommitOutcomeUnknown { reason } => {
                        reason.clone()
                    }
                    Error::SessionEnded { message, .. } => message.clone(),
                    other => other.to_string(),
                });
                self.lost_in_tx = self.in_transaction() && kind != Kind::End;
                self.tx = Tx::Idle;
                return;
            }
        }
        // Errors found before anything ran leave the server's transaction as it was.
        let failed_now = err.is_some_and(|e| {
            !matches!(
                e,
                Error::ParameterCount { .. }
                    | Error::Parameter { .. }
                    | Error::UnsupportedType { .. }
                    | Error::Unsendable { .. }
            )
        });
        if kind == Kind::Begin && self.tx == Tx::Idle && !failed_now {
            self.serial = self.serial.wrapping_add(1);
        }
        self.tx = match (kind, self.tx) {
            (Kind::Begin, Tx::Idle) if !failed_now => Tx::Open {
                statements: 0,
                failed: false,
            },
            (Kind::Begin, tx) => tx,
            (Kind::End, _) => Tx::Idle,
            (Kind::RollbackTo, Tx::Open { statements, .. }) => Tx::Open {
                statements: statements.saturating_add(1),
                failed: failed_now,
            },
            (_, Tx::Open { statements, failed }) => Tx::Open {
                statements: statements.saturating_add(1),
                failed: failed || failed_now,
            },
            (_, Tx::Idle) => Tx::Idle,
        };
    }
}

/// Reads one row's values with its columns' types.
fn read_row(
    row: &postgres::Row,
    columns: &[Column],
    types: &[Type],
    names: &RegNames,
) -> Result<Vec<Value>, Error> {
    let mut values = Vec::with_capacity(types.len());
    for (i, ty) in types.iter().enumerate() {
        let raw: Raw<'_> = row.try_get(i).map_err(Error::from_driver)?;
        let value = decode_named(ty, raw.0, names).map_err(|reason| match reason {
            None => Error::UnsupportedType {
                column: columns[i].name().to_string(),
                type_name: ty.name().to_string(),
            },
            Some(reason) => Error::Driver {
                reason: format!(
                    "could not read column {} ({}): {reason}",
                    columns[i].name(),
                    ty.name()
                ),
            },
        })?;
        values.push(value);
    }
    Ok(values)
}

/// Interpreters whose script, not themselves, names the program.
const INTERPRETERS: &[&str] = &[
    "python", "php", "perl", "ruby", "node", "bash", "sh", "dash", "zsh", "lua", "tclsh",
];

/// The `application_name` a session carries unless its address sets one: the program's
/// name, so that `pg_stat_activity` (and `writerlock pg holders`) tells a swarm's sessions
/// apart by script. It is the base name of the program (`argv[0]`), followed by the script's
/// base name when the program is an interpreter (`python3 swarm.py`, `php publish.php`),
/// cut to the 63 bytes Postgres keeps; `writerlock` when neither can be read.
pub fn default_application_name() -> String {
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    application_name_of(&args)
}

/// [`default_application_name`] for a given argument vector.
pub fn application_name_of(args: &[String]) -> String {
    let base = |a: &str| a.rsplit('/').next().unwrap_or(a).to_string();
    let Some(program) = args.first().map(|a| base(a)).filter(|p| !p.is_empty()) else {
        return "writerlock".to_string();
    };
    let interpreter = INTERPRETERS.iter().any(|i| {
        program
            .strip_prefix(i)
            .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
    });
    let script = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|_| interpreter)
        .map(|a| base(a));
    let mut name = match script {
        Some(script) => format!("{program} {script}"),
        None => program,
    };
    // Postgres keeps NAMEDATALEN - 1 = 63 bytes; cut on a character boundary.
    while name.len() > 63 {
        name.pop();
    }
    // Postgres accepts printable ASCII only here; anything else becomes '?'.
    name.chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect()
}

/// Whether a transaction-ending statement commits (`COMMIT`, `END`) rather than rolls back.
fn is_commit(sql: &str) -> bool {
    super::words::starts_with_any(sql, &["COMMIT", "END"])
}

/// Where this session's socket should be connected to, from what the server reported: over
/// TCP the client and server ports, over a Unix socket the address's socket files.
fn socket_peer(
    address: &Address,
    server_port: Option<i64>,
    client_port: Option<i64>,
) -> Option<Peer> {
    match (server_port, client_port) {
        (Some(server), Some(local)) => Some(Peer::Tcp {
            local: u16::try_from(local).ok()?,
            server: u16::try_from(server).ok()?,
        }),
        (None, _) => {
            let config = address.config();
            let ports = config.get_ports();
            let paths = config
                .get_hosts()
                .iter()
                .enumerate()
                .filter_map(|(i, h)| match h {
                    Host::Unix(dir) => {
                        let port = ports
                            .get(i)
                            .or_else(|| ports.first())
                            .copied()
                            .unwrap_or(5432);
                        Some(format!("{}/.s.PGSQL.{port}", dir.display()))
                    }
                    Host::Tcp(_) => None,
                })
                .collect();
            Some(Peer::Unix { paths })
        }
        _ => None,
    }
}

/// Whether the server sees the session come from another port, or another kind of socket,
/// than the one dialled: then a pooler or proxy sits in between.
fn proxied(address: &Address, server_port: Option<i64>) -> bool {
    match (dialled(address), server_port) {
        (None, _) => false,
        (Some(Some(_)), None) => true,
        (Some(Some(port)), Some(seen)) => i64::from(port) != seen,
        (Some(None), seen) => seen.is_some(),
    }
}

/// How this address dials the server: `Some(Some(port))` over TCP to one host (5432 when no
/// port is given), `Some(None)` through one Unix socket, `None` with several hosts.
fn dialled(address: &Address) -> Option<Option<u16>> {
    let config = address.config();
    match config.get_hosts() {
        [Host::Tcp(_)] => Some(Some(config.get_ports().first().copied().unwrap_or(5432))),
        [Host::Unix(_)] => Some(None),
        _ => None,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_application_name_is_the_program_or_its_script() {
        let v =
            |a: &[&str]| application_name_of(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            v(&["/usr/local/bin/writerlock", "pg", "holders"]),
            "writerlock"
        );
        assert_eq!(
            v(&["/usr/bin/python3", "-u", "/srv/swarm/worker.py", "7"]),
            "python3 worker.py"
        );
        assert_eq!(v(&["php8.2", "bin/publish.php"]), "php8.2 publish.php");
        assert_eq!(v(&["./ledger-import"]), "ledger-import");
        assert_eq!(v(&[]), "writerlock");
        assert_eq!(v(&["x".repeat(100).as_str()]).len(), 63);
    }
    use super::*;

    #[test]
    fn commit_statements() {
        assert!(is_commit("commit"));
        assert!(is_commit("  END;"));
        assert!(!is_commit("ROLLBACK"));
        assert!(!is_commit("commitx"));
    }

    #[test]
    fn a_lost_commit_is_unknown_and_an_idle_ending_is_a_rollback() {
        let unknown = commit_failure(Error::Closed {
            reason: "connection reset".into(),
        });
        assert!(matches!(unknown, Error::CommitOutcomeUnknown { .. }));
        let shutdown = commit_failure(Error::SessionEnded {
            code: SqlState::ADMIN_SHUTDOWN,
            message: "terminating connection due to administrator command".into(),
        });
        assert!(matches!(shutdown, Error::CommitOutcomeUnknown { .. }));
        let idle = commit_failure(Error::SessionEnded {
            code: SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
            message: "terminating connection due to idle-in-transaction timeout".into(),
        });
        assert!(matches!(idle, Error::SessionEnded { .. }));
    }

    #[test]
    fn classifies_transaction_control() {
        assert_eq!(classify("  begin"), Kind::Begin);
        assert_eq!(classify("START TRANSACTION"), Kind::Begin);
        assert_eq!(classify("commit;"), Kind::End);
        assert_eq!(classify("ROLLBACK"), Kind::End);
        assert_eq!(classify("rollback to savepoint a"), Kind::RollbackTo);
        assert_eq!(classify("SELECT 1"), Kind::Other);
        assert_eq!(classify(""), Kind::Other);
    }
}
