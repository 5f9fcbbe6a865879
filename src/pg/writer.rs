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

use super::alerts::{refused_writers, Alert, RefusedWriter};
use super::connection::{Connection, Tx};
use super::error::Error;
use super::floor::{ensure_schema, take_refusal_lock};
use super::protocol::{
    floor_check_sql, is_cancelled_wait, FloorCheck, WriteStart, WRITER_LOCK_SQL,
};
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
        if let Tx::Open { statements, .. } = self.tx {
            if statements > 0 {
                return Err(Error::AlreadyInTransaction);
            }
        }
        let tries = self.settings().get_lock_tries();
        for attempt in 1..=tries {
            if !self.in_transaction() {
                self.begin()?;
            }
            match self.execute_batch(WRITER_LOCK_SQL) {
                Ok(()) => return Ok(attempt),
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
        let waits = self.lock_writer()?;
        let checked = self.check_floor();
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
        Ok(Write {
            conn: self,
            start,
            done: false,
        })
    }

    /// Reads the stored floor under the writer lock and refuses this writer if it is below.
    /// Reads the stored floor and, in the same round trip, whether any
    /// refused writer's lock is held in this database: the full
    /// refused-writers query joins `pg_stat_activity`, which costs a write
    /// more than a millisecond, so it runs only when there is one to name.
    fn check_floor(&mut self) -> Result<(Option<i64>, bool), Error> {
        let rows = self.execute(&floor_check_sql(), &[])?;
        let rows: Vec<_> = rows
            .into_rows()
            .into_iter()
            .map(|r| r.into_values())
            .collect();
        let check = FloorCheck::read(&rows);
        let version = i64::from(self.settings().get_version());
        if let Some((version, floor)) = check.refusal(version) {
            take_refusal_lock(self, version, floor)?;
            self.rollback()?;
            return Err(Error::Refused { version, floor });
        }
        let (floor, any_refused) = (check.floor, check.any_refused);
        Ok((floor, any_refused))
    }
}

/// An open write transaction holding the writer lock; rolls back on drop unless committed.
#[derive(Debug)]
pub struct Write<'c> {
    conn: &'c mut Connection,
    start: WriteStart,
    done: bool,
}

impl Write<'_> {
    /// Runs one statement inside the write (see [`Connection::execute`]).
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<Rows, Error> {
        self.conn.execute(sql, params)
    }

    /// Runs a script inside the write (see [`Connection::execute_batch`]).
    pub fn execute_batch(&mut self, sql: &str) -> Result<(), Error> {
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
