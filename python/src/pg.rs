//! The Postgres writer session for Python: `PgSettings`, `PgSession`, `PgPool` and the floor
//! and alert functions. `writerlock/postgres.py` builds the sqlite3-like `Connection`,
//! `Cursor`, `Write` and `Pool` on these.
//!
//! Every call that talks to the server runs inside `Python::detach`, and so does the wait for
//! a session's mutex (another thread may be using the session), so the interpreter is never
//! held across the network.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyList, PyTuple};

use writerlock::pg::{self, Alert, Connection, Pool, RefusedWriter, SettingStatus, Settings};
use writerlock::Wait;

use crate::dbapi;
use crate::errors::pg_error;
use crate::values::{row_to_py, to_values};

fn seconds(name: &'static str, value: f64) -> PyResult<std::time::Duration> {
    Wait::seconds(name, value).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The settings every connection sends: time limits, writer version and floor, keepalives.
/// Durations are in seconds.
#[pyclass(module = "writerlock._native", name = "PgSettings", frozen)]
pub struct PySettings {
    pub(crate) inner: Settings,
}

#[pymethods]
impl PySettings {
    #[new]
    #[pyo3(signature = (
        *,
        version = pg::VERSION,
        required = pg::REQUIRED,
        lock_wait = pg::LOCK_WAIT.as_secs_f64(),
        lock_tries = pg::LOCK_TRIES,
        idle_in_transaction = pg::IDLE_IN_TRANSACTION.as_secs_f64(),
        statement_timeout = pg::STATEMENT_TIMEOUT.as_secs_f64(),
        connect_timeout = pg::settings::CONNECT_TIMEOUT.as_secs_f64(),
        keepalives = pg::settings::KEEPALIVES,
        keepalives_idle = pg::settings::KEEPALIVES_IDLE.as_secs_f64(),
        keepalives_interval = pg::settings::KEEPALIVES_INTERVAL.as_secs_f64(),
        keepalives_count = pg::settings::KEEPALIVES_COUNT,
        tcp_user_timeout = pg::settings::TCP_USER_TIMEOUT.as_secs_f64(),
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        version: u16,
        required: u16,
        lock_wait: f64,
        lock_tries: u32,
        idle_in_transaction: f64,
        statement_timeout: f64,
        connect_timeout: f64,
        keepalives: bool,
        keepalives_idle: f64,
        keepalives_interval: f64,
        keepalives_count: u32,
        tcp_user_timeout: f64,
    ) -> PyResult<Self> {
        let mut s = Settings::new();
        s.version(version)
            .required(required)
            .lock_wait(seconds("lock_wait", lock_wait)?)
            .lock_tries(lock_tries)
            .idle_in_transaction(seconds("idle_in_transaction", idle_in_transaction)?)
            .statement_timeout(seconds("statement_timeout", statement_timeout)?)
            .connect_timeout(seconds("connect_timeout", connect_timeout)?)
            .keepalives(keepalives)
            .keepalives_idle(seconds("keepalives_idle", keepalives_idle)?)
            .keepalives_interval(seconds("keepalives_interval", keepalives_interval)?)
            .keepalives_count(keepalives_count)
            .server_keepalives_idle(seconds("keepalives_idle", keepalives_idle)?)
            .server_keepalives_interval(seconds("keepalives_interval", keepalives_interval)?)
            .server_keepalives_count(keepalives_count)
            .tcp_user_timeout(seconds("tcp_user_timeout", tcp_user_timeout)?);
        s.validate()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PySettings { inner: s })
    }

    /// The libpq `options` string the session sends (`-c lock_timeout=10s ...`).
    #[getter]
    fn startup_options(&self) -> String {
        self.inner.startup_options()
    }

    /// The writer version.
    #[getter]
    fn version(&self) -> u16 {
        self.inner.get_version()
    }

    /// The floor stored at schema setup.
    #[getter]
    fn required(&self) -> u16 {
        self.inner.get_required()
    }

    /// One wait for the writer lock, in seconds.
    #[getter]
    fn lock_wait(&self) -> f64 {
        self.inner.get_lock_wait().as_secs_f64()
    }

    /// How many waits for the writer lock.
    #[getter]
    fn lock_tries(&self) -> u32 {
        self.inner.get_lock_tries()
    }

    /// The idle limit inside a transaction, in seconds.
    #[getter]
    fn idle_in_transaction(&self) -> f64 {
        self.inner.get_idle_in_transaction().as_secs_f64()
    }

    /// The statement limit, in seconds.
    #[getter]
    fn statement_timeout(&self) -> f64 {
        self.inner.get_statement_timeout().as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!("<writerlock PgSettings {}>", self.inner.startup_options())
    }
}

