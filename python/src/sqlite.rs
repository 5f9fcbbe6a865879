//! `WriterQueue`: the SQLite write queue for Python `sqlite3.Connection` objects.
//!
//! The core drives the connection through [`SqliteSession`], implemented here by
//! [`PySession`]: each method re-attaches to the interpreter and calls the connection
//! (`conn.execute(sql)`, `PRAGMA busy_timeout = N`, `conn.in_transaction`). The core's
//! `begin`, `commit`, `rollback` and `execute` run inside `Python::detach`, so the
//! interpreter is free while a writer waits for its turn.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use writerlock::wait::{BUSY_SETTING, TRANSACTION_SETTING};
use writerlock::{Error as WlError, SqliteFailure, SqliteSession, Strategy, Wait, WriterQueue};

use crate::errors::{failure_of, queue_error, NotAutocommit};

/// A Python `sqlite3.Connection` seen by the core queue.
///
/// Holds the connection (and, for a queued statement, its parameters) as owned references,
/// so it can cross into `Python::detach`; every call re-attaches to the interpreter. The
/// exception Python raised last and the cursor of the last statement are kept for the caller.
pub struct PySession {
    conn: Py<PyAny>,
    params: Option<Py<PyAny>>,
    error: Mutex<Option<PyErr>>,
    cursor: Mutex<Option<Py<PyAny>>>,
}

impl PySession {
    /// A session over `conn`; `params` are bound to the statements run through
    /// [`SqliteSession::exec`] (only for a queued statement, never for BEGIN or COMMIT).
    pub fn new(conn: &Bound<'_, PyAny>, params: Option<&Bound<'_, PyAny>>) -> PySession {
        PySession {
            conn: conn.clone().unbind(),
            params: params.map(|p| p.clone().unbind()),
            error: Mutex::new(None),
            cursor: Mutex::new(None),
        }
    }

    fn remember(&self, py: Python<'_>, err: PyErr) -> SqliteFailure {
        let failure = failure_of(py, &err);
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
        failure
    }

    /// The exception Python raised in the last failed call, if any.
    pub fn take_error(&self) -> Option<PyErr> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The cursor of the last statement run.
    pub fn take_cursor(&self) -> Option<Py<PyAny>> {
        self.cursor.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Turns a core error into its Python exception, chaining what Python raised.
    pub fn raise(&self, py: Python<'_>, err: WlError) -> PyErr {
        queue_error(py, err, self.take_error())
    }
}

impl SqliteSession for PySession {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        Python::attach(|py| {
            let conn = self.conn.bind(py);
            let execute = intern!(py, "execute");
            let result = match &self.params {
                Some(params) => conn.call_method1(execute, (sql, params.bind(py))),
                None => conn.call_method1(execute, (sql,)),
            };
            match result {
                Ok(cursor) => {
                    *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = Some(cursor.unbind());
                    Ok(())
                }
                Err(err) => Err(self.remember(py, err)),
            }
        })
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        let millis = timeout.as_millis().min(i32::MAX as u128);
        Python::attach(|py| {
            let sql = format!("PRAGMA busy_timeout = {millis}");
            match self
                .conn
                .bind(py)
                .call_method1(intern!(py, "execute"), (sql,))
            {
                Ok(_) => Ok(()),
                Err(err) => Err(self.remember(py, err)),
            }
        })
    }

    fn in_transaction(&self) -> Option<bool> {
        Python::attach(|py| {
            self.conn
                .bind(py)
                .getattr(intern!(py, "in_transaction"))
                .and_then(|v| v.extract::<bool>())
                .ok()
        })
    }
}

/// Refuses anything but a `sqlite3.Connection` (or subclass), with a clear `TypeError`.
fn check_type(conn: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = conn.py();
    let class = py
        .import(intern!(py, "sqlite3"))?
        .getattr(intern!(py, "Connection"))?;
    if conn.is_instance(&class)? {
        return Ok(());
    }
    let type_name = conn
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_string());
    Err(PyTypeError::new_err(format!(
        "conn must be a sqlite3.Connection (open it with sqlite3.connect(path, \
         isolation_level=None)), not {type_name}"
    )))
}

