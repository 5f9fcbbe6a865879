//! `WriterQueue`: the SQLite write queue for Python `sqlite3.Connection` objects.
//!
//! The core drives the connection through [`SqliteSession`], implemented here by
//! [`PySession`]. Where Python's `sqlite3` module uses this process's own `libsqlite3` (checked
//! once, see [`connection_handle_offset`]), the session drives the connection's own `sqlite3*`
//! through SQLite's C API ([`SqliteHandle`], its statements prepared once per connection):
//! the queue's `BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK` and busy-timeout calls never pass
//! through `conn.execute()` (so a `Connection` subclass that overrides it never sees them) and
//! cost no host-level statement. Otherwise each method re-attaches to the interpreter and
//! calls the connection (`conn.execute(sql)`, `PRAGMA busy_timeout`, `PRAGMA database_list`,
//! `conn.in_transaction`). A queued statement with its parameters always runs through
//! `conn.execute()`, as the caller wrote it. The core's `begin`, `commit`, `rollback`,
//! `execute` and `take` run inside `Python::detach`, so the interpreter is free while a writer
//! waits for its turn, and every wait runs Python's signal handlers (see [`Signals`]) so
//! Ctrl-C ends it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyDeprecationWarning, PyException, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};

use libsqlite3_sys as ffi;
use pyo3::sync::PyOnceLock;
use writerlock::sqlite::shares_this_sqlite;
use writerlock::transaction::{self, AfterCommit, Connection, Step};
use writerlock::wait::{self, Interrupt};
use writerlock::{
    BusyKind, Error as WlError, SqliteFailure, SqliteHandle, SqliteSession, Strategy, Wait,
    WriterQueue,
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

/// Python's main thread (`threading.main_thread().ident`) in the process that asked last.
static MAIN_THREAD: Mutex<Option<(u32, u64)>> = Mutex::new(None);

/// Whether the calling thread is Python's main thread (`threading.main_thread()`).
///
/// Asked at every wait, so the answer is kept per process: `threading.get_ident()` is
/// `pthread_self()`, compared with the main thread's ident read once (again after a fork,
/// whose child's main thread is the one that forked).
fn on_main_thread(py: Python<'_>) -> bool {
    let pid = writerlock::process::current_pid();
    // SAFETY: pthread_self() has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    let mut known = MAIN_THREAD.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((known_pid, main)) = *known {
        if known_pid == pid {
            return me == main;
        }
    }
    let main = || -> PyResult<u64> {
        py.import(intern!(py, "threading"))?
            .call_method0(intern!(py, "main_thread"))?
            .getattr(intern!(py, "ident"))?
            .extract::<u64>()
    };
    match main() {
        Ok(main) => {
            *known = Some((pid, main));
            me == main
        }
        // If Python cannot tell, checking costs a little and never misses a signal.
        Err(_) => true,
    }
}