enum Slot {
    Open(Box<Connection>),
    Gone(&'static str),
}

/// One session with the ledger database (the native half of `writerlock.postgres.Connection`).
#[pyclass(module = "writerlock._native", name = "PgSession", frozen)]
pub struct PgSession {
    slot: Mutex<Slot>,
    /// The serial of the last transaction `execute(begin=True)` opened (0: none).
    implicit: AtomicU64,
    /// Counts what may have changed the session's `TimeZone` (see `zone_epoch`).
    zone_epoch: AtomicU64,
    /// The transaction a statement that may change the `TimeZone` ran in (0: none), whose
    /// end may change it again (`SET LOCAL` ends with it, a rollback undoes a `SET`).
    zone_tx: AtomicU64,
    pid: i32,
    address: String,
}

/// The refused writers as `(writer, pid, version, floor)` tuples.
pub(crate) type RefusedTuple = (String, i32, i64, i64);

fn refused_tuples(refused: &[RefusedWriter]) -> Vec<RefusedTuple> {
    refused
        .iter()
        .map(|r| (r.writer.clone(), r.pid, r.version, r.floor))
        .collect()
}

/// A write transaction `open_write` started: `(serial, waits, floor, refused)`.
pub(crate) type OpenedWrite = (u64, u32, Option<i64>, Vec<RefusedTuple>);

/// A setting check as `(name, sent, shown, status)`.
type CheckTuple = (String, String, Option<String>, &'static str);

/// How many rows are read before they become Python tuples, the interpreter taken once.
const ROW_BATCH: usize = 1000;

/// What a statement gives the Python cursor: its columns (`description`, `None` for a
/// statement without result columns), rows, `rowcount` and `lastrowid`.
pub(crate) type Described<'py> = (Py<PyAny>, Bound<'py, PyList>, i64, Option<Py<PyAny>>);

impl PgSession {
    fn from_connection(conn: Connection) -> PgSession {
        PgSession {
            pid: conn.pid(),
            address: conn.address().to_string(),
            slot: Mutex::new(Slot::Open(Box::new(conn))),
            implicit: AtomicU64::new(0),
            zone_epoch: AtomicU64::new(0),
            zone_tx: AtomicU64::new(0),
        }
    }

    /// Notes a statement that ran (or failed) on `c`: one that may change the `TimeZone`
    /// moves the zone epoch now and, inside a transaction, again when it ends.
    fn note_zone(&self, c: &Connection, sql: &str) {
        if dbapi::may_change_zone(sql) {
            self.zone_epoch.fetch_add(1, Ordering::Relaxed);
            if c.in_transaction() {
                self.zone_tx
                    .store(c.transaction_serial(), Ordering::Relaxed);
            }
        }
    }

    /// Opens the implicit transaction when none is open, and remembers it.
    fn begin_implicit(&self, c: &mut Connection) -> Result<(), pg::Error> {
        if !c.in_transaction() {
            c.begin()?;
            self.implicit
                .store(c.transaction_serial(), Ordering::Relaxed);
        }
        Ok(())
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// See `release_for_write`.
    fn make_way(&self, c: &mut Connection) -> Result<bool, pg::Error> {
        let serial = self.implicit.load(Ordering::Relaxed);
        if serial == 0 || !c.in_transaction_serial(serial) {
            return Ok(true);
        }
        let rows = c.execute("SELECT txid_current_if_assigned() IS NULL", &[])?;
        let read_only = rows
            .first()
            .and_then(|r| r.get(0))
            .and_then(pg::Value::as_bool)
            .unwrap_or(false);
        if read_only {
            c.rollback()?;
        }
        Ok(read_only)
    }

    /// Runs `f` on the connection with the interpreter released.
    fn with<T, F>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&mut Connection) -> Result<T, pg::Error> + Send,
    {
        self.with_raw(py, f).map_err(|e| pg_error(py, e))
    }

