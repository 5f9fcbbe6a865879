//! The write transaction on this crate's own [`Connection`]: the writer lock, the floor
//! check, then the caller's statements.
//!
//! Every decision is the I/O-free [`Protocol`]'s (see [`protocol`](super::protocol)): this
//! module only drives it, the way a host drives it on a connection of its own. Each
//! [`Statement`] runs as one simple-query message, its rows come back as text, a server
//! error becomes [`Reply::Failed`] and a lost connection [`Reply::Lost`]; the connection
//! keeps tracking its transaction (open, statements run, failed) and its serial number as
//! it goes.
//!
//! A write's first statement is `SELECT pg_advisory_xact_lock(1279607879)`. A wait the
//! server cancels through `lock_timeout` (SQLSTATE `55P03`, and only that) rolls back and
//! asks again, [`LOCK_TRIES`](super::LOCK_TRIES) waits in all, then fails with `the ledger
//! writer lock was not granted in 3 waits of 10 seconds`. Because the lock is refused inside
//! a transaction that already ran a statement (`cannot start a transaction within a
//! transaction`), a retry never discards work.
//!
//! Under the lock and before any change, the stored floor is read; a writer below it takes
//! the refusal lock, rolls back and fails with [`Error::Refused`]. Otherwise the refused
//! writers still connected are listed, so the host can raise their alerts on the ledger it
//! writes.
//!
//! Every writer in the line pays each round trip made under the lock, so a write's start
//! travels as one simple-query message ([`Protocol::write_in_one_message`]): `BEGIN`, the
//! lock, and the floor read with the refusal count. The schema check is a look-up in this
//! process after the first write; the connection keeps the refusal count at which it last
//! found no refused writer ([`WriteStart::refusals_clean`]), so the scan for refusal locks
//! runs only when the count moved, and the refused-writers query only when one is held.

use super::alerts::{Alert, RefusedWriter};
use super::connection::{Connection, Tx};
use super::error::Error;
use super::floor::{is_set_up, mark_set_up};
use super::protocol::{
    prepare_floor_check_sql, Protocol, Reply, ServerError, Statement, StatementKind, Step, TxState,
    WriteStart,
};
use super::value::{Rows, Value};

impl Connection {
    /// Where this connection stands for the protocol.
    fn tx_state(&self) -> TxState {
        match self.tx {
            Tx::Idle => TxState::Idle,
            Tx::Open {
                statements: 0,
                failed: false,
            } => TxState::OpenUnused,
            Tx::Open { .. } => TxState::OpenUsed,
        }
    }

    /// Runs `protocol` on this connection to its end: [`Step::Granted`]'s start, or `None`
    /// for [`Step::Done`]. An error that is not the server's (a connection used after
    /// `fork()`, a driver failure) ends it as it is, after a rollback.
    fn drive(&mut self, protocol: &mut Protocol) -> Result<Option<WriteStart>, Error> {
        let mut step = protocol.start();
        loop {
            match step {
                Step::Run(statement) => {
                    let reply = match self.run_statement(&statement) {
                        Ok(reply) => reply,
                        Err(err) => {
                            let _ = self.rollback();
                            return Err(err);
                        }
                    };
                    step = protocol.feed(reply);
                }
                Step::Granted(start) => return Ok(Some(start)),
                Step::Done => return Ok(None),
                Step::Failed(err) => return Err(err),
            }
        }
    }

    /// Runs one statement of the protocol: `BEGIN`, `COMMIT` and `ROLLBACK` as the
    /// connection's own, every other statement as one simple-query message whose last
    /// statement's rows are the reply.
    fn run_statement(&mut self, statement: &Statement) -> Result<Reply, Error> {
        let result = match statement.kind() {
            StatementKind::Begin => self.begin().map(|()| Vec::new()),
            StatementKind::Commit => self.commit().map(|()| Vec::new()),
            StatementKind::Rollback => self.rollback().map(|()| Vec::new()),
            _ => {
                // BEGIN, when it leads the message, opens the transaction; the rest are
                // work in it (only whether any ran is tracked).
                let opens = statement.opens_transaction();
                self.simple_rows(statement.sql(), opens, 1)
                    .map(|mut results| results.pop().unwrap_or_default())
            }
        };
        match result {
            Ok(rows) => Ok(Reply::Rows(rows)),
            Err(err) => reply_of(err),
        }
    }

    /// Takes the writer lock as the first statement of a transaction: opens one if none is
    /// open, or uses the open one if it has run no statement yet. Returns the number of
    /// waits it took.
    ///
    /// Fails with [`Error::AlreadyInTransaction`] when the open transaction already ran a
    /// statement, and with [`Error::LockNotGranted`] when every wait was cancelled (the
    /// transaction is then rolled back).
    pub fn lock_writer(&mut self) -> Result<u32, Error> {
        let mut protocol = Protocol::lock_in_one_message(self.settings(), self.tx_state());
        let start = self.drive(&mut protocol)?;
        Ok(start.map_or(1, |s| s.waits()))
    }

