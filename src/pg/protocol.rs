//! The writer protocol without I/O: which statement to run next, and what each result means.
//!
//! This is the only implementation of the writer session. In the style of h11 or
//! quinn-proto, a [`Protocol`] never touches a connection. It hands out one [`Statement`] at
//! a time ([`Step::Run`]); the host runs it on whatever connection it has (this crate's own
//! [`Connection`](super::Connection), which drives it in [`writer`](super::writer), or
//! psycopg, PDO, libpq) and feeds the outcome back as a [`Reply`]: the rows, the server's
//! error (SQLSTATE and message), or a lost connection. The protocol answers with the next
//! step, until it ends with [`Step::Granted`] (a write transaction that holds the writer
//! lock, with the refused writers to name in alerts), [`Step::Done`] or [`Step::Failed`]
//! with the error to report.
//!
//! Every statement is plain SQL text without parameters (the values in it are the core's
//! constants, all in [`sql`](super::sql)), so a driver can send it as it is, through the
//! simple or the extended query protocol. A statement's [`StatementKind`] tells a driver
//! that manages transactions itself (psycopg outside autocommit, PDO) that it may answer
//! [`StatementKind::Begin`] without sending anything, because its next statement opens the
//! transaction, and run [`StatementKind::Rollback`] and [`StatementKind::Commit`] with its
//! own `rollback()` and `commit()`.
//!
//! The decisions are the ledger spec's:
//!
//! - a write's first statement is `SELECT pg_advisory_xact_lock(1279607879)`; a wait the
//!   server cancels through `lock_timeout` (SQLSTATE `55P03`, and only that) rolls back and
//!   asks again, three waits in all, then fails with `the ledger writer lock was not granted
//!   in 3 waits of 10 seconds`;
//! - under the lock, one statement reads the stored floor, the session's writer version and
//!   the refusal count; a writer below the floor takes the refusal lock (class 1280788050,
//!   object `version * 65536 + floor`, sub id 2), rolls back and fails with `LW001`, and a
//!   session that does not carry this writer's version is not granted;
//! - whether any refused writer's lock is held (a scan of `pg_locks`) is asked only when the
//!   refusal count is not the one at which the host last found none
//!   ([`Protocol::known_clean`], [`WriteStart::refusals_clean`]), and the refused writers
//!   are listed (a join over `pg_stat_activity`) only when one is there to name;
//! - schema setup takes the writer lock the same way, lifts the statement limit for its own
//!   transaction and stores the floor, never lowering it;
//! - ending a write commits it, or rolls back a transaction in which a statement failed and
//!   says nothing was committed.
//!
//! Every writer in the line pays each round trip made under the lock. A host that can send
//! several statements in one message uses [`Protocol::write_in_one_message`]: `BEGIN`, the
//! lock and the floor check travel together, so a write whose refusal count did not move
//! starts in one round trip.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use postgres::error::SqlState;

pub use super::alerts::read_refused_writers;
use super::alerts::{new_alerts, Alert, RefusedWriter};
use super::error::{commit_failure, parse_refusal, Error, REFUSED_SQLSTATE};
use super::floor::{owner_step, SchemaCheck};
#[cfg(test)]
use super::settings::{verify_checks, SettingStatus};
use super::settings::{Settings, VERSION_SETTING};
pub use super::sql::{
    floor_check_sql, floor_check_sql_without_scan, prepare_floor_check_sql, store_floor_sql,
    ANY_REFUSED_SQL, EXECUTE_FLOOR_CHECK_SQL, FLOOR_CHECK_STATEMENT, SETUP_LIMIT_SQL,
    WRITER_LOCK_SQL,
};
use super::sql::{
    refusal_lock_sql, refusal_lock_sql_if_direct, REFUSED_WRITERS_SQL, SCHEMA_CHECK_SQL, SCHEMA_SQL,
};
use super::value::Value;

/// Whether a failed writer lock wait is one the server cancelled through `lock_timeout`
/// (SQLSTATE `55P03`), the only failure that is rolled back and asked again.
pub fn is_cancelled_wait(code: &str) -> bool {
    code == SqlState::LOCK_NOT_AVAILABLE.code()
}

/// What the floor check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloorCheck {
    /// The stored floor (`None` when the database stores none).
    pub floor: Option<i64>,
    /// The session's writer version as the server sees it (`None` when unset, which the
    /// floor trigger counts as version 0).
    pub session_version: Option<i64>,
    /// Whether any refused writer's lock is held in this database (`true` when the check
    /// did not scan, see [`floor_check_sql_without_scan`], or the answer is doubtful).
    pub any_refused: bool,
    /// The refusal count (`None` on a database without the counter, or a doubtful
    /// answer): while it stays at a count where no refused writer was found, there is
    /// still none.
    pub refusals: Option<i64>,
}

impl FloorCheck {
    /// Reads the row of [`floor_check_sql`] or [`floor_check_sql_without_scan`]. Integers
    /// and booleans may come as numbers or as text (a
    /// driver that returns every column as text); a missing row or cell counts as no floor
    /// and an unknown refusal count, so the scan for refused writers is never skipped on a
    /// doubtful answer.
    pub fn read(rows: &[Vec<Value>]) -> FloorCheck {
        let row = rows.first();
        let cell = |n: usize| row.and_then(|r| r.get(n));
        FloorCheck {
            floor: cell(0).and_then(Value::read_i64),
            session_version: cell(1).and_then(version_of),
            any_refused: cell(2).and_then(Value::read_bool).unwrap_or(true),
            refusals: cell(3).and_then(Value::read_i64),
        }
    }

    /// The refusal for a writer of `version`: `Some((version, floor))` when it is below the
    /// stored floor.
    pub fn refusal(&self, version: i64) -> Option<(i64, i64)> {
        match self.floor {
            Some(floor) if version < floor => Some((version, floor)),
            _ => None,
        }
    }
}

/// A writer version as the floor trigger reads the session setting: digits (1 to 9 of
/// them, spaces around allowed), capped at 32767; anything else is version 0.
fn version_of(v: &Value) -> Option<i64> {
    let text = v.read_text()?;
    let t = text.trim();
    if !t.is_empty() && t.len() <= 9 && t.bytes().all(|b| b.is_ascii_digit()) {
        t.parse::<i64>().ok().map(|n| n.min(32_767))
    } else {
        Some(0)
    }
}

/// What a statement is for. Drivers that manage transactions themselves use it to map
/// `Begin`, `Rollback` and `Commit` to their own calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatementKind {
    /// `BEGIN`: opens the transaction. A driver that opens one by itself before its next
    /// statement may answer it without sending anything.
    Begin,
    /// `SELECT pg_advisory_xact_lock(1279607879)`: one wait for the writer lock.
    WriterLock,
    /// The floor check ([`floor_check_sql`], or [`floor_check_sql_without_scan`] when the
    /// host passed a clean refusal count with [`Protocol::known_clean`]).
    FloorCheck,
    /// A write's start as one message of several statements (see
    /// [`Protocol::write_in_one_message`]): `BEGIN` when no transaction is open, the writer
    /// lock, and the floor check (none for [`Protocol::lock_in_one_message`]). Reply with
    /// the rows of its last statement, the floor check; a cancelled lock wait is its error
    /// (the server skips the rest).
    StartWrite,
    /// The refusal lock ([`refusal_lock_sql`]).
    RefusalLock,
    /// Whether any refused writer's lock is held ([`ANY_REFUSED_SQL`], a scan of
    /// `pg_locks`): asked only of a host that passed a clean refusal count
    /// ([`Protocol::known_clean`]) when the floor check read another one, or `NULL`.
    AnyRefused,
    /// The refused writers still connected ([`REFUSED_WRITERS_SQL`]).
    RefusedWriters,
    /// `SET LOCAL statement_timeout = 0` for the schema setup.
    SetupLimit,
    /// The host's own schema script, run before the floor's.
    HostSchema,
    /// The catalog read that tells whether the floor's schema is current
    /// ([`SCHEMA_CHECK_SQL`]), in the set-up that runs once per address per process.
    SchemaCheck,
    /// The floor's schema ([`SCHEMA_SQL`], several statements).
    Schema,
    /// The statement that stores the floor ([`store_floor_sql`]).
    StoreFloor,
    /// `ROLLBACK`.
    Rollback,
    /// `COMMIT`.
    Commit,
}

