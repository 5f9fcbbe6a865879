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
//! own parameters.

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{FromSql, Type};
use postgres::{NoTls, SimpleQueryMessage};

use super::address::Address;
use super::error::{describe, Error};
use super::placeholder::{parameter_count, translate};
use super::settings::{verify_checks, Settings};
pub use super::settings::{SettingCheck, SettingStatus};
use super::value::{decode, readable, Column, Row, Rows, Value};

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

/// A session with the ledger database that carries the [`Settings`].
pub struct Connection {
    client: postgres::Client,
    settings: Settings,
    address: Address,
    pub(crate) tx: Tx,
    /// The refusal count at which this session last found no refused writer's lock (see
    /// `floor_check_sql_since`).
    pub(crate) refusals_clean: Option<i64>,
    lost: bool,
    pid: i32,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .field("pid", &self.pid)
            .field("tx", &self.tx)
            .field("lost", &self.lost)
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
    pub fn open(address: &Address, settings: &Settings, verify: bool) -> Result<Connection, Error> {
        settings.validate()?;
        let mut config = address.config().clone();
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
            .connect_timeout(settings.get_connect_timeout());
        let client = config.connect(NoTls).map_err(|err| Error::Connect {
            address: address.to_string(),
            reason: address.redact(&with_notes(describe(&err), address.notes())),
            code: err.code().cloned(),
        })?;
        let mut conn = Connection {
            client,
            settings: settings.clone(),
            address: address.clone(),
            tx: Tx::Idle,
            refusals_clean: None,
            lost: false,
            pid: 0,
        };
        let pid = conn.execute("SELECT pg_backend_pid()", &[])?;
        conn.pid = pid
            .first()
            .and_then(|r| r.get(0))
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(0);
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
        self.lost || self.client.is_closed()
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
        let sql = translate(sql);
        let kind = classify(&sql);
        let result = self.query(&sql, params);
        self.track(kind, result.as_ref().err());
        result
    }

    /// Runs a script of statements separated by `;`, without parameters (the simple query
    /// protocol), such as DDL.
    pub fn execute_batch(&mut self, sql: &str) -> Result<(), Error> {
        let result = self.simple(sql);
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
    pub fn commit(&mut self) -> Result<(), Error> {
        match self.tx {
            Tx::Idle => Ok(()),
            Tx::Open { failed: true, .. } => {
                self.rollback()?;
                Err(Error::RolledBack)
            }
            Tx::Open { .. } => {
                let result = self.simple("COMMIT");
                self.track(Kind::End, result.as_ref().err());
                result
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

    /// Closes the session (an open transaction rolls back on the server).
    pub fn close(self) -> Result<(), Error> {
        self.client.close().map_err(Error::from_driver)
    }

    fn lost_error(&self) -> Error {
        Error::Closed {
            reason: "an earlier error ended the session".to_string(),
        }
    }

    fn simple(&mut self, sql: &str) -> Result<(), Error> {
        if self.lost {
            return Err(self.lost_error());
        }
        self.client.batch_execute(sql).map_err(Error::from_driver)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Rows, Error> {
        if self.lost {
            return Err(self.lost_error());
        }
        // Counted here, before anything is sent, so a wrong count leaves the transaction as
        // it was.
        let expected = parameter_count(sql);
        if expected != params.len() {
            return Err(Error::ParameterCount {
                expected,
                given: params.len(),
            });
        }
        // One unnamed statement, one round trip: the parameters go in text format with no
        // declared type (the server infers each from the statement and converts the text),
        // except bytes, which go in binary as `bytea`.
        let typed = params.iter().map(|v| {
            let ty = match v {
                Value::Bytes(_) => Type::BYTEA,
                _ => Type::UNKNOWN,
            };
            (v, ty)
        });
        let mut iter = self
            .client
            .query_typed_raw(sql, typed)
            .map_err(Error::from_driver)?;
        let mut columns: Option<(Vec<Column>, Vec<Type>)> = None;
        let mut failed: Option<Error> = None;
        let mut rows = Vec::new();
        while let Some(row) = iter.next().map_err(Error::from_driver)? {
            if failed.is_some() {
                continue; // read the rest, so the session stays in step
            }
            let (cols, types) = columns.get_or_insert_with(|| {
                (
                    row.columns()
                        .iter()
                        .map(|c| Column::new(c.name(), c.type_()))
                        .collect(),
                    row.columns().iter().map(|c| c.type_().clone()).collect(),
                )
            });
            if let Some((c, ty)) = cols.iter().zip(types.iter()).find(|(_, t)| !readable(t)) {
                failed = Some(Error::UnsupportedType {
                    column: c.name().to_string(),
                    type_name: ty.name().to_string(),
                });
                continue;
            }
            match read_row(&row, cols, types) {
                Ok(values) => rows.push(Row::new(values)),
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let affected = iter.rows_affected().unwrap_or(0);
        let columns = columns.map(|(c, _)| c).unwrap_or_default();
        Ok(Rows::new(columns, rows, affected))
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
        if self.lost {
            return Err(self.lost_error());
        }
        let result = self.client.simple_query(sql).map_err(Error::from_driver);
        if let Err(e) = result {
            if e.is_connection_lost() || self.client.is_closed() {
                self.lost = true;
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
            if e.is_connection_lost() || self.client.is_closed() {
                self.lost = true;
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
            )
        });
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
fn read_row(row: &postgres::Row, columns: &[Column], types: &[Type]) -> Result<Vec<Value>, Error> {
    let mut values = Vec::with_capacity(types.len());
    for (i, ty) in types.iter().enumerate() {
        let raw: Raw<'_> = row.try_get(i).map_err(Error::from_driver)?;
        let value = decode(ty, raw.0).map_err(|reason| match reason {
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