    /// [`with`](Self::with), giving the core's error as it is.
    fn with_raw<T, F>(&self, py: Python<'_>, f: F) -> Result<T, pg::Error>
    where
        T: Send,
        F: FnOnce(&mut Connection) -> Result<T, pg::Error> + Send,
    {
        py.detach(|| match &mut *self.slot() {
            Slot::Open(conn) => f(conn),
            Slot::Gone(reason) => Err(pg::Error::Closed {
                reason: (*reason).to_string(),
            }),
        })
    }

    /// Takes the connection out (for a pool), leaving the session closed for `reason`.
    fn take(&self, reason: &'static str) -> Option<Connection> {
        let mut slot = self.slot();
        if matches!(*slot, Slot::Gone(_)) {
            return None;
        }
        match std::mem::replace(&mut *slot, Slot::Gone(reason)) {
            Slot::Open(conn) => Some(*conn),
            Slot::Gone(_) => None,
        }
    }
}

#[pymethods]
impl PgSession {
    /// Opens a session at `dsn` with `settings` and checks that every startup setting took
    /// effect.
    #[staticmethod]
    fn connect(py: Python<'_>, dsn: &str, settings: &PySettings) -> PyResult<PgSession> {
        let settings = settings.inner.clone();
        let dsn = dsn.to_owned();
        py.detach(move || Connection::connect(&dsn, &settings))
            .map(PgSession::from_connection)
            .map_err(|e| pg_error(py, e))
    }