impl StatementKind {
    /// A short lower-case name: `begin`, `writer_lock`, `floor_check`, `start_write`,
    /// `refusal_lock`, `any_refused`, `refused_writers`, `setup_limit`, `host_schema`,
    /// `schema_check`, `schema`, `store_floor`, `rollback`, `commit`.
    pub fn name(self) -> &'static str {
        match self {
            StatementKind::Begin => "begin",
            StatementKind::WriterLock => "writer_lock",
            StatementKind::FloorCheck => "floor_check",
            StatementKind::StartWrite => "start_write",
            StatementKind::RefusalLock => "refusal_lock",
            StatementKind::AnyRefused => "any_refused",
            StatementKind::RefusedWriters => "refused_writers",
            StatementKind::SetupLimit => "setup_limit",
            StatementKind::HostSchema => "host_schema",
            StatementKind::SchemaCheck => "schema_check",
            StatementKind::Schema => "schema",
            StatementKind::StoreFloor => "store_floor",
            StatementKind::Rollback => "rollback",
            StatementKind::Commit => "commit",
        }
    }
}

/// One statement to run: plain SQL text without parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    kind: StatementKind,
    sql: Cow<'static, str>,
}

impl Statement {
    fn new(kind: StatementKind, sql: impl Into<Cow<'static, str>>) -> Statement {
        Statement {
            kind,
            sql: sql.into(),
        }
    }

    /// What the statement is for.
    pub fn kind(&self) -> StatementKind {
        self.kind
    }

    /// Its SQL text (no parameters; [`StatementKind::Schema`],
    /// [`StatementKind::HostSchema`] and [`StatementKind::StartWrite`] may hold several
    /// statements).
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// Whether running it opens a transaction: [`StatementKind::Begin`], and a
    /// [`StatementKind::StartWrite`] that starts with `BEGIN` (sent when no transaction was
    /// open). A host that tracks its connection's transaction counts it open from here.
    pub fn opens_transaction(&self) -> bool {
        match self.kind {
            StatementKind::Begin => true,
            StatementKind::StartWrite => self.sql.starts_with("BEGIN;"),
            _ => false,
        }
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sql)
    }
}

/// A server error as a driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    /// The SQLSTATE, such as `55P03`.
    pub code: String,
    /// The server's primary message.
    pub message: String,
    /// The server's detail, if any.
    pub detail: Option<String>,
    /// The server's hint, if any.
    pub hint: Option<String>,
    /// Whether the server ended the session with it (severity `FATAL` or `PANIC`).
    pub fatal: bool,
}

impl ServerError {
    /// A server error with this SQLSTATE and message (not fatal, no detail or hint).
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ServerError {
        ServerError {
            code: code.into(),
            message: message.into(),
            detail: None,
            hint: None,
            fatal: false,
        }
    }

    /// This crate's error for it: a floor refusal raised by the trigger is
    /// [`Error::Refused`], a fatal one [`Error::SessionEnded`], any other
    /// [`Error::Database`].
    pub fn into_error(self) -> Error {
        let code = SqlState::from_code(&self.code);
        if self.code == REFUSED_SQLSTATE {
            if let Some((version, floor)) = parse_refusal(&self.message) {
                return Error::Refused { version, floor };
            }
        }
        if self.fatal {
            return Error::SessionEnded {
                code,
                message: self.message,
            };
        }
        Error::Database {
            code,
            message: self.message,
            detail: self.detail,
            hint: self.hint,
        }
    }
}

/// What came of a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// It ran; these are its rows (none for a statement without a result).
    Rows(Vec<Vec<Value>>),
    /// The server refused it.
    Failed(ServerError),
    /// The connection is gone (closed, or lost without an answer from the server).
    Lost {
        /// What the driver said.
        reason: String,
    },
}

impl Reply {
    /// A statement that ran and returned no rows.
    pub fn ok() -> Reply {
        Reply::Rows(Vec::new())
    }
}

/// What the writer learned while it started: the waits it took, the stored floor, the
/// refused writers still connected, and the refusal count at which it found none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteStart {
    pub(crate) waits: u32,
    pub(crate) floor: Option<i64>,
    pub(crate) refused: Vec<RefusedWriter>,
    pub(crate) refusals_clean: Option<i64>,
}

impl WriteStart {
    /// How many waits for the writer lock it took (1 when granted on the first).
    pub fn waits(&self) -> u32 {
        self.waits
    }

    /// The stored floor (`None` when the database stores none).
    pub fn floor(&self) -> Option<i64> {
        self.floor
    }

    /// The refused writers still connected to this database.
    pub fn refused(&self) -> &[RefusedWriter] {
        &self.refused
    }

    /// The refusal count at which this write found no refused writer's lock held (`None`
    /// when it found one, or the database has no counter). Keep it and hand it to the next
    /// write on the same database with [`Protocol::known_clean`]: while the count stays,
    /// that write skips the scan of `pg_locks`.
    pub fn refusals_clean(&self) -> Option<i64> {
        self.refusals_clean
    }

    /// The writer alerts to raise on the ledger being written, given that ledger's current
    /// alerts (see [`new_alerts`]).
    pub fn alerts(&self, existing: &[Alert]) -> Vec<String> {
        new_alerts(&self.refused, existing)
    }
}

/// The next thing for the host to do.
#[derive(Debug)]
pub enum Step {
    /// Run this statement and feed its outcome to [`Protocol::feed`].
    Run(Statement),
    /// The write transaction is open and holds the writer lock: run the write's statements,
    /// then end it with [`Protocol::end`].
    Granted(WriteStart),
    /// Finished: the schema setup or the write's end committed, or a rollback asked for
    /// with [`Protocol::end`] ran.
    Done,
    /// Finished with this error; the transaction is no longer open (rolled back, or the
    /// session is gone).
    Failed(Error),
}

/// Where a host's connection stands when a write or setup starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxState {
    /// No transaction is open.
    Idle,
    /// A transaction is open but has run no statement: the writer lock can still be its
    /// first.
    OpenUnused,
    /// A transaction is open and has run a statement (or failed one).
    OpenUsed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Goal {
    Write,
    Lock,
    Setup { extra: Option<String> },
    Ensure,
    End { commit: bool },
}

#[derive(Debug)]
enum State {
    /// Waiting for the reply to this statement.
    Sent(StatementKind),
    /// Waiting for the reply to a rollback, after which the protocol fails with this error,
    /// or (`None`) asks for the writer lock again.
    RollingBack(Option<Error>),
    /// Finished.
    Finished,
}

/// The writer protocol for one write, schema setup or end of a write; see the module
/// documentation.
#[derive(Debug)]
pub struct Protocol {
    goal: Goal,
    version: i64,
    required: u16,
    tries: u32,
    wait: std::time::Duration,
    attempt: u32,
    check: Option<FloorCheck>,
    state: State,
    first: Option<Step>,
    one_message: bool,
    /// How the host dialled the server: `Some(Some(port))` over TCP, `Some(None)` over a
    /// Unix socket, `None` when it cannot tell.
    dialled: Option<Option<u16>>,
    /// Whether the floor was stored in this set-up's transaction.
    stored: bool,
    /// Whether the set-up committed with the floor stored.
    set_up: bool,
    /// The refusal count at which the host last found no refused writer's lock held.
    known_clean: Option<i64>,
    /// Whether the host's session has the floor check prepared (see
    /// [`Protocol::floor_check_prepared`]).
    floor_prepared: bool,
}

impl Protocol {
    /// Tells the protocol how the host dialled the server: TCP `port`, or `None` for a Unix
    /// socket. A writer refused below the floor then takes its refusal lock only where the
    /// server sees it come in that way, never through a pooler (see
    /// [`refusal_lock_sql_if_direct`]).
    pub fn dialled(mut self, port: Option<u16>) -> Protocol {
        self.dialled = Some(port);
        self
    }

    /// Tells a write the refusal count at which the host last found no refused writer's
    /// lock held on this database ([`WriteStart::refusals_clean`] of an earlier write;
    /// `None`: not known). When the floor check reads the same count, no refused writer
    /// can have been added since (every refusal counts itself after taking its lock, and
    /// the count is read under the writer lock), so the write skips the scan of `pg_locks`
    /// ([`StatementKind::AnyRefused`]); when the count moved, or is `NULL`, it scans.
    ///
    /// Without a known count the floor check scans in the same statement, as on a host's
    /// first write.
    pub fn known_clean(mut self, count: Option<i64>) -> Protocol {
        if self.known_clean == count {
            return self;
        }
        self.known_clean = count;
        self.rewrite_first_start();
        self
    }

