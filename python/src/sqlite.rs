//! `WriterQueue`: the SQLite write queue for Python `sqlite3.Connection` objects.
//!
//! The core drives the connection through [`SqliteSession`], implemented here by
//! [`PySession`]: each method re-attaches to the interpreter and calls the connection
//! (`conn.execute(sql)`, `PRAGMA busy_timeout`, `PRAGMA database_list`,
//! `conn.in_transaction`). The core's `begin`, `commit`, `rollback`, `execute` and `take` run
//! inside `Python::detach`, so the interpreter is free while a writer waits for its turn, and
//! every wait runs Python's signal handlers (see [`Signals`]) so Ctrl-C ends it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyDeprecationWarning, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};

use writerlock::wait::Interrupt;
use writerlock::{
    BusyKind, Error as WlError, SqliteFailure, SqliteSession, Strategy, Wait, WriterQueue,
};

use crate::errors::{failure_of, queue_error, NotAutocommit, ProgrammingError};

/// The setting a busy message names when the limit came from the `wait` argument.
pub const WAIT_ARGUMENT: &str = "the wait argument";
/// The setting a busy message names when the limit came from the deprecated `busy_timeout`
/// argument.
pub const BUSY_TIMEOUT_ARGUMENT: &str = "the busy_timeout argument";

/// Python's signal handlers, run while a writer waits.
///
/// A wait of the core asks its [`Interrupt`] at least every 10 ms; this one attaches to the
/// interpreter and calls `PyErr_CheckSignals`, which runs the handlers of signals that
/// arrived (only in the main thread, as Python always does). A handler that raises
/// (`KeyboardInterrupt` for Ctrl-C, the program's own exception for SIGTERM) ends the wait:
/// the turn is not taken, nothing was written, and that exception is raised instead of the
/// core's `Interrupted`.
#[derive(Clone, Default)]
pub struct Signals {
    raised: Arc<Mutex<Option<PyErr>>>,
}

