//! The core's writer protocol for Python: `PgProtocol` says which statement to run next on a
//! connection of the host's own (psycopg 3, psycopg2) and takes each statement's rows, server
//! error or lost connection back. `writerlock/_drivers.py` runs the statements; every
//! decision (the three waits, what `55P03` means, the floor refusal, which refused writers to
//! name) stays in the core's [`writerlock::pg::protocol`].
//!
//! A step is a tuple: `("run", kind, sql)`, `("granted", waits, floor, refused, clean)`,
//! `("done",)` or `("failed", exception)`, where `exception` is the same exception the
//! native connection raises for that failure, and `clean` the refusal count at which the
//! write found no refused writer (hand it to the next write as `known_clean`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::sync::Mutex;

use writerlock::pg::{self, Protocol, Reply, ServerError, SettingStatus, Step, TxState};

use crate::errors::pg_error;
use crate::pg::PySettings;
use crate::values::to_value;

fn tx_state(state: &str) -> PyResult<TxState> {
    match state {
        "idle" => Ok(TxState::Idle),
        "open_unused" => Ok(TxState::OpenUnused),
        "open_used" => Ok(TxState::OpenUsed),
        other => Err(PyValueError::new_err(format!(
            "the transaction state must be 'idle', 'open_unused' or 'open_used', not {other:?}"
        ))),
    }
}

/// Rows from the driver (a sequence of sequences) as the core's values.
fn rows_of(rows: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<pg::Value>>> {
    let mut out = Vec::new();
    for row in rows.try_iter()? {
        let row = row?;
        let mut values = Vec::new();
        for (i, cell) in row.try_iter()?.enumerate() {
            let cell = cell?;
            // A value the core cannot take (none of the protocol's columns has one) counts
            // as its text, so a doubtful answer is read, not fatal.
            let value = match to_value(&cell, i + 1) {
                Ok(v) => v,
                Err(_) => pg::Value::Text(cell.str()?.to_string()),
            };
            values.push(value);
        }
        out.push(values);
    }
    Ok(out)
}

fn step_tuple<'py>(py: Python<'py>, step: Step) -> PyResult<Bound<'py, PyTuple>> {
    match step {
        Step::Run(stmt) => ("run", stmt.kind().name(), stmt.sql().to_string()).into_pyobject(py),
        Step::Granted(start) => {
            let refused: Vec<(String, i32, i64, i64)> = start
                .refused()
                .iter()
                .map(|r| (r.writer.clone(), r.pid, r.version, r.floor))
                .collect();
            (
                "granted",
                start.waits(),
                start.floor(),
                refused,
                start.refusals_clean(),
            )
                .into_pyobject(py)
        }
        Step::Done => PyTuple::new(py, ["done"]),
        Step::Failed(err) => {
            let exc = pg_error(py, err).into_value(py);
            ("failed", exc).into_pyobject(py)
        }
    }
}

/// The writer protocol of one write, schema setup, or end of a write.
#[pyclass(module = "writerlock._native", name = "PgProtocol", frozen)]
pub struct PyProtocol {
    inner: Mutex<Protocol>,
}

impl PyProtocol {
    fn wrap(p: Protocol) -> PyProtocol {
        PyProtocol {
            inner: Mutex::new(p),
        }
    }

    fn feed<'py>(&self, py: Python<'py>, reply: Reply) -> PyResult<Bound<'py, PyTuple>> {
        let step = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .feed(reply);
        step_tuple(py, step)
    }
}

/// The protocol told how its connection dialled the server, when the host knows.
fn dialled(protocol: Protocol, port: Option<u16>, unix: bool) -> Protocol {
    match (port, unix) {
        (_, true) => protocol.dialled(None),
        (Some(port), false) => protocol.dialled(Some(port)),
        (None, false) => protocol,
    }
}

#[pymethods]
impl PyProtocol {
    /// A write for a writer with `settings` on a connection in `state` (`idle`,
    /// `open_unused`, `open_used`). `port` (TCP) or `unix=True` say how the connection
    /// dialled the server, so a refused writer takes no session lock through a pooler.
    /// `known_clean` is the refusal count at which an earlier write on the same database
    /// found no refused writer (the last item of its `granted` step): while the count
    /// stays, the write skips the scan of `pg_locks`.
    #[staticmethod]
    #[pyo3(signature = (settings, state, port = None, unix = false, known_clean = None))]
    fn write(
        settings: &PySettings,
        state: &str,
        port: Option<u16>,
        unix: bool,
        known_clean: Option<i64>,
    ) -> PyResult<PyProtocol> {
        let protocol = Protocol::write(&settings.inner, tx_state(state)?).known_clean(known_clean);
        Ok(PyProtocol::wrap(dialled(protocol, port, unix)))
    }

    /// The same write with `BEGIN`, the writer lock and the floor check sent as one message
    /// per attempt (a `start_write` step, answered with the floor check's rows).
    #[staticmethod]
    #[pyo3(signature = (settings, state, port = None, unix = false, known_clean = None))]
    fn write_in_one_message(
        settings: &PySettings,
        state: &str,
        port: Option<u16>,
        unix: bool,
        known_clean: Option<i64>,
    ) -> PyResult<PyProtocol> {
        let protocol = Protocol::write_in_one_message(&settings.inner, tx_state(state)?)
            .known_clean(known_clean);
        Ok(PyProtocol::wrap(dialled(protocol, port, unix)))
    }

    /// The schema setup, running `extra_sql` first.
    #[staticmethod]
    #[pyo3(signature = (settings, extra_sql, state))]
    fn setup(settings: &PySettings, extra_sql: Option<&str>, state: &str) -> PyResult<PyProtocol> {
        Ok(PyProtocol::wrap(Protocol::setup(
            &settings.inner,
            extra_sql,
            tx_state(state)?,
        )))
    }