    /// Tells a write that the host's session has [`prepare_floor_check_sql`] in effect: a
    /// write that knows a clean refusal count ([`Protocol::known_clean`]) then runs its
    /// floor check as [`EXECUTE_FLOOR_CHECK_SQL`] in its first message, and the server
    /// does not parse and plan it again while every other writer waits for the lock. The
    /// same four columns come back. Only for a session that talks to the server directly:
    /// behind a pooler the next transaction may meet a server connection without it.
    pub fn floor_check_prepared(mut self, prepared: bool) -> Protocol {
        if self.floor_prepared == prepared {
            return self;
        }
        self.floor_prepared = prepared;
        self.rewrite_first_start();
        self
    }

    /// Writes a start already handed out in one message again (it carries the floor check).
    fn rewrite_first_start(&mut self) {
        if let Some(Step::Run(first)) = &self.first {
            if first.kind() == StatementKind::StartWrite {
                let begin = first.opens_transaction();
                self.attempt -= 1;
                let again = self.start_write(begin);
                self.first = Some(again);
            }
        }
    }

    /// The floor check this write runs: without the scan when the host knows a clean count.
    fn floor_check(&self) -> &'static str {
        match self.known_clean {
            Some(_) => floor_check_sql_without_scan(),
            None => floor_check_sql(),
        }
    }

    fn new(goal: Goal, settings: &Settings, tx: TxState) -> Protocol {
        Protocol::with(goal, settings, tx, false)
    }

    fn with(goal: Goal, settings: &Settings, tx: TxState, one_message: bool) -> Protocol {
        let mut p = Protocol {
            goal,
            version: i64::from(settings.get_version()),
            required: settings.get_required(),
            tries: settings.get_lock_tries().max(1),
            wait: settings.get_lock_wait(),
            attempt: 0,
            check: None,
            state: State::Finished,
            first: None,
            one_message,
            dialled: None,
            stored: false,
            set_up: false,
            known_clean: None,
            floor_prepared: false,
        };
        let first = match tx {
            TxState::OpenUsed => p.fail(Error::AlreadyInTransaction),
            TxState::OpenUnused if one_message => p.start_write(false),
            TxState::Idle if one_message => p.start_write(true),
            TxState::OpenUnused => p.ask_lock(),
            TxState::Idle => p.run(StatementKind::Begin, "BEGIN"),
        };
        p.first = Some(first);
        p
    }

    /// A write: the writer lock with its waits, the floor check, and the refused writers,
    /// for a writer with `settings` (its version, lock tries and lock wait) on a connection
    /// in state `tx`. Ends with [`Step::Granted`] or [`Step::Failed`].
    pub fn write(settings: &Settings, tx: TxState) -> Protocol {
        Protocol::new(Goal::Write, settings, tx)
    }

    /// The same write with fewer round trips under the lock, for a host that can send
    /// several statements in one message (the simple query protocol) and read the last
    /// one's rows: each attempt is one [`StatementKind::StartWrite`], `BEGIN` (when no
    /// transaction is open), the writer lock and the floor check together. The lock stays
    /// the transaction's first statement. A host whose driver opens transactions by itself
    /// passes [`TxState::OpenUnused`] once the driver has done so.
    pub fn write_in_one_message(settings: &Settings, tx: TxState) -> Protocol {
        Protocol::with(Goal::Write, settings, tx, true)
    }

    /// The writer lock alone, with its waits, as the first statement of a transaction (no
    /// floor check): for a host that holds the lock to make others wait. Ends with
    /// [`Step::Granted`] (only [`WriteStart::waits`] is filled in) or [`Step::Failed`].
    pub fn lock(settings: &Settings, tx: TxState) -> Protocol {
        Protocol::new(Goal::Lock, settings, tx)
    }

    /// The writer lock alone like [`Protocol::lock`], each attempt one
    /// [`StatementKind::StartWrite`] of `BEGIN` (when no transaction is open) and the lock.
    pub fn lock_in_one_message(settings: &Settings, tx: TxState) -> Protocol {
        Protocol::with(Goal::Lock, settings, tx, true)
    }

    /// The schema setup: the writer lock with its waits, `SET LOCAL statement_timeout = 0`,
    /// the host's `extra_sql` if any, the floor's schema, the stored floor raised to
    /// `settings`' required floor, and `COMMIT`. Ends with [`Step::Done`] or
    /// [`Step::Failed`].
    pub fn setup(settings: &Settings, extra_sql: Option<&str>, tx: TxState) -> Protocol {
        let extra = extra_sql
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string);
        Protocol::new(Goal::Setup { extra }, settings, tx)
    }

    /// The set-up that runs once per address per process, before the first write: the
    /// writer lock with its waits, `SET LOCAL statement_timeout = 0`, the catalog read
    /// ([`SCHEMA_CHECK_SQL`]), the floor's schema only when something is missing or not
    /// current, the stored floor raised to `settings`' required floor, and `COMMIT`. A
    /// writer role with data grants only passes it once the owner ran [`Protocol::setup`].
    /// On a read-only server with a current schema it stores nothing and ends with
    /// [`Step::Done`] without [`Protocol::set_up`]: the write's own statement then says what
    /// fails, and the next write tries the set-up again.
    pub fn ensure(settings: &Settings, tx: TxState) -> Protocol {
        Protocol::new(Goal::Ensure, settings, tx)
    }

    /// Whether a set-up ([`Protocol::setup`], [`Protocol::ensure`]) finished with the floor
    /// stored and committed; record the address as set up only then.
    pub fn set_up(&self) -> bool {
        self.set_up
    }

    /// The end of a granted write: `COMMIT` when `commit` is true and no statement of the
    /// transaction failed, else `ROLLBACK`. A commit asked for after a failed statement rolls
    /// back and fails with [`Error::RolledBack`] (nothing was committed). Ends with
    /// [`Step::Done`] or [`Step::Failed`].
    pub fn end(commit: bool, statement_failed: bool) -> Protocol {
        let mut p = Protocol::new(Goal::End { commit }, &Settings::new(), TxState::OpenUsed);
        let first = if commit && !statement_failed {
            p.run(StatementKind::Commit, "COMMIT")
        } else if commit {
            p.roll_back_then(Some(Error::RolledBack))
        } else {
            p.run(StatementKind::Rollback, "ROLLBACK")
        };
        p.first = Some(first);
        p
    }

    /// The first step. Asked again, or after a reply was fed, it fails with a driver error.
    pub fn start(&mut self) -> Step {
        self.first.take().unwrap_or_else(|| {
            Step::Failed(Error::Driver {
                reason: "the writer protocol was started twice".to_string(),
            })
        })
    }

    /// Whether the protocol has finished.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Finished)
    }

    /// Feeds the outcome of the statement last handed out and returns the next step. After
    /// the protocol finished, it keeps answering [`Step::Failed`] with a driver error.
    pub fn feed(&mut self, reply: Reply) -> Step {
        self.first = None;
        let state = std::mem::replace(&mut self.state, State::Finished);
        match state {
            State::Finished => Step::Failed(Error::Driver {
                reason: "the writer protocol was fed a reply after it had finished".to_string(),
            }),
            State::RollingBack(then) => match reply {
                Reply::Rows(_) => match then {
                    Some(err) => self.fail(err),
                    None => self.retry_lock(),
                },
                // The rollback failed: the session is in doubt; report the first failure if
                // there was one, else the rollback's own.
                Reply::Failed(server) => self.fail(then.unwrap_or_else(|| server.into_error())),
                Reply::Lost { reason } => self.fail(then.unwrap_or(Error::Closed { reason })),
            },
            State::Sent(kind) => self.after(kind, reply),
        }
    }

    fn after(&mut self, kind: StatementKind, reply: Reply) -> Step {
        let rows = match reply {
            Reply::Rows(rows) => rows,
            Reply::Lost { reason } => {
                return self.fail(match kind {
                    StatementKind::Commit => Error::CommitOutcomeUnknown { reason },
                    _ => Error::Closed { reason },
                })
            }
            Reply::Failed(server) => return self.after_failure(kind, server),
        };
        match kind {
            StatementKind::Begin => self.ask_lock(),
            StatementKind::WriterLock => match &self.goal {
                Goal::Write => {
                    let sql = self.floor_check();
                    self.run(StatementKind::FloorCheck, sql)
                }
                Goal::Lock => self.grant(Vec::new(), None),
                _ => self.run(StatementKind::SetupLimit, SETUP_LIMIT_SQL),
            },
            StatementKind::StartWrite if self.goal == Goal::Lock => self.grant(Vec::new(), None),
            StatementKind::FloorCheck | StatementKind::StartWrite => {
                let check = FloorCheck::read(&rows);
                self.check = Some(check);
                if let Some((version, floor)) = check.refusal(self.version) {
                    let refused = Error::Refused { version, floor };
                    let sql = match self.dialled {
                        Some(port) => refusal_lock_sql_if_direct(version, floor, port),
                        None => refusal_lock_sql(version, floor),
                    };
                    match sql {
                        Some(sql) => self.run(StatementKind::RefusalLock, sql),
                        None => self.roll_back_then(Some(refused)),
                    }
                } else if check.session_version != Some(self.version) {
                    // The session does not carry this writer's version, so the floor trigger
                    // would judge its writes by another one.
                    let actual = check
                        .session_version
                        .map_or_else(|| "unset".to_string(), |v| v.to_string());
                    self.roll_back_then(Some(Error::SettingNotInEffect {
                        setting: VERSION_SETTING.to_string(),
                        expected: self.version.to_string(),
                        actual,
                    }))
                } else if self.known_clean.is_none() {
                    // The floor check scanned.
                    if check.any_refused {
                        self.run(StatementKind::RefusedWriters, REFUSED_WRITERS_SQL)
                    } else {
                        self.grant(Vec::new(), check.refusals)
                    }
                } else if check.refusals.is_some() && check.refusals == self.known_clean {
                    // No refusal since the host last found none: nothing to scan for.
                    self.grant(Vec::new(), check.refusals)
                } else {
                    self.run(StatementKind::AnyRefused, ANY_REFUSED_SQL)
                }
            }
            StatementKind::RefusalLock => self.roll_back_refused(),
            StatementKind::AnyRefused => {
                let any = rows
                    .first()
                    .and_then(|r| r.first())
                    .and_then(Value::read_bool)
                    .unwrap_or(true);
                if any {
                    self.run(StatementKind::RefusedWriters, REFUSED_WRITERS_SQL)
                } else {
                    let count = self.check.and_then(|c| c.refusals);
                    self.grant(Vec::new(), count)
                }
            }
            StatementKind::RefusedWriters => {
                let refused = read_refused_writers(&rows);
                // None left to name (the refused sessions closed): clean at this count.
                let clean = if refused.is_empty() {
                    self.check.and_then(|c| c.refusals)
                } else {
                    None
                };
                self.grant(refused, clean)
            }
            StatementKind::SetupLimit => match &self.goal {
                Goal::Setup { extra: Some(extra) } => {
                    let extra = extra.clone();
                    self.run(StatementKind::HostSchema, extra)
                }
                Goal::Ensure => self.run(StatementKind::SchemaCheck, SCHEMA_CHECK_SQL),
                _ => self.run(StatementKind::Schema, SCHEMA_SQL),
            },
            StatementKind::HostSchema => self.run(StatementKind::Schema, SCHEMA_SQL),
            StatementKind::SchemaCheck => {
                let check = SchemaCheck::read(&rows);
                if check.needs_ddl() {
                    self.run(StatementKind::Schema, SCHEMA_SQL)
                } else if check.stores_floor() {
                    self.run(StatementKind::StoreFloor, store_floor_sql(self.required))
                } else {
                    self.run(StatementKind::Commit, "COMMIT")
                }
            }
            StatementKind::Schema => {
                self.run(StatementKind::StoreFloor, store_floor_sql(self.required))
            }
            StatementKind::StoreFloor => {
                self.stored = true;
                self.run(StatementKind::Commit, "COMMIT")
            }
            StatementKind::Commit | StatementKind::Rollback => {
                self.set_up = self.stored && kind == StatementKind::Commit;
                self.state = State::Finished;
                Step::Done
            }
        }
    }

    fn after_failure(&mut self, kind: StatementKind, server: ServerError) -> Step {
        if server.fatal {
            // A session the server ended while COMMIT was in flight may have committed.
            let err = server.into_error();
            return self.fail(if kind == StatementKind::Commit {
                commit_failure(err)
            } else {
                err
            });
        }
        match kind {
            StatementKind::WriterLock | StatementKind::StartWrite
                if is_cancelled_wait(&server.code) =>
            {
                self.roll_back_then(None)
            }
            // The refusal stands even if its lock could not be taken (no alert then).
            StatementKind::RefusalLock => self.roll_back_refused(),
            // A failed COMMIT or ROLLBACK ends the transaction on the server.
            StatementKind::Commit | StatementKind::Rollback => self.fail(server.into_error()),
            StatementKind::Begin => self.fail(server.into_error()),
            StatementKind::Schema if self.goal == Goal::Ensure => {
                self.roll_back_then(Some(owner_step(server.into_error())))
            }
            _ => self.roll_back_then(Some(server.into_error())),
        }
    }

    fn roll_back_refused(&mut self) -> Step {
        let refused = self
            .check
            .and_then(|c| c.refusal(self.version))
            .map(|(version, floor)| Error::Refused { version, floor });
        self.roll_back_then(refused)
    }

    fn run(&mut self, kind: StatementKind, sql: impl Into<Cow<'static, str>>) -> Step {
        self.state = State::Sent(kind);
        Step::Run(Statement::new(kind, sql))
    }

    fn start_write(&mut self, begin: bool) -> Step {
        self.attempt += 1;
        // The floor check as in `floor_check`: without the scan when a clean count is known,
        // then prepared when the host's session has it.
        let check = if self.goal == Goal::Lock {
            0
        } else if self.known_clean.is_none() {
            1
        } else if self.floor_prepared {
            3
        } else {
            2
        };
        self.run(StatementKind::StartWrite, start_write_sql(begin, check))
    }

    fn ask_lock(&mut self) -> Step {
        self.attempt += 1;
        self.run(StatementKind::WriterLock, WRITER_LOCK_SQL)
    }

    fn retry_lock(&mut self) -> Step {
        if self.attempt >= self.tries {
            return self.fail(Error::LockNotGranted {
                tries: self.tries,
                wait: self.wait,
            });
        }
        if self.one_message {
            return self.start_write(true);
        }
        self.run(StatementKind::Begin, "BEGIN")
    }

    fn roll_back_then(&mut self, then: Option<Error>) -> Step {
        self.state = State::RollingBack(then);
        Step::Run(Statement::new(StatementKind::Rollback, "ROLLBACK"))
    }

    fn grant(&mut self, refused: Vec<RefusedWriter>, refusals_clean: Option<i64>) -> Step {
        self.state = State::Finished;
        Step::Granted(WriteStart {
            waits: self.attempt,
            floor: self.check.and_then(|c| c.floor),
            refused,
            refusals_clean,
        })
    }

    fn fail(&mut self, err: Error) -> Step {
        self.state = State::Finished;
        Step::Failed(err)
    }
}