/// Checks that `conn` is an open `sqlite3.Connection` in autocommit mode. A closed
/// connection raises Python's own `sqlite3.ProgrammingError`; one where Python opens
/// transactions itself raises `NotAutocommit`, saying how to open it.
fn check_connection(conn: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = conn.py();
    check_type(conn)?;
    // Reading `in_transaction` fails on a closed connection with Python's own message.
    conn.getattr(intern!(py, "in_transaction"))?;
    // Python 3.12: `autocommit` is True, False or sqlite3.LEGACY_TRANSACTION_CONTROL (-1).
    if let Ok(autocommit) = conn.getattr(intern!(py, "autocommit")) {
        if autocommit.is_instance_of::<pyo3::types::PyBool>() {
            if autocommit.extract::<bool>()? {
                return Ok(());
            }
            return Err(NotAutocommit::new_err(
                "writerlock needs a sqlite3 connection in autocommit mode, but this one was \
                 opened with autocommit=False, so Python keeps a transaction of its own open; \
                 open it with sqlite3.connect(path, isolation_level=None)",
            ));
        }
    }
    let level = conn.getattr(intern!(py, "isolation_level"))?;
    if level.is_none() {
        return Ok(());
    }
    let shown = level.repr().map(|r| r.to_string()).unwrap_or_default();
    let begin = match level.extract::<String>() {
        Ok(text) if text.is_empty() => "a deferred BEGIN, Python's default".to_string(),
        Ok(text) => format!("BEGIN {text}"),
        Err(_) => "a BEGIN".to_string(),
    };
    Err(NotAutocommit::new_err(format!(
        "writerlock needs a sqlite3 connection in autocommit mode, but this one has \
         isolation_level {shown}, so Python would open a transaction of its own ({begin}) \
         before the first write, outside the writer queue; open it with \
         sqlite3.connect(path, isolation_level=None) or set conn.isolation_level = None"
    )))
}