    /// Starts a write transaction: sets up the schema once per address per process, takes
    /// the writer lock (with its waits), checks the stored floor, and lists the refused
    /// writers. Follow it with statements and [`Connection::commit`] or
    /// [`Connection::rollback`]; [`Connection::write`] does the same with a guard.
    ///
    /// A writer below the floor gets [`Error::Refused`]; its transaction is rolled back and
    /// its session keeps the refusal lock until it closes.
    pub fn begin_write(&mut self) -> Result<WriteStart, Error> {
        if self.tx_state() == TxState::OpenUsed {
            return Err(Error::AlreadyInTransaction);
        }
        ensure_schema(self)?;
        let prepared = self.prepare_floor_check();
        let started = self.start_write(prepared);
        let start = match started {
            // The server lost the prepared check (something dropped it): start again with
            // the check as text. The failed start was rolled back; nothing was written.
            Err(err) if prepared && is_missing_statement(&err) => {
                self.floor_check_prepared = None;
                self.start_write(false)?
            }
            other => other?,
        };
        self.refusals_clean = start.refusals_clean();
        Ok(start)
    }

    fn start_write(&mut self, floor_check_prepared: bool) -> Result<WriteStart, Error> {
        let mut protocol = Protocol::write_in_one_message(self.settings(), self.tx_state())
            .known_clean(self.refusals_clean)
            .floor_check_prepared(floor_check_prepared);
        if let Some(port) = self.dialled_port() {
            // Behind a pooler the refusal lock would stay on a server connection other
            // clients share, and name the pooler's address rather than this writer.
            protocol = protocol.dialled(port);
        }
        self.drive(&mut protocol)?.ok_or_else(|| Error::Driver {
            reason: "the writer protocol ended a write without granting it".to_string(),
        })
    }

    /// Whether the next write can run its floor check prepared: on a session that talks
    /// to the server directly, once a clean refusal count is known (the first write scans
    /// in its check), prepared once per session while no transaction is open (`PREPARE`
    /// outlives transactions). Behind a pooler, or when preparing fails, the check runs as
    /// text.
    fn prepare_floor_check(&mut self) -> bool {
        if let Some(prepared) = self.floor_check_prepared {
            return prepared;
        }
        if !self.is_direct() || self.refusals_clean.is_none() || self.tx_state() != TxState::Idle {
            return false;
        }
        // Outside a transaction `PREPARE` leaves none open; a lost session is marked lost
        // and the write's start then says so.
        let prepared = self.execute_batch(prepare_floor_check_sql()).is_ok();
        self.floor_check_prepared = Some(prepared);
        prepared
    }

    /// Starts a write transaction like [`Connection::begin_write`] and returns a guard that
    /// rolls back unless committed.
    pub fn write(&mut self) -> Result<Write<'_>, Error> {
        let start = self.begin_write()?;
        let serial = self.serial;
        Ok(Write {
            conn: self,
            start,
            serial,
            done: false,
        })
    }
}

/// Whether `err` is the server's "prepared statement does not exist" (SQLSTATE `26000`).
fn is_missing_statement(err: &Error) -> bool {
    err.code()
        .is_some_and(|c| *c == super::SqlState::INVALID_SQL_STATEMENT_NAME)
}

/// The reply for a statement that failed with `err`: the server's error, or a lost
/// connection. Any other error (nothing reached the server, or the driver failed) is not a
/// reply: it ends the protocol as it is.
fn reply_of(err: Error) -> Result<Reply, Error> {
    let server = |code: &super::SqlState, message: String| ServerError::new(code.code(), message);
    match err {
        Error::Database {
            code,
            message,
            detail,
            hint,
        } => {
            let mut e = server(&code, message);
            e.detail = detail;
            e.hint = hint;
            Ok(Reply::Failed(e))
        }
        Error::SessionEnded { code, message } => {
            let mut e = server(&code, message);
            e.fatal = true;
            Ok(Reply::Failed(e))
        }
        Error::Refused { version, floor } => Ok(Reply::Failed(ServerError::new(
            super::REFUSED_SQLSTATE,
            super::refusal_message(version, floor),
        ))),
        Error::Closed { reason } | Error::CommitOutcomeUnknown { reason } => {
            Ok(Reply::Lost { reason })
        }
        other => Err(other),
    }
}