/// A write's start as one message: `BEGIN` (when `begin`), the writer lock, and then
/// `check`: 0 nothing, 1 [`floor_check_sql`], 2 [`floor_check_sql_without_scan`], 3
/// [`EXECUTE_FLOOR_CHECK_SQL`]. Each of the eight texts is made once per process, not per
/// write.
fn start_write_sql(begin: bool, check: usize) -> &'static str {
    static TEXTS: LazyLock<[[String; 4]; 2]> = LazyLock::new(|| {
        let text = |begin: bool, check: Option<&str>| {
            let mut sql = String::new();
            if begin {
                sql.push_str("BEGIN; ");
            }
            sql.push_str(WRITER_LOCK_SQL);
            if let Some(check) = check {
                sql.push_str("; ");
                sql.push_str(check);
            }
            sql
        };
        let checks = [
            None,
            Some(floor_check_sql()),
            Some(floor_check_sql_without_scan()),
            Some(EXECUTE_FLOOR_CHECK_SQL),
        ];
        [false, true].map(|begin| checks.map(|check| text(begin, check)))
    });
    &TEXTS[usize::from(begin)][check.min(3)]
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pg::alerts::UNSEEN_CLIENT;

    /// Drives `p` with scripted replies; returns the kinds of the statements it asked for
    /// and its last step.
    fn drive(mut p: Protocol, replies: Vec<Reply>) -> (Vec<StatementKind>, Step) {
        let mut kinds = Vec::new();
        let mut step = p.start();
        let mut replies = replies.into_iter();
        while let Step::Run(stmt) = &step {
            kinds.push(stmt.kind());
            let reply = replies
                .next()
                .unwrap_or_else(|| panic!("no scripted reply for {stmt}"));
            step = p.feed(reply);
        }
        assert!(
            replies.next().is_none(),
            "unused replies; ended with {step:?}"
        );
        assert!(p.is_finished());
        (kinds, step)
    }

    /// The floor check's row: the floor, the session's version, no refused writer's lock
    /// held (when the check scanned) and the refusal count.
    fn check_row(floor: Option<i64>, version: &str, refusals: Option<i64>) -> Reply {
        Reply::Rows(vec![vec![
            floor.map_or(Value::Null, Value::Int),
            Value::Text(version.to_string()),
            Value::Bool(false),
            refusals.map_or(Value::Null, Value::Int),
        ]])
    }

    /// The floor check's row of a check that scanned and found a refused writer's lock.
    fn check_row_held(floor: Option<i64>, refusals: Option<i64>) -> Reply {
        Reply::Rows(vec![vec![
            floor.map_or(Value::Null, Value::Int),
            Value::Text("1".into()),
            Value::Bool(true),
            refusals.map_or(Value::Null, Value::Int),
        ]])
    }

    /// The scan's answer: whether a refused writer's lock is held.
    fn any_refused(any: bool) -> Reply {
        Reply::Rows(vec![vec![Value::Bool(any)]])
    }

    /// A write whose host last found no refused writer at refusal count 7.
    fn clean_write(tx: TxState) -> Protocol {
        Protocol::write(&Settings::new(), tx).known_clean(Some(7))
    }

    fn cancelled() -> Reply {
        Reply::Failed(ServerError::new(
            "55P03",
            "canceling statement due to lock timeout",
        ))
    }

    use StatementKind::{
        AnyRefused, Begin, Commit, HostSchema, RefusalLock, RefusedWriters, Rollback, Schema,
        SetupLimit, StoreFloor, WriterLock,
    };
    const FLOOR: StatementKind = StatementKind::FloorCheck;

    #[test]
    fn granted_at_once_without_refused_writers() {
        let mut first = Protocol::write(&Settings::new(), TxState::Idle);
        match first.start() {
            Step::Run(s) => assert_eq!((s.kind(), s.sql()), (Begin, "BEGIN")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(first.start(), Step::Failed(Error::Driver { .. })));
        let (kinds, step) = drive(
            clean_write(TxState::Idle),
            vec![
                Reply::ok(),
                Reply::Rows(vec![vec![Value::Null]]),
                check_row(Some(1), "1", Some(7)),
            ],
        );
        assert_eq!(kinds, [Begin, WriterLock, FLOOR]);
        let Step::Granted(start) = step else {
            panic!("{step:?}")
        };
        assert_eq!((start.waits(), start.floor()), (1, Some(1)));
        assert!(start.refused().is_empty());
        assert_eq!(start.refusals_clean(), Some(7));
    }

    #[test]
    fn writer_lock_statement_is_the_specs() {
        let mut p = Protocol::write(&Settings::new(), TxState::Idle);
        let Step::Run(lock) = p.feed(Reply::ok()) else {
            panic!()
        };
        assert_eq!(lock.sql(), "SELECT pg_advisory_xact_lock(1279607879)");
        assert_eq!(lock.kind(), WriterLock);
        // An open transaction that ran nothing yet takes the lock as its first statement.
        let mut p = Protocol::write(&Settings::new(), TxState::OpenUnused);
        assert!(matches!(p.start(), Step::Run(s) if s.kind() == WriterLock));
    }

    #[test]
    fn three_cancelled_waits_then_not_granted_with_the_specs_text() {
        let p = Protocol::write(&Settings::new(), TxState::Idle);
        let mut replies = Vec::new();
        for _ in 0..3 {
            replies.extend([Reply::ok(), cancelled(), Reply::ok()]);
        }
        let (kinds, step) = drive(p, replies);
        assert_eq!(
            kinds,
            [
                Begin, WriterLock, Rollback, Begin, WriterLock, Rollback, Begin, WriterLock,
                Rollback
            ]
        );
        let Step::Failed(err) = step else {
            panic!("{step:?}")
        };
        assert_eq!(
            err.to_string(),
            "the ledger writer lock was not granted in 3 waits of 10 seconds"
        );
        assert!(matches!(err, Error::LockNotGranted { tries: 3, .. }));
    }

    #[test]
    fn granted_on_the_second_wait_counts_two() {
        let p = clean_write(TxState::Idle);
        let (kinds, step) = drive(
            p,
            vec![
                Reply::ok(),
                cancelled(),
                Reply::ok(),
                Reply::ok(),
                Reply::ok(),
                check_row(None, "1", Some(7)),
            ],
        );
        assert_eq!(
            kinds,
            [Begin, WriterLock, Rollback, Begin, WriterLock, FLOOR]
        );
        assert!(matches!(step, Step::Granted(s) if s.waits() == 2 && s.floor().is_none()));
    }

    #[test]
    fn configured_tries_and_wait_shape_the_message() {
        let mut s = Settings::new();
        s.lock_tries(1).lock_wait(Duration::from_millis(1500));
        let (kinds, step) = drive(
            Protocol::write(&s, TxState::Idle),
            vec![Reply::ok(), cancelled(), Reply::ok()],
        );
        assert_eq!(kinds, [Begin, WriterLock, Rollback]);
        let Step::Failed(err) = step else { panic!() };
        assert_eq!(
            err.to_string(),
            "the ledger writer lock was not granted in 1 waits of 1.5 seconds"
        );
    }

    #[test]
    fn other_lock_errors_roll_back_and_are_reported_as_they_are() {
        let (kinds, step) = drive(
            Protocol::write(&Settings::new(), TxState::Idle),
            vec![
                Reply::ok(),
                Reply::Failed(ServerError::new(
                    "57014",
                    "canceling statement due to statement timeout",
                )),
                Reply::ok(),
            ],
        );
        assert_eq!(kinds, [Begin, WriterLock, Rollback]);
        let Step::Failed(err) = step else { panic!() };
        assert_eq!(err.code().map(|c| c.code()), Some("57014"));
        assert_eq!(
            err.to_string(),
            "canceling statement due to statement timeout"
        );
    }

    #[test]
    fn a_fatal_error_or_a_lost_connection_ends_without_a_rollback() {
        let mut fatal = ServerError::new(
            "25P03",
            "terminating connection due to idle-in-transaction timeout",
        );
        fatal.fatal = true;
        let (kinds, step) = drive(
            Protocol::write(&Settings::new(), TxState::Idle),
            vec![Reply::ok(), Reply::Failed(fatal)],
        );
        assert_eq!(kinds, [Begin, WriterLock]);
        assert!(matches!(step, Step::Failed(Error::SessionEnded { .. })));
        let (_, step) = drive(
            Protocol::write(&Settings::new(), TxState::Idle),
            vec![
                Reply::ok(),
                Reply::ok(),
                Reply::Lost {
                    reason: "server closed the connection".into(),
                },
            ],
        );
        assert!(matches!(step, Step::Failed(Error::Closed { .. })));
    }

    #[test]
    fn below_the_floor_takes_the_refusal_lock_rolls_back_and_refuses() {
        let (kinds, step) = drive(
            Protocol::write(&Settings::new(), TxState::Idle),
            vec![
                Reply::ok(),
                Reply::ok(),
                check_row(Some(2), "1", Some(7)),
                Reply::Rows(vec![vec![Value::Bool(true)]]),
                Reply::ok(),
            ],
        );
        assert_eq!(kinds, [Begin, WriterLock, FLOOR, RefusalLock, Rollback]);
        let Step::Failed(err) = step else { panic!() };
        assert!(matches!(
            err,
            Error::Refused {
                version: 1,
                floor: 2
            }
        ));
        assert_eq!(err.code().map(|c| c.code()), Some("LW001"));
        assert_eq!(
            err.to_string(),
            "ledger writer version 1 is below version 2, the oldest the shared database allows; \
             update its code and restart it"
        );
        // The lock key is the spec's: class 1280788050, object version * 65536 + floor.
        let mut p = Protocol::write(&Settings::new(), TxState::OpenUnused);
        p.feed(Reply::ok());
        let Step::Run(lock) = p.feed(check_row(Some(2), "1", Some(7))) else {
            panic!()
        };
        assert!(
            lock.sql()
                .contains("SELECT pg_try_advisory_lock_shared(1280788050, 65538)"),
            "{}",
            lock.sql()
        );
    }

    #[test]
    fn a_failed_refusal_lock_still_refuses() {
        let (_, step) = drive(
            Protocol::write(&Settings::new(), TxState::OpenUnused),
            vec![
                Reply::ok(),
                check_row(Some(3), "1", None),
                Reply::Failed(ServerError::new("53200", "out of shared memory")),
                Reply::ok(),
            ],
        );
        assert!(matches!(
            step,
            Step::Failed(Error::Refused {
                version: 1,
                floor: 3
            })
        ));
    }

    #[test]
    fn refused_writers_are_looked_up_only_when_a_refusal_lock_is_held() {
        let refused_row = vec![
            Value::Text("10.0.0.5".into()),
            Value::Int(4242),
            Value::Int(0),
            Value::Int(1),
        ];
        let (kinds, step) = drive(
            clean_write(TxState::Idle),
            vec![
                Reply::ok(),
                Reply::ok(),
                check_row(Some(1), "1", Some(8)),
                any_refused(true),
                Reply::Rows(vec![refused_row]),
            ],
        );
        assert_eq!(
            kinds,
            [Begin, WriterLock, FLOOR, AnyRefused, RefusedWriters]
        );
        let Step::Granted(start) = step else { panic!() };
        // A refused writer is held: no count is clean, the next write scans again.
        assert_eq!(start.refusals_clean(), None);
        assert_eq!(
            start.refused(),
            [RefusedWriter {
                writer: "10.0.0.5".into(),
                pid: 4242,
                version: 0,
                floor: 1
            }]
        );
        assert_eq!(
            start.alerts(&[]),
            [
                "The ledger writer at 10.0.0.5 was refused: ledger writer version 0 is below \
              version 1, the oldest the shared database allows; update its code and restart it"
            ]
        );
        assert!(start
            .alerts(&[Alert::open(start.refused()[0].alert_text())])
            .is_empty());
    }

    /// The scan of `pg_locks` and the count at which a write found none, for a host that
    /// last found none at `known` and a floor check that reads `count`.
    fn shortcut(
        known: Option<i64>,
        count: Option<i64>,
        replies: Vec<Reply>,
    ) -> (Vec<StatementKind>, WriteStart) {
        let mut all = vec![check_row(Some(1), "1", count)];
        all.extend(replies);
        granted(
            Protocol::write_in_one_message(&Settings::new(), TxState::Idle).known_clean(known),
            all,
        )
    }

    /// Drives `p` like [`drive`] and expects it to grant the write.
    fn granted(p: Protocol, replies: Vec<Reply>) -> (Vec<StatementKind>, WriteStart) {
        let (kinds, step) = drive(p, replies);
        let Step::Granted(start) = step else {
            panic!("{step:?}")
        };
        (kinds, start)
    }

    #[test]
    fn a_prepared_floor_check_runs_as_execute_once_a_clean_count_is_known() {
        let first_sql = |p: Protocol| {
            let mut p = p;
            match p.start() {
                Step::Run(s) => (s.kind(), s.sql().to_string()),
                other => panic!("{other:?}"),
            }
        };
        let settings = Settings::new();
        let one = |tx| Protocol::write_in_one_message(&settings, tx);
        // Known count and prepared: EXECUTE, after BEGIN and the lock, in one message.
        let (kind, sql) = first_sql(
            one(TxState::Idle)
                .known_clean(Some(3))
                .floor_check_prepared(true),
        );
        assert_eq!(kind, StatementKind::StartWrite);
        assert_eq!(
            sql,
            format!("BEGIN; {WRITER_LOCK_SQL}; {EXECUTE_FLOOR_CHECK_SQL}")
        );
        // Either order of the builders gives the same message.
        let (_, other) = first_sql(
            one(TxState::Idle)
                .floor_check_prepared(true)
                .known_clean(Some(3)),
        );
        assert_eq!(other, sql);
        // No known count: the check scans, as text (the prepared one does not scan).
        let (_, sql) = first_sql(one(TxState::Idle).floor_check_prepared(true));
        assert!(sql.ends_with(floor_check_sql()), "{sql}");
        // Not prepared: the text without the scan.
        let (_, sql) = first_sql(one(TxState::OpenUnused).known_clean(Some(3)));
        assert_eq!(
            sql,
            format!("{WRITER_LOCK_SQL}; {}", floor_check_sql_without_scan())
        );
        // What gets prepared is that same text, under the name EXECUTE runs.
        assert_eq!(
            prepare_floor_check_sql(),
            format!(
                "PREPARE {FLOOR_CHECK_STATEMENT} AS {}",
                floor_check_sql_without_scan()
            )
        );
        assert_eq!(
            EXECUTE_FLOOR_CHECK_SQL,
            format!("EXECUTE {FLOOR_CHECK_STATEMENT}")
        );
        // The reply is read the same way.
        let (kinds, start) = granted(
            one(TxState::Idle)
                .known_clean(Some(7))
                .floor_check_prepared(true),
            vec![check_row(Some(1), "1", Some(7))],
        );
        assert_eq!(kinds, [StatementKind::StartWrite]);
        assert_eq!((start.floor(), start.refusals_clean()), (Some(1), Some(7)));
    }

    #[test]
    fn an_unchanged_refusal_count_skips_the_scan() {
        let (kinds, start) = shortcut(Some(7), Some(7), vec![]);
        assert_eq!(kinds, [StatementKind::StartWrite]);
        assert!(start.refused().is_empty());
        assert_eq!(start.refusals_clean(), Some(7));
    }

    #[test]
    fn a_moved_refusal_count_scans_and_keeps_the_new_count_when_clean() {
        let (kinds, start) = shortcut(Some(7), Some(8), vec![any_refused(false)]);
        assert_eq!(kinds, [StatementKind::StartWrite, AnyRefused]);
        assert_eq!(start.refusals_clean(), Some(8));
        // The scan statement is the pg_locks scan for the refusal lock's class and sub id.
        let mut p =
            Protocol::write_in_one_message(&Settings::new(), TxState::Idle).known_clean(Some(7));
        p.start();
        let Step::Run(scan) = p.feed(check_row(Some(1), "1", Some(8))) else {
            panic!()
        };
        assert_eq!((scan.kind(), scan.sql()), (AnyRefused, ANY_REFUSED_SQL));
        assert!(scan.sql().contains("pg_locks") && scan.sql().contains("1280788050"));
        // Nothing known yet (a host's first write): the floor check scans in the same
        // statement, and the count comes back to keep.
        let (kinds, start) = shortcut(None, Some(8), vec![]);
        assert_eq!(kinds, [StatementKind::StartWrite]);
        assert_eq!(start.refusals_clean(), Some(8));
        let (kinds, start) = drive(
            Protocol::write_in_one_message(&Settings::new(), TxState::Idle),
            vec![check_row_held(Some(1), Some(8)), Reply::ok()],
        );
        assert_eq!(kinds, [StatementKind::StartWrite, RefusedWriters]);
        assert!(matches!(start, Step::Granted(s) if s.refusals_clean() == Some(8)));
    }

    #[test]
    fn a_null_refusal_count_always_scans() {
        // No counter in the database (NULL): never clean, whatever the host knew; the scan
        // is a statement of its own after a check that did not scan.
        let (kinds, start) = shortcut(Some(7), None, vec![any_refused(false)]);
        assert_eq!(kinds, [StatementKind::StartWrite, AnyRefused]);
        assert_eq!(start.refusals_clean(), None);
        let (kinds, start) = shortcut(None, None, vec![]);
        assert_eq!(kinds, [StatementKind::StartWrite]);
        assert_eq!(start.refusals_clean(), None);
    }

    #[test]
    fn a_held_refusal_lock_names_the_writers_and_keeps_no_count() {
        let row = vec![
            Value::Text("10.0.0.9".into()),
            Value::Int(77),
            Value::Int(0),
            Value::Int(1),
        ];
        let (kinds, start) = shortcut(
            Some(7),
            Some(9),
            vec![any_refused(true), Reply::Rows(vec![row])],
        );
        assert_eq!(
            kinds,
            [StatementKind::StartWrite, AnyRefused, RefusedWriters]
        );
        assert_eq!(start.refused().len(), 1);
        assert_eq!(start.refusals_clean(), None);
        // The refused session closed between the scan and the list: clean at this count.
        let (_, start) = shortcut(Some(7), Some(9), vec![any_refused(true), Reply::ok()]);
        assert!(start.refused().is_empty());
        assert_eq!(start.refusals_clean(), Some(9));
    }

    #[test]
    fn the_floor_check_reads_the_refusal_count_and_the_start_opens_a_transaction() {
        let count = "pg_sequence_last_value(to_regclass('writer_refusals'))";
        let scanning = floor_check_sql();
        assert!(scanning.contains(count) && scanning.contains("EXISTS (SELECT 1 FROM pg_locks"));
        let counted = floor_check_sql_without_scan();
        assert!(counted.contains(count), "{counted}");
        assert!(!counted.contains("pg_locks"), "{counted}");
        // A known clean count makes the start of the write the check without the scan.
        let mut known =
            Protocol::write_in_one_message(&Settings::new(), TxState::Idle).known_clean(Some(3));
        let Step::Run(first) = known.start() else {
            panic!()
        };
        assert!(first.sql().ends_with(&counted), "{}", first.sql());
        assert!(first
            .sql()
            .starts_with("BEGIN; SELECT pg_advisory_xact_lock(1279607879); "));
        let (kinds, step) = drive(
            Protocol::write_in_one_message(&Settings::new(), TxState::Idle).known_clean(Some(3)),
            vec![cancelled(), Reply::ok(), check_row(None, "1", Some(3))],
        );
        assert_eq!(
            kinds,
            [
                StatementKind::StartWrite,
                Rollback,
                StatementKind::StartWrite
            ]
        );
        assert!(matches!(step, Step::Granted(s) if s.waits() == 2));
        let mut p = Protocol::write(&Settings::new(), TxState::OpenUnused).known_clean(Some(3));
        p.start();
        assert!(matches!(p.feed(Reply::ok()), Step::Run(s) if s.sql() == counted));
        let mut idle = Protocol::write_in_one_message(&Settings::new(), TxState::Idle);
        let Step::Run(first) = idle.start() else {
            panic!()
        };
        assert!(first.opens_transaction());
        let mut open = Protocol::write_in_one_message(&Settings::new(), TxState::OpenUnused);
        let Step::Run(first) = open.start() else {
            panic!()
        };
        assert!(!first.opens_transaction());
        let mut p = Protocol::write(&Settings::new(), TxState::Idle);
        assert!(matches!(p.start(), Step::Run(s) if s.opens_transaction()));
        assert!(matches!(p.feed(Reply::ok()), Step::Run(s) if !s.opens_transaction()));
    }

    #[test]
    fn the_lock_alone_takes_its_waits_and_no_floor_check() {
        let (kinds, step) = drive(
            Protocol::lock(&Settings::new(), TxState::Idle),
            vec![
                Reply::ok(),
                cancelled(),
                Reply::ok(),
                Reply::ok(),
                Reply::ok(),
            ],
        );
        assert_eq!(kinds, [Begin, WriterLock, Rollback, Begin, WriterLock]);
        assert!(matches!(step, Step::Granted(s) if s.waits() == 2 && s.floor().is_none()));
        // In one message: BEGIN and the lock, nothing after it.
        let mut p = Protocol::lock_in_one_message(&Settings::new(), TxState::Idle);
        let Step::Run(first) = p.start() else {
            panic!()
        };
        assert_eq!(first.sql(), format!("BEGIN; {WRITER_LOCK_SQL}"));
        assert!(first.opens_transaction());
        let (kinds, step) = drive(
            Protocol::lock_in_one_message(&Settings::new(), TxState::OpenUnused),
            vec![cancelled(), Reply::ok(), Reply::ok()],
        );
        let start = StatementKind::StartWrite;
        assert_eq!(kinds, [start, Rollback, start]);
        assert!(matches!(step, Step::Granted(s) if s.waits() == 2));
    }

    #[test]
    fn rows_as_text_from_a_text_only_driver() {
        let check = FloorCheck::read(&[vec![
            Value::Text("2".into()),
            Value::Text(" 1 ".into()),
            Value::Text("f".into()),
            Value::Text("12".into()),
        ]]);
        assert_eq!(
            check,
            FloorCheck {
                floor: Some(2),
                session_version: Some(1),
                any_refused: false,
                refusals: Some(12)
            }
        );
        let doubtful = FloorCheck::read(&[]);
        assert_eq!(
            (doubtful.floor, doubtful.any_refused, doubtful.refusals),
            (None, true, None)
        );
        // A text answer to the scan reads too; a doubtful one counts as a lock held.
        let (kinds, _) = drive(
            Protocol::write(&Settings::new(), TxState::OpenUnused).known_clean(Some(0)),
            vec![
                Reply::ok(),
                check_row(None, "1", Some(1)),
                Reply::Rows(vec![vec![Value::Text("t".into())]]),
                Reply::ok(),
            ],
        );
        assert_eq!(kinds, [WriterLock, FLOOR, AnyRefused, RefusedWriters]);
        let (kinds, _) = drive(
            Protocol::write(&Settings::new(), TxState::OpenUnused).known_clean(Some(0)),
            vec![
                Reply::ok(),
                check_row(None, "1", Some(1)),
                Reply::ok(),
                Reply::ok(),
            ],
        );
        assert_eq!(kinds, [WriterLock, FLOOR, AnyRefused, RefusedWriters]);
        let refused = read_refused_writers(&[vec![
            Value::Null,
            Value::Text("17".into()),
            Value::Text("0".into()),
            Value::Text("1".into()),
        ]]);
        assert_eq!(refused[0].writer, UNSEEN_CLIENT);
        assert_eq!(
            (refused[0].pid, refused[0].version, refused[0].floor),
            (17, 0, 1)
        );
    }

    #[test]
    fn a_session_without_this_writers_version_is_not_granted() {
        for (shown, actual) in [
            (Value::Null, "unset"),
            (Value::Text("junk".into()), "0"),
            (Value::Text("2".into()), "2"),
        ] {
            let (kinds, step) = drive(
                Protocol::write(&Settings::new(), TxState::OpenUnused),
                vec![
                    Reply::ok(),
                    Reply::Rows(vec![vec![Value::Int(1), shown, Value::Bool(false)]]),
                    Reply::ok(),
                ],
            );
            assert_eq!(kinds, [WriterLock, FLOOR, Rollback]);
            let Step::Failed(Error::SettingNotInEffect {
                setting,
                expected,
                actual: got,
            }) = step
            else {
                panic!("{step:?}")
            };
            assert_eq!(
                (setting.as_str(), expected.as_str(), got.as_str()),
                (VERSION_SETTING, "1", actual)
            );
        }
    }

    #[test]
    fn one_message_start_retries_and_refuses_like_the_statement_by_statement_one() {
        let start = StatementKind::StartWrite;
        let mut p = Protocol::write_in_one_message(&Settings::new(), TxState::Idle);
        let Step::Run(first) = p.start() else {
            panic!()
        };
        assert_eq!(first.kind(), start);
        assert!(first
            .sql()
            .starts_with("BEGIN; SELECT pg_advisory_xact_lock(1279607879); SELECT "));
        assert!(first.sql().ends_with(&floor_check_sql()));
        // Three cancelled waits: each attempt is one message, rolled back after.
        let mut replies = Vec::new();
        for _ in 0..3 {
            replies.extend([cancelled(), Reply::ok()]);
        }
        let (kinds, step) = drive(
            Protocol::write_in_one_message(&Settings::new(), TxState::Idle),
            replies,
        );
        assert_eq!(kinds, [start, Rollback, start, Rollback, start, Rollback]);
        let Step::Failed(err) = step else { panic!() };
        assert_eq!(
            err.to_string(),
            "the ledger writer lock was not granted in 3 waits of 10 seconds"
        );
        // Granted on the second attempt, the reply being the floor check's rows.
        let (kinds, step) = drive(
            Protocol::write_in_one_message(&Settings::new(), TxState::Idle),
            vec![cancelled(), Reply::ok(), check_row(Some(1), "1", Some(7))],
        );
        assert_eq!(kinds, [start, Rollback, start]);
        assert!(matches!(step, Step::Granted(s) if s.waits() == 2));
        // Below the floor: the refusal lock, the rollback, LW001.
        let (kinds, step) = drive(
            Protocol::write_in_one_message(&Settings::new(), TxState::OpenUnused),
            vec![check_row(Some(2), "1", None), Reply::ok(), Reply::ok()],
        );
        assert_eq!(kinds, [start, RefusalLock, Rollback]);
        assert!(matches!(
            step,
            Step::Failed(Error::Refused {
                version: 1,
                floor: 2
            })
        ));
        let mut p = Protocol::write_in_one_message(&Settings::new(), TxState::OpenUnused);
        let Step::Run(first) = p.start() else {
            panic!()
        };
        assert!(first
            .sql()
            .starts_with("SELECT pg_advisory_xact_lock(1279607879); "));
    }

    #[test]
    fn a_used_transaction_is_refused_before_anything_runs() {
        let mut p = Protocol::write(&Settings::new(), TxState::OpenUsed);
        let Step::Failed(err) = p.start() else {
            panic!()
        };
        assert_eq!(
            err.to_string(),
            "cannot start a transaction within a transaction"
        );
    }

    #[test]
    fn setup_locks_lifts_the_limit_runs_the_hosts_sql_first_and_stores_the_floor() {
        let mut s = Settings::new();
        s.version(3).required(3);
        let mut p = Protocol::setup(&s, Some("CREATE TABLE ledgers (slug text)"), TxState::Idle);
        let mut sqls = Vec::new();
        let mut step = p.start();
        while let Step::Run(stmt) = &step {
            sqls.push((stmt.kind(), stmt.sql().to_string()));
            step = p.feed(Reply::ok());
        }
        assert!(matches!(step, Step::Done), "{step:?}");
        let kinds: Vec<_> = sqls.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            [Begin, WriterLock, SetupLimit, HostSchema, Schema, StoreFloor, Commit]
        );
        assert_eq!(sqls[2].1, "SET LOCAL statement_timeout = 0");
        assert_eq!(sqls[3].1, "CREATE TABLE ledgers (slug text)");
        // That the stored floor never goes down is checked on a real server
        // (tests/pg_guarantees.rs), not in the statement's text.
        assert!(sqls[5].1.contains("VALUES ('ledger', 3)"));
        // Without host SQL the floor's schema follows the limit directly; a failure rolls back.
        let (kinds, step) = drive(
            Protocol::setup(&Settings::new(), Some("  "), TxState::Idle),
            vec![
                Reply::ok(),
                Reply::ok(),
                Reply::ok(),
                Reply::Failed(ServerError::new(
                    "42501",
                    "permission denied for schema public",
                )),
                Reply::ok(),
            ],
        );
        assert_eq!(kinds, [Begin, WriterLock, SetupLimit, Schema, Rollback]);
        assert!(matches!(step, Step::Failed(Error::Database { .. })));
    }

    #[test]
    fn ensure_runs_ddl_only_when_the_catalog_says_something_is_missing() {
        let check = |current: bool, read_only: bool| {
            Reply::Rows(vec![vec![Value::Bool(current), Value::Bool(read_only)]])
        };
        let ensure = || Protocol::ensure(&Settings::new(), TxState::Idle);
        let run = |p: &mut Protocol, replies: Vec<Reply>| {
            let mut kinds = Vec::new();
            let mut step = p.start();
            let mut replies = replies.into_iter();
            while let Step::Run(stmt) = &step {
                kinds.push(stmt.kind());
                step = p.feed(replies.next().expect("a scripted reply"));
            }
            (kinds, step)
        };
        // Current: no DDL, the floor is still stored (GREATEST), the address is set up.
        let mut p = ensure();
        let (kinds, step) = run(
            &mut p,
            vec![
                Reply::ok(),
                Reply::ok(),
                Reply::ok(),
                check(true, false),
                Reply::ok(),
                Reply::ok(),
            ],
        );
        assert_eq!(
            kinds,
            [
                Begin,
                WriterLock,
                SetupLimit,
                StatementKind::SchemaCheck,
                StoreFloor,
                Commit
            ]
        );
        assert!(matches!(step, Step::Done) && p.set_up(), "{step:?}");
        // Something missing (text answers, as some drivers give): the schema's DDL runs.
        let mut p = ensure();
        let text = Reply::Rows(vec![vec![Value::from("f"), Value::from("f")]]);
        let (kinds, _) = run(
            &mut p,
            vec![
                Reply::ok(),
                Reply::ok(),
                Reply::ok(),
                text,
                Reply::ok(),
                Reply::ok(),
                Reply::ok(),
            ],
        );
        assert_eq!(
            kinds,
            [
                Begin,
                WriterLock,
                SetupLimit,
                StatementKind::SchemaCheck,
                Schema,
                StoreFloor,
                Commit
            ]
        );
        assert!(p.set_up());
        // Read-only and current: nothing stored, not recorded as set up.
        let mut p = ensure();
        let (kinds, step) = run(
            &mut p,
            vec![
                Reply::ok(),
                Reply::ok(),
                Reply::ok(),
                check(true, true),
                Reply::ok(),
            ],
        );
        assert_eq!(
            kinds,
            [
                Begin,
                WriterLock,
                SetupLimit,
                StatementKind::SchemaCheck,
                Commit
            ]
        );
        assert!(matches!(step, Step::Done) && !p.set_up(), "{step:?}");
        // A doubtful answer counts as not current.
        assert!(SchemaCheck::read(&[]).needs_ddl());
    }

    #[test]
    fn ending_a_write() {
        let (kinds, step) = drive(Protocol::end(true, false), vec![Reply::ok()]);
        assert_eq!(kinds, [Commit]);
        assert!(matches!(step, Step::Done));
        let (kinds, step) = drive(Protocol::end(false, true), vec![Reply::ok()]);
        assert_eq!(kinds, [Rollback]);
        assert!(matches!(step, Step::Done));
        // A commit after a failed statement can only roll back, and says so.
        let (kinds, step) = drive(Protocol::end(true, true), vec![Reply::ok()]);
        assert_eq!(kinds, [Rollback]);
        let Step::Failed(err) = step else { panic!() };
        assert!(matches!(err, Error::RolledBack));
        // A COMMIT the server refuses (a deferred constraint) is reported as it is.
        let (_, step) = drive(
            Protocol::end(true, false),
            vec![Reply::Failed(ServerError::new(
                "23505",
                "duplicate key value violates unique constraint",
            ))],
        );
        assert!(matches!(step, Step::Failed(Error::Database { .. })));
        // A connection lost during COMMIT leaves the outcome unknown, and says so.
        let (_, step) = drive(
            Protocol::end(true, false),
            vec![Reply::Lost {
                reason: "server closed the connection unexpectedly".into(),
            }],
        );
        let Step::Failed(err) = step else { panic!() };
        assert!(matches!(err, Error::CommitOutcomeUnknown { .. }));
        assert!(!err.to_string().contains("rolled back"), "{err}");
        // A session the server ends while COMMIT is in flight (an administrator's shutdown)
        // may have committed: unknown, as on this crate's own connection; only the idle
        // limit, which ended the session before the COMMIT came, is a known rollback.
        let fatal = |code: &str| {
            let mut e = ServerError::new(code, "terminating connection");
            e.fatal = true;
            drive(Protocol::end(true, false), vec![Reply::Failed(e)]).1
        };
        let Step::Failed(err) = fatal("57P01") else {
            panic!()
        };
        assert!(matches!(err, Error::CommitOutcomeUnknown { .. }), "{err:?}");
        assert!(!err.to_string().contains("rolled back"), "{err}");
        let Step::Failed(err) = fatal("25P03") else {
            panic!()
        };
        assert!(matches!(err, Error::SessionEnded { .. }), "{err:?}");
    }

    #[test]
    fn feeding_after_the_end_is_an_error_not_a_panic() {
        let mut p = Protocol::end(false, false);
        p.start();
        p.feed(Reply::ok());
        assert!(matches!(
            p.feed(Reply::ok()),
            Step::Failed(Error::Driver { .. })
        ));
    }

    #[test]
    fn settings_check_reads_the_servers_answer() {
        let s = Settings::new();
        let sql = s.check_sql();
        assert!(
            sql.contains("'lock_timeout'") && sql.contains("'agentihooks.ledger_writer_version'")
        );
        let rows: Vec<Vec<Value>> = s
            .startup_settings()
            .iter()
            .map(|st| {
                vec![
                    Value::Text(st.name.to_string()),
                    Value::Text(st.base.clone()),
                    Value::Text(st.base.clone()),
                    Value::Bool(true),
                ]
            })
            .collect();
        let checks = s.read_checks(&rows);
        assert!(checks
            .iter()
            .all(|c| c.status != SettingStatus::NotInEffect));
        assert!(verify_checks(checks).is_ok());
        let mut dropped = rows.clone();
        dropped[0][1] = Value::Text("0".into());
        let err = verify_checks(s.read_checks(&dropped)).unwrap_err();
        assert!(
            matches!(err, Error::SettingNotInEffect { ref setting, .. } if setting == "lock_timeout")
        );
        // No rows at all: nothing is in effect.
        assert!(verify_checks(s.read_checks(&[])).is_err());
    }
}