fn seconds(name: &'static str, value: f64) -> PyResult<Duration> {
    Wait::seconds(name, value).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A process's handle on one SQLite database's write queue.
///
/// `WriterQueue(path)`: the lock files `<path>.writer-lock` and `<path>.writer-queue` open at
/// the first turn. Fork-safe: a forked child never touches its parent's turn and opens its
/// own files. Two handles exclude each other like two processes; one handle shared by
/// threads makes the second thread wait for the first.
#[pyclass(module = "writerlock", name = "WriterQueue", subclass, frozen)]
pub struct PyWriterQueue {
    inner: WriterQueue,
}

#[pymethods]
impl PyWriterQueue {
    #[new]
    #[pyo3(signature = (path, *, strategy = "handoff"))]
    fn new(path: PathBuf, strategy: &str) -> PyResult<Self> {
        let strategy = match strategy {
            "handoff" => Strategy::Handoff,
            "poll" => Strategy::Poll,
            other => {
                return Err(PyValueError::new_err(format!(
                    "strategy must be \"handoff\" or \"poll\", not {other:?}"
                )))
            }
        };
        Ok(PyWriterQueue {
            inner: WriterQueue::with_strategy(path, strategy),
        })
    }

    /// Waits up to `wait` seconds for the writer turn, sets the connection's busy timeout to
    /// the time left and runs `BEGIN IMMEDIATE`.
    #[pyo3(signature = (conn, wait = 25.0, setting = None))]
    fn begin(
        &self,
        py: Python<'_>,
        conn: &Bound<'_, PyAny>,
        wait: f64,
        setting: Option<String>,
    ) -> PyResult<()> {
        check_connection(conn)?;
        let wait = Wait::transaction(seconds("wait", wait)?)
            .with_setting(setting.unwrap_or_else(|| TRANSACTION_SETTING.to_string()));
        let session = PySession::new(conn, None);
        let queue = &self.inner;
        py.detach(|| queue.begin(&session, &wait))
            .map_err(|e| session.raise(py, e))
    }

    /// Commits and gives the turn back.
    fn commit(&self, py: Python<'_>, conn: &Bound<'_, PyAny>) -> PyResult<()> {
        check_type(conn)?;
        let session = PySession::new(conn, None);
        let queue = &self.inner;
        py.detach(|| queue.commit(&session))
            .map_err(|e| session.raise(py, e))
    }

    /// Rolls back and gives the turn back.
    fn rollback(&self, py: Python<'_>, conn: &Bound<'_, PyAny>) -> PyResult<()> {
        check_type(conn)?;
        let session = PySession::new(conn, None);
        let queue = &self.inner;
        py.detach(|| queue.rollback(&session))
            .map_err(|e| session.raise(py, e))
    }

    /// Runs one write statement in turn, waiting up to `busy_timeout` seconds; reads and
    /// statements inside an open transaction run at once. Returns the `sqlite3.Cursor`.
    #[pyo3(signature = (conn, sql, params = None, busy_timeout = 5.0, setting = None))]
    fn execute(
        &self,
        py: Python<'_>,
        conn: &Bound<'_, PyAny>,
        sql: &Bound<'_, PyString>,
        params: Option<&Bound<'_, PyAny>>,
        busy_timeout: f64,
        setting: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        check_connection(conn)?;
        let sql = sql.to_str()?.to_owned();
        let wait = Wait::statement(seconds("busy_timeout", busy_timeout)?)
            .with_setting(setting.unwrap_or_else(|| BUSY_SETTING.to_string()));
        let empty;
        let params = match params {
            Some(p) => p,
            None => {
                empty = PyTuple::empty(py);
                empty.as_any()
            }
        };
        let session = PySession::new(conn, Some(params));
        let queue = &self.inner;
        py.detach(|| queue.execute(&session, &sql, &wait))
            .map_err(|e| session.raise(py, e))?;
        match session.take_cursor() {
            Some(cursor) => Ok(cursor),
            None => Ok(py.None()),
        }
    }

    /// Whether this handle holds the writer turn (in this process).
    #[getter]
    fn holding(&self) -> bool {
        self.inner.holding()
    }

    /// How long the last turn waited before it was granted, in seconds.
    #[getter]
    fn last_wait(&self) -> f64 {
        self.inner.last_wait().as_secs_f64()
    }

    /// The database this queue serves.
    #[getter]
    fn database(&self) -> PathBuf {
        self.inner.database().to_path_buf()
    }

    /// The waiting strategy: `"handoff"` or `"poll"`.
    #[getter]
    fn strategy(&self) -> &'static str {
        match self.inner.strategy() {
            Strategy::Handoff => "handoff",
            Strategy::Poll => "poll",
        }
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let inner = &slf.get().inner;
        Ok(format!(
            "<writerlock.WriterQueue {:?} holding={}>",
            inner.database().display().to_string(),
            if inner.holding() { "True" } else { "False" }
        ))
    }

    /// Pickles as the class and the database path (a spawned process opens its own queue).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let inner = &slf.get().inner;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("strategy", slf.get().strategy())?;
        let functools = py.import(intern!(py, "functools"))?;
        let partial = functools
            .getattr(intern!(py, "partial"))?
            .call((slf.get_type(),), Some(&kwargs))?;
        PyTuple::new(
            py,
            [
                partial.into_any(),
                PyTuple::new(py, [inner.database().to_path_buf()])?.into_any(),
            ],
        )
    }
}

/// Adds the SQLite queue and its constants to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use writerlock::wait;
    m.add_class::<PyWriterQueue>()?;
    m.add("TRANSACTION_WAIT", wait::TRANSACTION_WAIT.as_secs_f64())?;
    m.add(
        "CLI_TRANSACTION_WAIT",
        wait::CLI_TRANSACTION_WAIT.as_secs_f64(),
    )?;
    m.add("BUSY_TIMEOUT", wait::BUSY_TIMEOUT.as_secs_f64())?;
    m.add("CLI_BUSY_TIMEOUT", wait::CLI_BUSY_TIMEOUT.as_secs_f64())?;
    m.add("TRANSACTION_SETTING", wait::TRANSACTION_SETTING)?;
    m.add("CLI_TRANSACTION_SETTING", wait::CLI_TRANSACTION_SETTING)?;
    m.add("BUSY_SETTING", wait::BUSY_SETTING)?;
    m.add("CLI_BUSY_SETTING", wait::CLI_BUSY_SETTING)?;
    m.add("LOCK_SUFFIX", writerlock::lockfiles::LOCK_SUFFIX)?;
    m.add("QUEUE_SUFFIX", writerlock::lockfiles::QUEUE_SUFFIX)?;
    Ok(())
}