impl Signals {
    /// `wait` with Python's signal check as its interrupt, when the caller is Python's main
    /// thread: Python runs signal handlers only there, so a wait in another thread needs no
    /// check (and never takes the interpreter lock for one).
    pub fn watch(&self, py: Python<'_>, wait: Wait) -> Wait {
        if !on_main_thread(py) {
            return wait;
        }
        let raised = Arc::clone(&self.raised);
        wait.with_interrupt(Interrupt::new(move || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(err) => {
                    *raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
                    true
                }
            })
        }))
    }

    /// The exception a signal handler raised during the wait, if one did.
    pub fn take(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Whether the calling thread is Python's main thread (`threading.main_thread()`).
fn on_main_thread(py: Python<'_>) -> bool {
    let check = || -> PyResult<bool> {
        let threading = py.import(intern!(py, "threading"))?;
        let me = threading.call_method0(intern!(py, "get_ident"))?;
        let main = threading
            .call_method0(intern!(py, "main_thread"))?
            .getattr(intern!(py, "ident"))?;
        me.eq(main)
    };
    // If Python cannot tell, checking costs a little and never misses a signal.
    check().unwrap_or(true)
}

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
    signals: Signals,
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
            signals: Signals::default(),
        }
    }

    /// `wait`, ended early by a Python signal handler that raises.
    pub fn watch(&self, py: Python<'_>, wait: Wait) -> Wait {
        self.signals.watch(py, wait)
    }

    /// Runs `sql` (no parameters) and returns its first row.
    fn first_row<'py>(
        &self,
        py: Python<'py>,
        sql: &str,
    ) -> Result<Option<Bound<'py, PyAny>>, SqliteFailure> {
        let found = self
            .conn
            .bind(py)
            .call_method1(intern!(py, "execute"), (sql,))
            .and_then(|cursor| cursor.call_method0(intern!(py, "fetchone")));
        match found {
            Ok(row) if row.is_none() => Ok(None),
            Ok(row) => Ok(Some(row)),
            Err(err) => Err(self.remember(py, err)),
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

    /// Turns a core error into its Python exception, chaining what Python raised; a wait
    /// ended by a signal raises the handler's own exception.
    pub fn raise(&self, py: Python<'_>, err: WlError) -> PyErr {
        if let (WlError::Interrupted { .. }, Some(raised)) = (&err, self.signals.take()) {
            return raised;
        }
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

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        Python::attach(|py| {
            // Python's sqlite3 has no accessor for sqlite3_db_filename(); this PRAGMA gives
            // the same text: (seq, name, file), "main" first, "" in memory.
            let cursor = self
                .conn
                .bind(py)
                .call_method1(intern!(py, "execute"), ("PRAGMA database_list",))
                .map_err(|err| self.remember(py, err))?;
            let rows = cursor
                .call_method0(intern!(py, "fetchall"))
                .map_err(|err| self.remember(py, err))?;
            for row in rows.try_iter().map_err(|err| self.remember(py, err))? {
                let row = row.map_err(|err| self.remember(py, err))?;
                let Ok((_, name, file)) = row.extract::<(i64, String, Option<String>)>() else {
                    continue;
                };
                if name == "main" {
                    return Ok(Some(PathBuf::from(file.unwrap_or_default())));
                }
            }
            Ok(None)
        })
    }

    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        Python::attach(|py| {
            let row = self.first_row(py, "PRAGMA busy_timeout")?;
            Ok(row
                .and_then(|r| r.get_item(0).ok())
                .and_then(|v| v.extract::<i64>().ok())
                .map(|ms| Duration::from_millis(ms.max(0) as u64)))
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
                 open it with sqlite3.connect(path, autocommit=True)",
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
    // Python 3.12 and later have `autocommit`, the way the sqlite3 documentation recommends.
    let advice = if conn.hasattr(intern!(py, "autocommit"))? {
        "open it with sqlite3.connect(path, autocommit=True) (or isolation_level=None), or \
         set conn.autocommit = True"
    } else {
        "open it with sqlite3.connect(path, isolation_level=None) or set \
         conn.isolation_level = None"
    };
    Err(NotAutocommit::new_err(format!(
        "writerlock needs a sqlite3 connection in autocommit mode, but this one has \
         isolation_level {shown}, so Python would open a transaction of its own ({begin}) \
         before the first write, outside the writer queue; {advice}"
    )))
}

fn seconds(name: &'static str, value: f64) -> PyResult<Duration> {
    Wait::seconds(name, value).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The limit and the setting its busy message names: `wait`, or the deprecated `busy_timeout`
/// (with a `DeprecationWarning`), or `default` seconds.
fn statement_wait(
    py: Python<'_>,
    wait: Option<f64>,
    busy_timeout: Option<f64>,
    setting: Option<String>,
    default: f64,
) -> PyResult<Wait> {
    let (name, seconds_given, named) = match (wait, busy_timeout) {
        (Some(_), Some(_)) => {
            return Err(PyTypeError::new_err(
                "execute() takes the limit as wait= only; busy_timeout= is its old name, \
                 pass one of them",
            ))
        }
        (None, Some(limit)) => {
            PyErr::warn(
                py,
                &py.get_type::<PyDeprecationWarning>(),
                c"writerlock: execute(busy_timeout=...) is deprecated, pass wait=... (seconds) as everywhere else",
                1,
            )?;
            ("busy_timeout", limit, BUSY_TIMEOUT_ARGUMENT)
        }
        (wait, None) => ("wait", wait.unwrap_or(default), WAIT_ARGUMENT),
    };
    Ok(Wait::statement(seconds(name, seconds_given)?)
        .with_setting(setting.unwrap_or_else(|| named.to_string())))
}

/// A transaction's limit (raised to 1 s at least) and the setting its busy message names.
fn transaction_wait(wait: f64, setting: Option<String>) -> PyResult<Wait> {
    Ok(Wait::transaction(seconds("wait", wait)?)
        .with_setting(setting.unwrap_or_else(|| WAIT_ARGUMENT.to_string())))
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

fn parse_strategy(strategy: &str) -> PyResult<Strategy> {
    match strategy {
        "handoff" => Ok(Strategy::Handoff),
        "poll" => Ok(Strategy::Poll),
        other => Err(PyValueError::new_err(format!(
            "strategy must be \"handoff\" or \"poll\", not {other:?}"
        ))),
    }
}

#[pymethods]
impl PyWriterQueue {
    #[new]
    #[pyo3(signature = (path, *, strategy = "handoff"))]
    fn new(path: PathBuf, strategy: &str) -> PyResult<Self> {
        Ok(PyWriterQueue {
            inner: WriterQueue::with_strategy(path, parse_strategy(strategy)?),
        })
    }

    /// A queue for the connection's own main database file (`PRAGMA database_list`), so the
    /// path is never typed twice.
    #[classmethod]
    #[pyo3(signature = (conn, *, strategy = "handoff"))]
    fn for_connection<'py>(
        cls: &Bound<'py, PyType>,
        conn: &Bound<'py, PyAny>,
        strategy: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = cls.py();
        check_type(conn)?;
        parse_strategy(strategy)?;
        // Reading `in_transaction` fails on a closed connection with Python's own message.
        conn.getattr(intern!(py, "in_transaction"))?;
        let session = PySession::new(conn, None);
        let path = writerlock::queue::database_of(&session).map_err(|e| session.raise(py, e))?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("strategy", strategy)?;
        cls.call((path,), Some(&kwargs))
    }

    /// Waits up to `wait` seconds for the writer turn (a wait below 1 s is raised to 1 s),
    /// sets the connection's busy timeout to the time left and runs `BEGIN IMMEDIATE`. End it
    /// with `commit()` or `rollback()`, which put the connection's own busy timeout back.
    /// Raises `Busy` when the wait runs out (its message names `setting`, by default "the
    /// wait argument"), `NotStarted` when BEGIN fails, `NotAutocommit` or `WrongDatabase` for
    /// a connection the queue cannot drive; a signal handler's exception (Ctrl-C:
    /// `KeyboardInterrupt`) ends the wait. In every case the turn is not kept and nothing was
    /// written.
    #[pyo3(signature = (conn, wait = 25.0, setting = None))]
    fn begin(
        &self,
        py: Python<'_>,
        conn: &Bound<'_, PyAny>,
        wait: f64,
        setting: Option<String>,
    ) -> PyResult<()> {
        check_connection(conn)?;
        let session = PySession::new(conn, None);
        let wait = session.watch(py, transaction_wait(wait, setting)?);
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

    /// Gives the turn back after the connection's transaction ended without the queue (the
    /// block committed or rolled back itself), with the connection's busy timeout as it was
    /// before `begin`. Returns False when no turn was held.
    fn _release_ended(&self, py: Python<'_>, conn: &Bound<'_, PyAny>) -> PyResult<bool> {
        check_type(conn)?;
        let session = PySession::new(conn, None);
        let queue = &self.inner;
        py.detach(|| queue.release_ended(&session))
            .map_err(|e| session.raise(py, e))
    }

    /// Runs one write statement in turn, waiting up to `wait` seconds (default 5, taken as
    /// given), with `params` bound as `conn.execute` binds them; reads and statements inside
    /// an open transaction run at once. Returns the `sqlite3.Cursor`. `busy_timeout` is the
    /// old name of `wait` (deprecated). Raises `Busy` when the wait runs out; nothing was
    /// written then.
    #[pyo3(signature = (conn, sql, params = None, wait = None, setting = None, *, busy_timeout = None))]
    #[allow(clippy::too_many_arguments)]
    fn execute(
        &self,
        py: Python<'_>,
        conn: &Bound<'_, PyAny>,
        sql: &Bound<'_, PyString>,
        params: Option<&Bound<'_, PyAny>>,
        wait: Option<f64>,
        setting: Option<String>,
        busy_timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let limit = statement_wait(
            py,
            wait,
            busy_timeout,
            setting,
            writerlock::wait::BUSY_TIMEOUT.as_secs_f64(),
        )?;
        check_connection(conn)?;
        let sql = sql.to_cow()?.into_owned();
        let empty;
        let params = match params {
            Some(p) => p,
            None => {
                empty = PyTuple::empty(py);
                empty.as_any()
            }
        };
        let session = PySession::new(conn, Some(params));
        let limit = session.watch(py, limit);
        let queue = &self.inner;
        py.detach(|| queue.execute(&session, &sql, &limit))
            .map_err(|e| session.raise(py, e))?;
        match session.take_cursor() {
            Some(cursor) => Ok(cursor),
            None => Ok(py.None()),
        }
    }

    /// Takes the writer turn without starting a transaction, waiting up to `wait` seconds
    /// (at least 1), for code that runs its own `BEGIN IMMEDIATE`. Returns the seconds it
    /// waited. Give the turn back with `release()` once the transaction ended.
    #[pyo3(signature = (wait = 25.0, setting = None))]
    fn acquire(&self, py: Python<'_>, wait: f64, setting: Option<String>) -> PyResult<f64> {
        let signals = Signals::default();
        let wait = signals.watch(py, transaction_wait(wait, setting)?);
        let queue = &self.inner;
        match py.detach(|| queue.take(BusyKind::Transaction, &wait)) {
            Ok(waited) => Ok(waited.as_secs_f64()),
            Err(err @ WlError::Interrupted { .. }) => match signals.take() {
                Some(raised) => Err(raised),
                None => Err(queue_error(py, err, None)),
            },
            Err(err) => Err(queue_error(py, err, None)),
        }
    }

    /// Gives back the turn `acquire()` took.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        match self.inner.release() {
            Ok(true) => Ok(()),
            Ok(false) => Err(ProgrammingError::new_err(
                "this writer queue does not hold the writer turn, so there is nothing to \
                 release; call acquire() first, and release() once for each acquire()",
            )),
            Err(err) => Err(queue_error(py, err, None)),
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