/// The set-up that runs once per address per process, before the first write
/// ([`Protocol::ensure`]): unless this process already set up the connection's address, it
/// takes the writer lock, reads the catalog ([`SCHEMA_CHECK_SQL`](super::sql::SCHEMA_CHECK_SQL)),
/// runs the schema's DDL only when something is missing or not current, and stores the
/// floor (`GREATEST`, never lowering it). A writer role with data grants only (`SELECT,
/// INSERT, UPDATE, DELETE` on the tables, `USAGE` on the sequence) passes it once the owner
/// ran [`setup_schema`].
///
/// On a read-only server with a current schema nothing is stored and nothing is recorded:
/// the write's own statement then fails with the server's words.
pub fn ensure_schema(conn: &mut Connection) -> Result<(), Error> {
    if is_set_up(&conn.address().to_string()) {
        return Ok(());
    }
    let tx = set_up_state(conn)?;
    let mut protocol = Protocol::ensure(conn.settings(), tx);
    conn.drive(&mut protocol)?;
    if protocol.set_up() {
        mark_set_up(&conn.address().to_string());
    }
    Ok(())
}

/// Sets up the schema and stores the connection's required floor (never lowering a higher
/// stored one), in one transaction under the writer lock, with the host's `extra_sql` (a
/// script, run first so the host's own tables win over the minimal ones); see
/// [`Protocol::setup`].
///
/// Runs outside a transaction; an open transaction that already ran a statement is refused
/// with [`Error::AlreadyInTransaction`].
pub fn setup_schema(conn: &mut Connection, extra_sql: Option<&str>) -> Result<(), Error> {
    let tx = set_up_state(conn)?;
    let mut protocol = Protocol::setup(conn.settings(), extra_sql, tx);
    conn.drive(&mut protocol)?;
    if protocol.set_up() {
        mark_set_up(&conn.address().to_string());
    }
    Ok(())
}

/// The set-up runs in a transaction of its own: an open one that ran nothing yet is rolled
/// back first, one that ran a statement is refused.
fn set_up_state(conn: &mut Connection) -> Result<TxState, Error> {
    match conn.tx_state() {
        TxState::OpenUsed => Err(Error::AlreadyInTransaction),
        TxState::OpenUnused => {
            conn.rollback()?;
            Ok(TxState::Idle)
        }
        TxState::Idle => Ok(TxState::Idle),
    }
}

/// An open write transaction holding the writer lock; rolls back on drop unless committed.
#[derive(Debug)]
pub struct Write<'c> {
    conn: &'c mut Connection,
    start: WriteStart,
    serial: u64,
    done: bool,
}

impl Connection {
    /// Whether the open transaction is the one numbered `serial` (see
    /// [`Connection::transaction_serial`]).
    pub fn in_transaction_serial(&self, serial: u64) -> bool {
        self.in_transaction() && self.serial == serial
    }

    /// The number of the transaction opened last on this session; a host that runs a
    /// write's statements later checks with [`Connection::in_transaction_serial`] that its
    /// transaction is still the open one.
    pub fn transaction_serial(&self) -> u64 {
        self.serial
    }
}

impl Write<'_> {
    fn check_open(&self) -> Result<(), Error> {
        if self.done || !self.conn.in_transaction_serial(self.serial) {
            return Err(Error::WriteEnded);
        }
        Ok(())
    }

    /// Runs one statement inside the write (see [`Connection::execute`]). Fails with
    /// [`Error::WriteEnded`] once the write's transaction ended (for example after a
    /// `COMMIT` sent through [`Write::connection`]): a write never runs outside its lock.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Rows, Error> {
        self.check_open()?;
        self.conn.execute(sql, params)
    }

    /// Runs a script inside the write (see [`Connection::execute_batch`]); fails like
    /// [`Write::execute`] once the write ended.
    pub fn execute_batch(&mut self, sql: &str) -> Result<(), Error> {
        self.check_open()?;
        self.conn.execute_batch(sql)
    }

    /// What the write learned while it started.
    pub fn start(&self) -> &WriteStart {
        &self.start
    }

    /// The refused writers still connected.
    pub fn refused(&self) -> &[RefusedWriter] {
        self.start.refused()
    }

    /// The writer alerts to raise on the ledger being written (see
    /// [`new_alerts`](super::new_alerts)).
    pub fn alerts(&self, existing: &[Alert]) -> Vec<String> {
        self.start.alerts(existing)
    }

    /// The connection the write runs on.
    pub fn connection(&mut self) -> &mut Connection {
        self.conn
    }

    /// Commits the write.
    pub fn commit(mut self) -> Result<(), Error> {
        self.done = true;
        self.conn.commit()
    }

    /// Rolls the write back.
    pub fn rollback(mut self) -> Result<(), Error> {
        self.done = true;
        self.conn.rollback()
    }
}

impl Drop for Write<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.rollback();
        }
    }
}