    /// Runs one statement with `?` or `$n` placeholders; returns `(description, rows,
    /// rowcount, lastrowid)` (see [`Described`]). A statement written with
    /// psycopg's `%s` placeholders raises `ProgrammingError` saying to write `?`, before
    /// anything is sent when parameters are given for them.
    ///
    /// With `within`, the statement runs only while the transaction numbered `within` (see
    /// `transaction_serial`) is still open; otherwise it fails and nothing runs. With
    /// `begin`, a transaction is opened first when none is open (the connection's implicit
    /// transaction, PEP 249's default).
    #[pyo3(signature = (sql, params = None, within = None, begin = false))]
    pub(crate) fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: &str,
        params: Option<&Bound<'py, PyAny>>,
        within: Option<u64>,
        begin: bool,
    ) -> PyResult<Described<'py>> {
        dbapi::check_pyformat(sql, params)?;
        let values = to_values(params)?;
        // Rows become Python tuples a batch at a time while the rest are still being read,
        // so the result is never held twice (once as core values, once in Python).
        let list = PyList::empty(py).unbind();
        let mut batch: Vec<pg::Row> = Vec::new();
        let mut failure: Option<PyErr> = None;
        let mut flush = |columns: &[pg::Column], batch: &mut Vec<pg::Row>| {
            Python::attach(|py| {
                let list = list.bind(py);
                for row in batch.drain(..) {
                    if failure.is_some() {
                        continue;
                    }
                    let converted = row_to_py(py, row.into_values(), columns)
                        .and_then(|tuple| list.append(tuple));
                    if let Err(err) = converted {
                        failure = Some(err);
                    }
                }
            });
        };
        let ran = self.with_raw(py, |c| {
            if let Some(serial) = within {
                if !c.in_transaction_serial(serial) {
                    return Err(pg::Error::WriteEnded);
                }
            }
            if begin {
                self.begin_implicit(c)?;
            }
            let mut last: Vec<pg::Column> = Vec::new();
            let ran = c.execute_each(sql, &values, &mut |columns, row| {
                batch.push(row);
                if batch.len() >= ROW_BATCH {
                    flush(columns, &mut batch);
                }
                if last.is_empty() {
                    last = columns.to_vec();
                }
                Ok(())
            });
            self.note_zone(c, sql);
            let (columns, affected) = ran?;
            if !batch.is_empty() {
                flush(&last, &mut batch);
            }
            Ok((columns, affected))
        });
        let (columns, affected) = match ran {
            Ok(ran) => ran,
            Err(err) => {
                let sqlstate = err.code().map(|c| c.code().to_string());
                let raised = pg_error(py, err);
                return Err(dbapi::explain_syntax_error(
                    py,
                    sql,
                    sqlstate.as_deref(),
                    raised,
                ));
            }
        };
        // A value Python cannot hold (after the whole result was read: the session is in
        // step, and the statement itself succeeded).
        if let Some(err) = failure {
            return Err(err);
        }
        let list = list.into_bound(py);
        let affected = i64::try_from(affected).unwrap_or(i64::MAX);
        let description: Py<PyAny> = if columns.is_empty() {
            py.None()
        } else {
            let items = columns
                .iter()
                .map(|c| {
                    PyTuple::new(
                        py,
                        [
                            c.name().into_pyobject(py)?.into_any(),
                            c.type_name().into_pyobject(py)?.into_any(),
                            py.None().into_bound(py),
                            py.None().into_bound(py),
                            py.None().into_bound(py),
                            py.None().into_bound(py),
                            py.None().into_bound(py),
                        ],
                    )
                })
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any().unbind()
        };
        let rowcount = if !columns.is_empty() {
            i64::try_from(list.len()).unwrap_or(i64::MAX)
        } else if dbapi::counts_rows(sql) {
            affected
        } else {
            -1
        };
        let lastrowid = if columns.len() == 1 && list.len() == 1 && dbapi::is_insert(sql) {
            let value = list.get_item(0)?.get_item(0)?;
            (value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>())
                .then(|| value.unbind())
        } else {
            None
        };
        Ok((description, list, rowcount, lastrowid))
    }

    /// Runs a script of statements without parameters (the simple query protocol); with
    /// `within`, only inside that transaction, with `begin`, inside the implicit
    /// transaction (see `execute`).
    #[pyo3(signature = (sql, within = None, begin = false))]
    fn execute_batch(
        &self,
        py: Python<'_>,
        sql: &str,
        within: Option<u64>,
        begin: bool,
    ) -> PyResult<()> {
        self.with(py, |c| {
            if let Some(serial) = within {
                if !c.in_transaction_serial(serial) {
                    return Err(pg::Error::WriteEnded);
                }
            }
            if begin {
                self.begin_implicit(c)?;
            }
            let ran = c.execute_batch(sql);
            self.note_zone(c, sql);
            ran
        })
    }

