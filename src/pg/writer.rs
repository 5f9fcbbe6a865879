//! The write transaction: the writer lock, the floor check, then the caller's statements.
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
//! travels as one simple-query message: `BEGIN`, the lock, and the floor read with the
//! refusal count. The lock stays the transaction's first statement; when it is cancelled
//! the server skips the rest of the message, the transaction is rolled back and the lock is
//! asked for again. The schema check is a look-up in this process after the first write;
//! the scan for refusal locks runs only when the refusal count moved since this session
//! last found none, and the refused-writers query only when one is held.

use super::alerts::{refused_writers, Alert, RefusedWriter};
use super::connection::{Connection, TextResults, Tx};
use super::error::Error;
use super::floor::{
    ensure_schema, take_refusal_lock, FLOOR_NAME, REFUSALS_SEQUENCE, REFUSED_LOCK_CLASS,
    REFUSED_LOCK_SUBID,
};
use super::protocol::{is_cancelled_wait, WriteStart, WRITER_LOCK_SQL};
use super::value::{Rows, Value};

impl Connection {
    /// Takes the writer lock as the first statement of a transaction: opens one if none is
    /// open, or uses the open one if it has run no statement yet. Returns the number of
    /// waits it took.
    ///
    /// Fails with [`Error::AlreadyInTransaction`] when the open transaction already ran a
    /// statement, and with [`Error::LockNotGranted`] when every wait was cancelled (the
    /// transaction is then rolled back).
    pub fn lock_writer(&mut self) -> Result<u32, Error> {
        self.lock_writer_then(None).map(|(waits, _)| waits)
    }

    /// Takes the writer lock like [`Connection::lock_writer`], sending `BEGIN` (when no
    /// transaction is open), the lock and `then` (statements without parameters) as one
    /// message; returns the waits and the rows of each statement of `then`, as text.
    fn lock_writer_then(&mut self, then: Option<&str>) -> Result<(u32, TextResults), Error> {
        if let Tx::Open { statements, .. } = self.tx {
            if statements > 0 {
                return Err(Error::AlreadyInTransaction);
            }
        }
        let tries = self.settings().get_lock_tries();
        for attempt in 1..=tries {
            let opens = !self.in_transaction();
            let mut sql = String::new();
            if opens {
                sql.push_str("BEGIN; ");
            }
            sql.push_str(WRITER_LOCK_SQL);
            let mut statements = 1;
            if let Some(then) = then {
                sql.push_str("; ");
                sql.push_str(then);
                statements += 1;
            }
            match self.simple_rows(&sql, opens, statements) {
                Ok(mut results) => {
                    // BEGIN's and the lock's (empty) results come first.
                    let skip = usize::from(opens) + 1;
                    let rest = results.split_off(skip.min(results.len()));
                    return Ok((attempt, rest));
                }
                Err(err) if err.code().is_some_and(|c| is_cancelled_wait(c.code())) => {
                    self.rollback()?;
                }
                Err(err) => {
                    // The transaction is aborted; the original error is the one to report.
                    let _ = self.rollback();
                    return Err(err);
                }
            }
        }
        Err(Error::LockNotGranted {
            tries,
            wait: self.settings().get_lock_wait(),
        })
    }

    /// Starts a write transaction: sets up the schema once per address per process, takes
    /// the writer lock (with its waits), checks the stored floor, and lists the refused
    /// writers. Follow it with statements and [`Connection::commit`] or
    /// [`Connection::rollback`]; [`Connection::write`] does the same with a guard.
    ///
    /// A writer below the floor gets [`Error::Refused`]; its transaction is rolled back and
    /// its session keeps the refusal lock until it closes.
    pub fn begin_write(&mut self) -> Result<WriteStart, Error> {
        if let Tx::Open { statements, .. } = self.tx {
            if statements > 0 {
                return Err(Error::AlreadyInTransaction);
            }
        }
        ensure_schema(self)?;
        let (waits, results) = self.lock_writer_then(Some(&floor_read_sql()))?;
        let checked = self
            .check_floor(&results)
            .and_then(|(floor, count)| Ok((floor, self.any_refused(count)?)));
        match checked {
            Ok((floor, false)) => Ok(WriteStart {
                waits,
                floor,
                refused: Vec::new(),
            }),
            Ok((floor, true)) => match refused_writers(self) {
                Ok(refused) => Ok(WriteStart {
                    waits,
                    floor,
                    refused,
                }),
                Err(err) => {
                    let _ = self.rollback();
                    Err(err)
                }
            },
            Err(err) => {
                let _ = self.rollback();
                Err(err)
            }
        }
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

    /// Refuses this writer if it is below the stored floor, from the floor read that
    /// travelled with the lock (see [`floor_read_sql`]); returns the floor and the refusal
    /// count.
    fn check_floor(&mut self, results: &TextResults) -> Result<(Option<i64>, Option<i64>), Error> {
        let row = results.first().and_then(|rows| rows.first());
        let cell = |i: usize| row.and_then(|r| r.get(i));
        let floor = cell(0).and_then(Value::read_i64);
        let count = cell(1).and_then(Value::read_i64);
        let version = i64::from(self.settings().get_version());
        if let Some(floor) = floor.filter(|&f| version < f) {
            // Behind a pooler the lock would stay on a server connection other clients
            // share, and name the pooler's address rather than this writer.
            if !self.via_proxy() {
                take_refusal_lock(self, version, floor)?;
            }
            self.rollback()?;
            return Err(Error::Refused { version, floor });
        }
        Ok((floor, count))
    }

    /// Whether any refused writer's lock is held in this database. A session that found
    /// none at a refusal count knows there is still none while the count stays (every
    /// refusal counts itself after taking its lock, and the count was read first, under the
    /// writer lock), so the scan of `pg_locks` runs only after the count moved.
    fn any_refused(&mut self, count: Option<i64>) -> Result<bool, Error> {
        if count.is_some() && count == self.refusals_clean {
            return Ok(false);
        }
        let rows = self.execute(&any_refused_sql(), &[])?;
        let any = rows
            .first()
            .and_then(|r| r.get(0))
            .and_then(Value::read_bool)
            .unwrap_or(true);
        self.refusals_clean = if any { None } else { count };
        Ok(any)
    }
}

/// The floor read that travels with the writer lock: the stored floor and the refusal
/// count (`NULL` on a database without the counter). Cheap to plan and run: the scan of
/// `pg_locks` is a statement of its own ([`any_refused_sql`]), run only when needed.
fn floor_read_sql() -> String {
    format!(
        "SELECT (SELECT version FROM writer_floor WHERE name = '{FLOOR_NAME}'), \
         pg_sequence_last_value(to_regclass('{REFUSALS_SEQUENCE}'))"
    )
}

/// Whether any refused writer's lock is held in this database.
fn any_refused_sql() -> String {
    format!(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
         AND classid = {REFUSED_LOCK_CLASS} AND objsubid = {REFUSED_LOCK_SUBID} \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
    )
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

    /// The writer alerts to raise on the ledger being written (see [`new_alerts`]).
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