/// A Python `sqlite3.Connection` seen by the core queue.
///
/// Holds the connection (and, for a queued statement, its parameters) as owned references,
/// so it can cross into `Python::detach`; every call re-attaches to the interpreter. The
/// exception Python raised last and the cursor of the last statement are kept for the caller.
pub struct PySession {
    conn: Py<PyAny>,
    /// The connection's own handle, where it can be driven directly.
    handle: Option<Arc<SqliteHandle>>,
    /// Whether sqlite3 would open a transaction of its own before a write ([`Mode::Implicit`]).
    implicit: bool,
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
            handle: None,
            implicit: false,
            params: params.map(|p| p.clone().unbind()),
            error: Mutex::new(None),
            cursor: Mutex::new(None),
            signals: Signals::default(),
        }
    }

    /// The same session driving the connection's own `sqlite3*` where `handle` is given.
    fn direct(mut self, handle: Option<Arc<SqliteHandle>>, mode: Mode) -> PySession {
        self.handle = handle;
        self.implicit = mode == Mode::Implicit;
        self
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
        let found = base_execute(self.conn.bind(py), sql, None)
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
        if let Some(handle) = &self.handle {
            // The queue's own statements (and anything without parameters that it runs)
            // go straight to SQLite; a queued statement keeps Python's binding.
            if self.params.is_none() || SqliteHandle::is_own_statement(sql) {
                return handle.exec(sql);
            }
        }
        Python::attach(|py| {
            let conn = self.conn.bind(py);
            let result = match &self.params {
                Some(params) => base_execute(conn, sql, Some(params.bind(py))),
                None => base_execute(conn, sql, None),
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
        if let Some(handle) = &self.handle {
            return handle.set_busy_timeout(timeout);
        }
        let millis = timeout.as_millis().min(i32::MAX as u128);
        Python::attach(|py| {
            let sql = format!("PRAGMA busy_timeout = {millis}");
            match base_execute(self.conn.bind(py), &sql, None) {
                Ok(_) => Ok(()),
                Err(err) => Err(self.remember(py, err)),
            }
        })
    }

    fn in_transaction(&self) -> Option<bool> {
        if let Some(handle) = &self.handle {
            return handle.in_transaction();
        }
        Python::attach(|py| {
            self.conn
                .bind(py)
                .getattr(intern!(py, "in_transaction"))
                .and_then(|v| v.extract::<bool>())
                .ok()
        })
    }

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        if let Some(handle) = &self.handle {
            return handle.main_database_file();
        }
        Python::attach(|py| {
            // Python's sqlite3 has no accessor for sqlite3_db_filename(); this PRAGMA gives
            // the same text: (seq, name, file), "main" first, "" in memory.
            let cursor = base_execute(self.conn.bind(py), "PRAGMA database_list", None)
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
        if let Some(handle) = &self.handle {
            return handle.busy_timeout();
        }
        Python::attach(|py| {
            let row = self.first_row(py, "PRAGMA busy_timeout")?;
            Ok(row
                .and_then(|r| r.get_item(0).ok())
                .and_then(|v| v.extract::<i64>().ok())
                .map(|ms| Duration::from_millis(ms.max(0) as u64)))
        })
    }

    fn has_moved(&self) -> Option<bool> {
        self.handle.as_ref().and_then(|handle| handle.has_moved())
    }

    fn implicit_transactions(&self) -> bool {
        self.implicit
    }

    fn end_hooks_handle(&self) -> Option<*mut ffi::sqlite3> {
        // Python's sqlite3 gives its users no commit or rollback hook.
        self.handle
            .as_ref()
            .and_then(|handle| handle.end_hooks_handle())
    }

    fn connection_id(&self) -> Option<usize> {
        self.handle
            .as_ref()
            .and_then(|handle| handle.connection_id())
    }
}

/// What this process's Python `sqlite3` module offers the queue, found once.
struct Host {
    /// `sqlite3.Connection`.
    connection_type: Py<PyAny>,
    /// Python 3.12 and later: connections have `autocommit`.
    has_autocommit: bool,
    /// Where a `sqlite3.Connection` keeps its `sqlite3*` (see [`connection_handle_offset`]).
    handle_offset: Option<usize>,
}

static HOST: PyOnceLock<Host> = PyOnceLock::new();

fn host(py: Python<'_>) -> PyResult<&Host> {
    HOST.get_or_try_init(py, || {
        let sqlite3 = py.import(intern!(py, "sqlite3"))?;
        let version: (u32, u32) = py
            .import(intern!(py, "sys"))?
            .getattr(intern!(py, "version_info"))?
            .get_item(0)?
            .extract::<u32>()
            .and_then(|major| {
                let minor = py
                    .import(intern!(py, "sys"))?
                    .getattr(intern!(py, "version_info"))?
                    .get_item(1)?
                    .extract::<u32>()?;
                Ok((major, minor))
            })?;
        Ok(Host {
            connection_type: sqlite3.getattr(intern!(py, "Connection"))?.unbind(),
            has_autocommit: version >= (3, 12),
            handle_offset: connection_handle_offset(py, version),
        })
    })
}

/// Where a `sqlite3.Connection` object keeps its `sqlite3*`, when the queue may drive it.
///
/// In every CPython from 3.9 to 3.14 the connection's C struct starts with the object
/// header and then `sqlite3 *db` (NULL once closed), so the handle sits at
/// `object.__basicsize__` (which also covers builds with a larger header). That is used only
/// when the version is one of those and Python's `_sqlite3` module calls this process's own
/// `libsqlite3` ([`shares_this_sqlite`]); otherwise the queue drives the connection through
/// `conn.execute()` as before and says so once with a `RuntimeWarning`.
fn connection_handle_offset(py: Python<'_>, version: (u32, u32)) -> Option<usize> {
    let found = || -> PyResult<Option<usize>> {
        if !((3, 9)..=(3, 14)).contains(&version) {
            return Ok(None);
        }
        let module = py.import(intern!(py, "_sqlite3"))?;
        let Ok(file) = module.getattr(intern!(py, "__file__")) else {
            return Ok(None);
        };
        let file: PathBuf = file.extract()?;
        if !shares_this_sqlite(&file) {
            return Ok(None);
        }
        let basic = py
            .import(intern!(py, "builtins"))?
            .getattr(intern!(py, "object"))?
            .getattr(intern!(py, "__basicsize__"))?
            .extract::<usize>()?;
        Ok(Some(basic))
    };
    match found() {
        Ok(Some(offset)) => Some(offset),
        _ => {
            let _ = PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(),
                c"writerlock: this Python's sqlite3 module does not use the process's own \
                  libsqlite3 (or its layout is not one writerlock knows), so the write queue \
                  drives connections through conn.execute(), which is slower",
                1,
            );
            None
        }
    }
}

/// `sqlite3.Connection.execute(conn, *args)`: Python's own `execute`, called on the base
/// class, so a subclass that overrides `execute()` (to log statements, or to queue its
/// writes through this very queue) is never entered by the queue.
fn base_execute<'py>(
    conn: &Bound<'py, PyAny>,
    sql: &str,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = conn.py();
    let execute = host(py)?
        .connection_type
        .bind(py)
        .getattr(intern!(py, "execute"))?;
    match params {
        Some(params) => execute.call1((conn, sql, params)),
        None => execute.call1((conn, sql)),
    }
}

/// The connection's main database file as Python's own `sqlite3.Connection.execute` reports
/// it (`PRAGMA database_list`), called on the base class so that a subclass overriding
/// `execute()` never sees it.
fn main_file_by_python(conn: &Bound<'_, PyAny>) -> Option<PathBuf> {
    let py = conn.py();
    let execute = host(py)
        .ok()?
        .connection_type
        .bind(py)
        .getattr(intern!(py, "execute"))
        .ok()?;
    let rows = execute
        .call1((conn, "PRAGMA database_list"))
        .and_then(|cursor| cursor.call_method0(intern!(py, "fetchall")))
        .ok()?;
    for row in rows.try_iter().ok()? {
        if let Ok((_, name, file)) = row.ok()?.extract::<(i64, String, Option<String>)>() {
            if name == "main" {
                return Some(PathBuf::from(file.unwrap_or_default()));
            }
        }
    }
    None
}

/// A connection closed inside the queue's transaction: SQLite rolled it back and the turn
/// went back with it, so `commit()`/`rollback()` find no turn. That is reported as Python
/// reports any use of a closed connection (`sqlite3.ProgrammingError`), not as a queue that
/// holds no turn; any other error is handed back.
fn ended_on_close(
    py: Python<'_>,
    conn: &Bound<'_, PyAny>,
    err: writerlock::Error,
) -> Result<PyErr, writerlock::Error> {
    if !matches!(err, writerlock::Error::NotHolding) {
        return Err(err);
    }
    match conn.getattr(intern!(py, "in_transaction")) {
        Err(closed) => Ok(closed),
        Ok(_) => Err(err),
    }
}

/// Refuses anything but a `sqlite3.Connection` (or subclass), with a clear `TypeError`.
fn check_type(conn: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = conn.py();
    if conn.is_instance(host(py)?.connection_type.bind(py))? {
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

/// How Python's `sqlite3` runs statements on a connection the queue drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Autocommit: `isolation_level=None`, or `autocommit=True` (Python 3.12+).
    Autocommit,
    /// Python's default (`isolation_level` a string, `''` by default): sqlite3 opens a
    /// deferred transaction before a write run outside one. The queue's explicit `BEGIN
    /// IMMEDIATE` opens the transaction first, so sqlite3 opens none of its own.
    Implicit,
}

/// Checks that `conn` is an open `sqlite3.Connection` the queue can drive. A closed one (or
/// one used from another thread) raises Python's own `sqlite3.ProgrammingError`; one opened
/// with `autocommit=False` (Python 3.12+: sqlite3 keeps a transaction open at all times)
/// raises `NotAutocommit`, saying how to open it.
fn check_connection(conn: &Bound<'_, PyAny>) -> PyResult<Mode> {
    let py = conn.py();
    check_type(conn)?;
    // Reading `in_transaction` fails on a closed connection with Python's own message.
    conn.getattr(intern!(py, "in_transaction"))?;
    let host = host(py)?;
    // Python 3.12+ connections have `autocommit`; before, only a subclass may define it
    // (looked up only then: a missing attribute costs an exception at every call).
    let has_autocommit = host.has_autocommit
        || (!conn.get_type().is(host.connection_type.bind(py))
            && conn.hasattr(intern!(py, "autocommit"))?);
    if has_autocommit {
        // `autocommit` is True, False or sqlite3.LEGACY_TRANSACTION_CONTROL (-1).
        let autocommit = conn.getattr(intern!(py, "autocommit"))?;
        if autocommit.is_instance_of::<pyo3::types::PyBool>() {
            if autocommit.extract::<bool>()? {
                return Ok(Mode::Autocommit);
            }
            return Err(NotAutocommit::new_err(
                "writerlock needs a sqlite3 connection that does not keep a transaction open, \
                 but this one was opened with autocommit=False, so Python keeps a transaction \
                 of its own open at all times, outside the writer queue; open it with \
                 sqlite3.connect(path, autocommit=True) (or leave autocommit at its default)",
            ));
        }
    }
    if conn.getattr(intern!(py, "isolation_level"))?.is_none() {
        Ok(Mode::Autocommit)
    } else {
        Ok(Mode::Implicit)
    }
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
    /// The handles of the connections this queue drove last, their statements prepared.
    handles: Mutex<Vec<Arc<SqliteHandle>>>,
    /// The handle of the connection of the last `begin`: if Python closes that connection
    /// inside the transaction, the prepared statements would keep it open (and its write
    /// lock held) until finalized, so the next call that finds it closed drops them.
    turn: Mutex<Option<Arc<SqliteHandle>>>,
}

/// How many connections' prepared statements a queue keeps (most programs use one).
const KEPT_HANDLES: usize = 4;

impl PyWriterQueue {
    /// The connection's own `sqlite3*` with the queue's statements prepared, where the queue
    /// may drive it (see [`connection_handle_offset`]); `None` drives it through Python.
    ///
    /// A handle is kept per connection, found again by its address: its prepared statements
    /// keep a connection Python closed (`sqlite3_close_v2()`) allocated until they are
    /// finalized, so no other connection can reuse the address meanwhile. The first time a
    /// connection is seen, its handle must name the file Python's own `PRAGMA
    /// database_list` names, or it is not used.
    fn handle_for(&self, conn: &Bound<'_, PyAny>) -> Option<Arc<SqliteHandle>> {
        let py = conn.py();
        let offset = host(py).ok()?.handle_offset?;
        // SAFETY: `conn` is a sqlite3.Connection (checked by the caller) of a CPython whose
        // connection struct keeps `sqlite3 *db` right after the object header, at `offset`.
        let db = unsafe {
            conn.as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<*mut ffi::sqlite3>()
                .read()
        };
        if db.is_null() {
            // Closed by Python: let SQLite finish closing the connection of the turn (it
            // rolls back what was left open) by finalizing its statements.
            if let Some(turn) = self.turn.lock().unwrap_or_else(|p| p.into_inner()).take() {
                self.handles
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|h| !Arc::ptr_eq(h, &turn));
            }
            return None;
        }
        {
            let handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(found) = handles.iter().find(|h| h.handle() == db) {
                return Some(Arc::clone(found));
            }
        }
        // SAFETY: an open connection of this process's libsqlite3, closed by Python with
        // sqlite3_close_v2().
        let handle = unsafe { SqliteHandle::new(db) }?;
        // Not under the mutex: Python's execute lets go of the interpreter, and another
        // thread holding it would then wait for the mutex.
        if handle.main_database_file().ok()?? != main_file_by_python(conn)? {
            return None;
        }
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = handles.iter().find(|h| h.handle() == db) {
            return Some(Arc::clone(found));
        }
        if handles.len() >= KEPT_HANDLES {
            handles.remove(0);
        }
        let handle = Arc::new(handle);
        handles.push(Arc::clone(&handle));
        Some(handle)
    }

    /// The session for `conn`, checked ([`check_connection`]), driving its own handle where
    /// possible.
    fn session(
        &self,
        conn: &Bound<'_, PyAny>,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PySession> {
        let mode = check_connection(conn)?;
        Ok(PySession::new(conn, params).direct(self.handle_for(conn), mode))
    }
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
            handles: Mutex::new(Vec::new()),
            turn: Mutex::new(None),
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

    /// Waits up to `wait` seconds (by default `TRANSACTION_WAIT`, 25) for the writer turn (a
    /// wait below 1 s is raised to 1 s), sets the connection's busy timeout to the time left and runs `BEGIN IMMEDIATE`. End it
    /// with `commit()` or `rollback()`, which put the connection's own busy timeout back.
    /// Raises `Busy` when the wait runs out (its message names `setting`, by default "the
    /// wait argument"), `NotStarted` when BEGIN fails, `NotAutocommit` or `WrongDatabase` for
    /// a connection the queue cannot drive; a signal handler's exception (Ctrl-C:
    /// `KeyboardInterrupt`) ends the wait. In every case the turn is not kept and nothing was
    /// written.
    #[pyo3(signature = (conn, wait = wait::TRANSACTION_WAIT.as_secs_f64(), setting = None))]
    fn begin(
        &self,
        py: Python<'_>,
        conn: &Bound<'_, PyAny>,
        wait: f64,
        setting: Option<String>,
    ) -> PyResult<()> {
        let session = self.session(conn, None)?;
        *self.turn.lock().unwrap_or_else(|p| p.into_inner()) = session.handle.clone();
        let wait = session.watch(py, transaction_wait(wait, setting)?);
        let queue = &self.inner;
        py.detach(|| queue.begin(&session, &wait))
            .map_err(|e| session.raise(py, e))
    }

    /// Commits and gives the turn back.
    fn commit(&self, py: Python<'_>, conn: &Bound<'_, PyAny>) -> PyResult<()> {
        check_type(conn)?;
        let session = PySession::new(conn, None).direct(self.handle_for(conn), Mode::Autocommit);
        let queue = &self.inner;
        py.detach(|| queue.commit(&session))
            .map_err(|e| ended_on_close(py, conn, e).unwrap_or_else(|e| session.raise(py, e)))
    }

    /// Rolls back and gives the turn back.
    fn rollback(&self, py: Python<'_>, conn: &Bound<'_, PyAny>) -> PyResult<()> {
        check_type(conn)?;
        let session = PySession::new(conn, None).direct(self.handle_for(conn), Mode::Autocommit);
        let queue = &self.inner;
        py.detach(|| queue.rollback(&session))
            .map_err(|e| ended_on_close(py, conn, e).unwrap_or_else(|e| session.raise(py, e)))
    }

    /// Gives the turn back after the connection's transaction ended without the queue (the
    /// block committed or rolled back itself), with the connection's busy timeout as it was
    /// before `begin`. Returns False when no turn was held.
    fn _release_ended(&self, py: Python<'_>, conn: &Bound<'_, PyAny>) -> PyResult<bool> {
        check_type(conn)?;
        let session = PySession::new(conn, None).direct(self.handle_for(conn), Mode::Autocommit);
        let queue = &self.inner;
        py.detach(|| queue.release_ended(&session))
            .map_err(|e| session.raise(py, e))
    }

    /// Ends the transaction of `with queue.transaction(conn):` once the block is done
    /// (`raised`: it raised), as the core decides (`writerlock::transaction`): nothing when
    /// the block ended it through the queue; the turn given back when the block ended it
    /// itself, with `sqlite3.ProgrammingError` when it closed the connection and did not
    /// raise; otherwise `commit()` (a COMMIT SQLite refuses is rolled back, and its error
    /// raised) or `rollback()`. Returns the note for the block's error when the rollback
    /// failed too.
    fn _end_transaction(
        slf: &Bound<'_, Self>,
        conn: &Bound<'_, PyAny>,
        raised: bool,
    ) -> PyResult<Option<String>> {
        let py = slf.py();
        let holding = slf.borrow().inner.holding();
        let connection = if holding {
            match conn.getattr(intern!(py, "in_transaction")) {
                Ok(open) => Connection::from_in_transaction(Some(open.is_truthy()?)),
                // The block closed the connection.
                Err(err) if err.is_instance_of::<ProgrammingError>(py) => Connection::Closed,
                Err(err) => return Err(err),
            }
        } else {
            Connection::Unknown
        };
        match transaction::after_callback(raised, holding, connection) {
            Step::Done => Ok(None),
            Step::ReleaseEnded => {
                slf.call_method1(intern!(py, "_release_ended"), (conn,))?;
                Ok(None)
            }
            Step::ReleaseClosed => {
                slf.call_method1(intern!(py, "_release_ended"), (conn,))?;
                Err(ProgrammingError::new_err(transaction::closed_message(
                    "queue.transaction()",
                    "the block",
                    "after the with block",
                )))
            }
            Step::Commit => {
                let Err(commit_error) = slf.call_method1(intern!(py, "commit"), (conn,)) else {
                    return Ok(None);
                };
                let open = slf.borrow().inner.holding();
                if transaction::after_failed_commit(connection, open, open, None)
                    == AfterCommit::RollBack
                {
                    if let Err(err) = slf.call_method1(intern!(py, "rollback"), (conn,)) {
                        if !err.is_instance_of::<PyException>(py) {
                            return Err(err);
                        }
                    }
                }
                Err(commit_error)
            }
            Step::Rollback => match slf.call_method1(intern!(py, "rollback"), (conn,)) {
                Ok(_) => Ok(None),
                Err(err) if err.is_instance_of::<PyException>(py) => Ok(Some(
                    transaction::rollback_failed_note(&err.value(py).str()?.to_cow()?),
                )),
                Err(err) => Err(err),
            },
        }
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
        let sql = sql.to_cow()?.into_owned();
        let empty;
        let params = match params {
            Some(p) => p,
            None => {
                empty = PyTuple::empty(py);
                empty.as_any()
            }
        };
        let session = self.session(conn, Some(params))?;
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
    /// (at least 1; by default `TRANSACTION_WAIT`, 25), for code that runs its own
    /// `BEGIN IMMEDIATE`. Returns the seconds it
    /// waited. Give the turn back with `release()` once the transaction ended.
    #[pyo3(signature = (wait = wait::TRANSACTION_WAIT.as_secs_f64(), setting = None))]
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