    /// Runs `sql` once per parameter sequence of `seq_of_params`, many statements to a
    /// message (see `writerlock::pg::many`); returns the rows changed in all (-1 when the statement counts no rows). `within` and
    /// `begin` as for `execute`.
    #[pyo3(signature = (sql, seq_of_params, within = None, begin = false))]
    fn execute_many<'py>(
        &self,
        py: Python<'py>,
        sql: &str,
        seq_of_params: &Bound<'py, PyAny>,
        within: Option<u64>,
        begin: bool,
    ) -> PyResult<i64> {
        let mut rows = Vec::new();
        for params in seq_of_params.try_iter()? {
            let params = params?;
            if rows.is_empty() {
                dbapi::check_pyformat(sql, Some(&params))?;
            }
            rows.push(to_values(Some(&params))?);
        }
        self.with(py, |c| {
            if let Some(serial) = within {
                if !c.in_transaction_serial(serial) {
                    return Err(pg::Error::WriteEnded);
                }
            }
            if begin {
                self.begin_implicit(c)?;
            }
            let ran = c.execute_many(sql, &rows);
            self.note_zone(c, sql);
            ran
        })
        .map(|changed| {
            if dbapi::counts_rows(sql) {
                i64::try_from(changed).unwrap_or(i64::MAX)
            } else {
                -1
            }
        })
    }

    /// Makes way for a write's transaction, whose first statement must be the writer lock:
    /// an implicit transaction (opened by `execute(begin=True)`) that wrote nothing (the
    /// server assigned it no transaction id) is rolled back, losing nothing. Returns `False`
    /// when the open implicit transaction has uncommitted changes (left as they are), `True`
    /// otherwise.
    fn release_for_write(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |c| self.make_way(c))
    }

    /// Opens a write transaction in one call: makes way for it as `release_for_write`
    /// does, then starts it as `begin_write` does. Returns `None` (and starts nothing) when
    /// the open implicit transaction has uncommitted changes, else `(serial, waits, floor,
    /// refused)` with the write transaction's number (see `transaction_serial`).
    pub(crate) fn open_write(&self, py: Python<'_>) -> PyResult<Option<OpenedWrite>> {
        let started = self.with(py, |c| {
            if !self.make_way(c)? {
                return Ok(None);
            }
            let start = c.begin_write()?;
            Ok(Some((c.transaction_serial(), start)))
        })?;
        Ok(started.map(|(serial, start)| {
            (
                serial,
                start.waits(),
                start.floor(),
                refused_tuples(start.refused()),
            )
        }))
    }

    /// A number that moves whenever the session's `TimeZone` may have changed since it was
    /// last read: after a statement that may set it (`SET TIME ZONE`, `RESET`, `DISCARD`...)
    /// and again after the transaction it ran in ended. A cached zone read at the same
    /// number is still the session's.
    #[getter]
    fn zone_epoch(&self, py: Python<'_>) -> u64 {
        let tx = self.zone_tx.load(Ordering::Relaxed);
        if tx != 0 {
            let ended = py.detach(|| match &*self.slot() {
                Slot::Open(conn) => !conn.in_transaction_serial(tx),
                Slot::Gone(_) => true,
            });
            if ended {
                self.zone_tx.store(0, Ordering::Relaxed);
                self.zone_epoch.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.zone_epoch.load(Ordering::Relaxed)
    }

    /// Whether the open transaction is the implicit one `execute(begin=True)` opened.
    #[getter]
    fn in_implicit_transaction(&self, py: Python<'_>) -> bool {
        let serial = self.implicit.load(Ordering::Relaxed);
        py.detach(|| match &*self.slot() {
            Slot::Open(conn) => serial != 0 && conn.in_transaction_serial(serial),
            Slot::Gone(_) => false,
        })
    }

    /// The number of the transaction opened last on this session.
    #[getter]
    fn transaction_serial(&self, py: Python<'_>) -> u64 {
        py.detach(|| match &*self.slot() {
            Slot::Open(conn) => conn.transaction_serial(),
            Slot::Gone(_) => 0,
        })
    }

    /// Opens a transaction.
    fn begin(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.begin())
    }

    /// Commits the open transaction (nothing when none is open).
    pub(crate) fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.commit())
    }

    /// Rolls back the open transaction (nothing when none is open).
    pub(crate) fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.rollback())
    }

    /// Takes the writer lock as the transaction's first statement; returns the waits taken.
    fn lock_writer(&self, py: Python<'_>) -> PyResult<u32> {
        self.with(py, |c| c.lock_writer())
    }

    /// Sets up the floor schema, running `extra_sql` first, and stores the required floor.
    #[pyo3(signature = (extra_sql = None))]
    fn setup_schema(&self, py: Python<'_>, extra_sql: Option<&str>) -> PyResult<()> {
        self.with(py, |c| pg::setup_schema(c, extra_sql))
    }

    /// The refused writers still connected, as `(writer, pid, version, floor)` tuples.
    fn refused_writers(&self, py: Python<'_>) -> PyResult<Vec<RefusedTuple>> {
        let refused = self.with(py, pg::refused_writers)?;
        Ok(refused_tuples(&refused))
    }

    /// The stored floor, or `None` when the database stores none.
    fn stored_floor(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.with(py, pg::stored_floor)
    }

    /// What `SHOW name` prints on this session (`None` for an unset custom setting).
    fn show(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        self.with(py, |c| c.show(name))
    }

    /// Every startup setting as `(name, sent, shown, status)`, status one of `in effect`,
    /// `not in effect`, `not applicable`.
    fn check_settings(&self, py: Python<'_>) -> PyResult<Vec<CheckTuple>> {
        let checks = self.with(py, |c| c.check_settings())?;
        Ok(checks
            .into_iter()
            .map(|c| {
                let status = match c.status {
                    SettingStatus::InEffect => "in effect",
                    SettingStatus::NotInEffect => "not in effect",
                    SettingStatus::NotApplicable => "not applicable",
                };
                (c.name, c.sent, c.shown, status)
            })
            .collect())
    }

    /// Raises `SettingNotInEffect` naming the first startup setting the server does not
    /// report (the check `connect` makes).
    fn verify_settings(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.verify_settings())
    }

    /// Closes the session; an open transaction rolls back on the server. Closing twice does
    /// nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match py.detach(|| self.take("close() was called")) {
            Some(conn) => py.detach(|| conn.close()).map_err(|e| pg_error(py, e)),
            None => Ok(()),
        }
    }

    /// Whether a transaction is open.
    /// (The interpreter is released while another thread's call holds the session.)
    #[getter]
    fn in_transaction(&self, py: Python<'_>) -> bool {
        py.detach(|| match &*self.slot() {
            Slot::Open(conn) => conn.in_transaction(),
            Slot::Gone(_) => false,
        })
    }

    /// Whether the session is closed, given back to its pool, or was lost. (The interpreter
    /// is released while another thread's call holds the session.)
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| match &*self.slot() {
            Slot::Open(conn) => conn.is_closed(),
            Slot::Gone(_) => true,
        })
    }

    /// The server process id of the session.
    #[getter]
    fn pid(&self) -> i32 {
        self.pid
    }

    /// The address, without its password.
    #[getter]
    fn address(&self) -> &str {
        &self.address
    }
}