    /// The set-up that runs once per address per process before the first write: a catalog
    /// read, and the schema's DDL only when something is missing or not current.
    #[staticmethod]
    #[pyo3(signature = (settings, state))]
    fn ensure(settings: &PySettings, state: &str) -> PyResult<PyProtocol> {
        Ok(PyProtocol::wrap(Protocol::ensure(
            &settings.inner,
            tx_state(state)?,
        )))
    }

    /// The end of a granted write: commit (unless a statement failed) or roll back.
    #[staticmethod]
    fn end(commit: bool, statement_failed: bool) -> PyProtocol {
        PyProtocol::wrap(Protocol::end(commit, statement_failed))
    }

    /// The first step.
    fn start<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let step = self.inner.lock().unwrap_or_else(|p| p.into_inner()).start();
        step_tuple(py, step)
    }

    /// The statement ran and returned `rows` (a sequence of rows, empty for none).
    fn feed_rows<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let rows = rows_of(rows)?;
        self.feed(py, Reply::Rows(rows))
    }

    /// The server refused the statement with `sqlstate` and `message`.
    #[pyo3(signature = (sqlstate, message, detail = None, hint = None, fatal = false))]
    fn feed_error<'py>(
        &self,
        py: Python<'py>,
        sqlstate: &str,
        message: &str,
        detail: Option<String>,
        hint: Option<String>,
        fatal: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut err = ServerError::new(sqlstate, message);
        err.detail = detail;
        err.hint = hint;
        err.fatal = fatal;
        self.feed(py, Reply::Failed(err))
    }

    /// The connection is gone.
    fn feed_lost<'py>(&self, py: Python<'py>, reason: &str) -> PyResult<Bound<'py, PyTuple>> {
        self.feed(
            py,
            Reply::Lost {
                reason: reason.to_string(),
            },
        )
    }

    /// Whether a set-up finished with the floor stored and committed (record the address as
    /// set up only then).
    #[getter]
    fn set_up(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_up()
    }

    /// Whether the protocol has finished.
    #[getter]
    fn finished(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_finished()
    }
}

/// The libpq keywords of `settings` as `(keyword, value)` pairs, with the
/// `application_name` the native connections carry (the program, or the interpreter and its
/// script, such as `python3 worker.py`).
#[pyfunction]
fn pg_libpq_keywords(settings: &PySettings) -> Vec<(&'static str, String)> {
    let mut keywords = settings.inner.libpq_keywords();
    keywords.push((
        "application_name",
        pg::connection::default_application_name(),
    ));
    keywords
}

/// The statement that reports how `settings`' startup settings stand on a session.
#[pyfunction]
fn pg_check_sql(settings: &PySettings) -> String {
    settings.inner.check_sql()
}

/// Reads the rows of `pg_check_sql` as `(name, sent, shown, status)` tuples.
#[pyfunction]
fn pg_read_checks<'py>(
    py: Python<'py>,
    settings: &PySettings,
    rows: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let rows = rows_of(rows)?;
    let checks = settings.inner.read_checks(&rows);
    let items = checks
        .iter()
        .map(|c| {
            let status = match c.status {
                SettingStatus::InEffect => "in effect",
                SettingStatus::NotInEffect => "not in effect",
                SettingStatus::NotApplicable => "not applicable",
            };
            (c.name.clone(), c.sent.clone(), c.shown.clone(), status).into_pyobject(py)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// Raises `SettingNotInEffect` for the first of `settings`' startup settings that the rows
/// of `pg_check_sql` show not in effect.
#[pyfunction]
fn pg_verify_checks(
    py: Python<'_>,
    settings: &PySettings,
    rows: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let rows = rows_of(rows)?;
    pg::verify_checks(settings.inner.read_checks(&rows)).map_err(|e| pg_error(py, e))
}

/// Whether this process already set up the schema at `address`
/// (`postgresql://user@host:port/dbname`), through any connection.
#[pyfunction]
fn pg_schema_is_set_up(address: &str) -> bool {
    pg::floor::is_set_up(address)
}

/// Records that this process set up the schema at `address`.
#[pyfunction]
fn pg_mark_schema_set_up(address: &str) {
    pg::floor::mark_set_up(address)
}

/// Reads the rows of the refused-writers query as `(writer, pid, version, floor)` tuples.
#[pyfunction]
fn pg_read_refused_writers(rows: &Bound<'_, PyAny>) -> PyResult<Vec<(String, i32, i64, i64)>> {
    Ok(pg::protocol::read_refused_writers(&rows_of(rows)?)
        .into_iter()
        .map(|r| (r.writer, r.pid, r.version, r.floor))
        .collect())
}

/// Adds the protocol class and its functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProtocol>()?;
    m.add_function(wrap_pyfunction!(pg_libpq_keywords, m)?)?;
    m.add_function(wrap_pyfunction!(pg_check_sql, m)?)?;
    m.add_function(wrap_pyfunction!(pg_read_checks, m)?)?;
    m.add_function(wrap_pyfunction!(pg_verify_checks, m)?)?;
    m.add_function(wrap_pyfunction!(pg_schema_is_set_up, m)?)?;
    m.add_function(wrap_pyfunction!(pg_mark_schema_set_up, m)?)?;
    m.add_function(wrap_pyfunction!(pg_read_refused_writers, m)?)?;
    m.add("PG_REFUSED_WRITERS_SQL", pg::alerts::REFUSED_WRITERS_SQL)?;
    m.add("PG_FLOOR_TABLE_SQL", pg::floor::FLOOR_TABLE_SQL)?;
    m.add("PG_STORED_FLOOR_SQL", pg::floor::STORED_FLOOR_SQL)?;
    Ok(())
}