/// A bounded pool of sessions to one address.
#[pyclass(module = "writerlock._native", name = "PgPool", frozen)]
pub struct PyPool {
    inner: Pool,
}

#[pymethods]
impl PyPool {
    #[new]
    #[pyo3(signature = (dsn, settings, size = pg::DEFAULT_POOL_SIZE))]
    fn new(py: Python<'_>, dsn: &str, settings: &PySettings, size: usize) -> PyResult<Self> {
        Pool::new(dsn, settings.inner.clone(), size)
            .map(|inner| PyPool { inner })
            .map_err(|e| pg_error(py, e))
    }

    /// An idle session that is still open, or a new one.
    fn take(&self, py: Python<'_>) -> PyResult<PgSession> {
        let pool = &self.inner;
        py.detach(|| pool.take())
            .map(PgSession::from_connection)
            .map_err(|e| pg_error(py, e))
    }

    /// Takes a session back (rolling back its transaction); the Python object is closed
    /// afterwards. A session already closed is dropped. A session to another address or
    /// with other settings is refused (and closed).
    fn give(&self, py: Python<'_>, session: &PgSession) -> PyResult<()> {
        let pool = &self.inner;
        py.detach(|| match session.take("it was given back to its pool") {
            Some(conn) => pool.give(conn),
            None => Ok(()),
        })
        .map_err(|e| pg_error(py, e))
    }

    /// How many idle sessions the pool keeps now.
    #[getter]
    fn idle_count(&self) -> usize {
        self.inner.idle_count()
    }

    /// The most idle sessions it keeps.
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// The address, without its password.
    #[getter]
    fn address(&self) -> String {
        self.inner.address().to_string()
    }
}

/// The alert texts to raise on a ledger, given the refused writers as `(writer, pid,
/// version, floor)` and the ledger's alerts as `(text, open)`, oldest first.
#[pyfunction]
fn pg_new_alerts(refused: Vec<RefusedTuple>, existing: Vec<(String, bool)>) -> Vec<String> {
    let refused: Vec<RefusedWriter> = refused
        .into_iter()
        .map(|(writer, pid, version, floor)| RefusedWriter {
            writer,
            pid,
            version,
            floor,
        })
        .collect();
    let existing: Vec<Alert> = existing
        .into_iter()
        .map(|(text, open)| Alert { text, open })
        .collect();
    pg::new_alerts(&refused, &existing)
}

/// The alert text for a refused writer at `writer`.
#[pyfunction]
fn pg_alert_text(writer: &str, version: i64, floor: i64) -> String {
    pg::alert_text(writer, version, floor)
}

/// The refusal text for a writer `version` below `floor`.
#[pyfunction]
fn pg_refusal_message(version: i64, floor: i64) -> String {
    pg::refusal_message(version, floor)
}

/// Translates `?` placeholders to `$1..$n` outside literals and comments.
#[pyfunction]
fn pg_translate(sql: &str) -> String {
    pg::translate(sql).into_owned()
}

/// Adds the Postgres session, its functions and constants to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySettings>()?;
    m.add_class::<PgSession>()?;
    m.add_class::<PyPool>()?;
    m.add_function(wrap_pyfunction!(pg_new_alerts, m)?)?;
    m.add_function(wrap_pyfunction!(pg_alert_text, m)?)?;
    m.add_function(wrap_pyfunction!(pg_refusal_message, m)?)?;
    m.add_function(wrap_pyfunction!(pg_translate, m)?)?;
    m.add("PG_WRITER_LOCK", pg::WRITER_LOCK)?;
    m.add("PG_LOCK_WAIT", pg::LOCK_WAIT.as_secs_f64())?;
    m.add("PG_LOCK_TRIES", pg::LOCK_TRIES)?;
    m.add(
        "PG_IDLE_IN_TRANSACTION",
        pg::IDLE_IN_TRANSACTION.as_secs_f64(),
    )?;
    m.add("PG_STATEMENT_TIMEOUT", pg::STATEMENT_TIMEOUT.as_secs_f64())?;
    m.add(
        "PG_CONNECT_TIMEOUT",
        pg::settings::CONNECT_TIMEOUT.as_secs_f64(),
    )?;
    m.add("PG_KEEPALIVES", pg::settings::KEEPALIVES)?;
    m.add(
        "PG_KEEPALIVES_IDLE",
        pg::settings::KEEPALIVES_IDLE.as_secs_f64(),
    )?;
    m.add(
        "PG_KEEPALIVES_INTERVAL",
        pg::settings::KEEPALIVES_INTERVAL.as_secs_f64(),
    )?;
    m.add("PG_KEEPALIVES_COUNT", pg::settings::KEEPALIVES_COUNT)?;
    m.add(
        "PG_TCP_USER_TIMEOUT",
        pg::settings::TCP_USER_TIMEOUT.as_secs_f64(),
    )?;
    m.add("PG_VERSION", pg::VERSION)?;
    m.add("PG_REQUIRED", pg::REQUIRED)?;
    m.add("PG_SESSION", pg::SESSION.to_vec())?;
    m.add("PG_VERSION_SETTING", pg::VERSION_SETTING)?;
    m.add("PG_REFUSED_SQLSTATE", pg::REFUSED_SQLSTATE)?;
    m.add("PG_REFUSED_LOCK_CLASS", pg::REFUSED_LOCK_CLASS)?;
    m.add("PG_REFUSED_LOCK_SUBID", pg::REFUSED_LOCK_SUBID)?;
    m.add("PG_FLOOR_NAME", pg::FLOOR_NAME)?;
    m.add("PG_KEPT_CLOSED_ALERTS", pg::KEPT_CLOSED_ALERTS)?;
    m.add("PG_UNSEEN_CLIENT", pg::UNSEEN_CLIENT)?;
    m.add("PG_DEFAULT_POOL_SIZE", pg::DEFAULT_POOL_SIZE)?;
    Ok(())
}
