//! `PgWrite`, the native half of `writerlock.postgres.Write` (`with conn.write(ledger) as
//! w:`): entering starts the write transaction (the writer lock as its first statement,
//! the floor read, the refused writers), `w.execute` runs a statement inside it, and
//! leaving commits or rolls back.
//!
//! Every write of a swarm script goes through here, so its common path runs without Python
//! code: the session's own calls, then one call that makes the cursor. The Python subclass
//! adds what is rare: turning refused writers into alerts (`_report`), and `executemany`.

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyString};

use writerlock::pg;

use crate::pg::PgSession;

/// The `writerlock.postgres` exception classes raised from here.
mod pg_exceptions {
    pyo3::import_exception!(writerlock._errors, ProgrammingError);
}

/// Why a write cannot start on a connection with uncommitted changes (SQLSTATE 25001).
pub const UNCOMMITTED_BEFORE_WRITE: &str = "the connection has uncommitted changes from \
    before this write, and a write's first statement must be the writer lock: call \
    conn.commit() or conn.rollback() before conn.write() (reads alone are no obstacle)";

/// `writerlock.postgres.Cursor`, looked up once.
static CURSOR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A new `writerlock.postgres.Cursor` on `connection`.
fn new_cursor<'py>(py: Python<'py>, connection: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let class = CURSOR.get_or_try_init(py, || {
        py.import("writerlock.postgres")?
            .getattr("Cursor")
            .map(Bound::unbind)
    })?;
    class.bind(py).call1((connection,))
}

/// Where a write stands; changed only with the interpreter held, never across a call.
struct State {
    /// Between a successful `__enter__` and `__exit__` (or a failed entry).
    open: bool,
    /// The number of the write's transaction (see `PgSession.transaction_serial`).
    serial: u64,
    waits: u32,
    floor: Option<i64>,
    /// The refused writers' and alerts' lists (`None`: empty, made when asked for).
    refused: Option<Py<PyAny>>,
    alerts: Option<Py<PyAny>>,
}

/// A write transaction on a `writerlock.postgres.Connection`.
#[pyclass(module = "writerlock._native", name = "PgWrite", frozen, subclass)]
pub struct PgWrite {
    connection: Py<PyAny>,
    session: Py<PgSession>,
    ledger: Py<PyAny>,
    existing: Py<PyAny>,
    state: Mutex<State>,
}

impl PgWrite {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The write's transaction number while it is open; else the error that says it ended.
    fn serial(&self) -> PyResult<u64> {
        let state = self.state();
        if state.open {
            return Ok(state.serial);
        }
        Err(pg_exceptions::ProgrammingError::new_err((
            pg::write_ended_message(
                "its with block is over",
                "start a new one with conn.write()",
            ),
            "25000",
        )))
    }
}

#[pymethods]
impl PgWrite {
    /// A write on `connection` (a `writerlock.postgres.Connection`) for `ledger`, with
    /// `existing_alerts` as `Connection.write` takes it; nothing runs until it is entered.
    #[new]
    #[pyo3(signature = (connection, ledger = None, existing_alerts = None))]
    fn new(
        py: Python<'_>,
        connection: Bound<'_, PyAny>,
        ledger: Option<Py<PyAny>>,
        existing_alerts: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let session = connection
            .getattr(pyo3::intern!(py, "_session"))?
            .cast_into::<PgSession>()?
            .unbind();
        Ok(PgWrite {
            connection: connection.unbind(),
            session,
            ledger: ledger.unwrap_or_else(|| py.None()),
            existing: existing_alerts.unwrap_or_else(|| py.None()),
            state: Mutex::new(State {
                open: false,
                serial: 0,
                waits: 0,
                floor: None,
                refused: None,
                alerts: None,
            }),
        })
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = slf.py();
        let this = slf.get();
        if this.state().open {
            return Err(pg_exceptions::ProgrammingError::new_err(
                "this write is already open; use a new conn.write()",
            ));
        }
        let session = this.session.get();
        let Some((serial, waits, floor, refused)) = session.open_write(py)? else {
            return Err(pg_exceptions::ProgrammingError::new_err((
                UNCOMMITTED_BEFORE_WRITE,
                "25001",
            )));
        };
        let (refused_list, alerts) = if refused.is_empty() {
            // Nothing to report: no alert rules to apply.
            (None, None)
        } else {
            let reported = slf
                .call_method1(
                    pyo3::intern!(py, "_report"),
                    (refused, this.existing.bind(py)),
                )
                .and_then(|r| r.extract::<(Py<PyAny>, Py<PyAny>)>());
            match reported {
                Ok((refused, alerts)) => (Some(refused), Some(alerts)),
                Err(err) => {
                    // The write never reached its block: nothing of it is kept.
                    let _ = session.rollback(py);
                    return Err(err);
                }
            }
        };
        let mut state = this.state();
        state.open = true;
        state.serial = serial;
        state.waits = waits;
        state.floor = floor;
        state.refused = refused_list;
        state.alerts = alerts;
        drop(state);
        Ok(slf)
    }

    /// Commits when the block ended normally, rolls back when it raised (a failed rollback
    /// is noted on the block's exception); never swallows the exception.
    #[pyo3(signature = (exc_type, exc, tb))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        exc: &Bound<'_, PyAny>,
        tb: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let _ = tb;
        {
            let mut state = self.state();
            if !state.open {
                return Ok(false);
            }
            state.open = false;
        }
        let session = self.session.get();
        if exc_type.is_none() {
            session.commit(py)?;
        } else if let Err(rollback_error) = session.rollback(py) {
            if exc.hasattr(pyo3::intern!(py, "add_note"))? {
                exc.call_method1(
                    pyo3::intern!(py, "add_note"),
                    (format!(
                        "writerlock: the rollback failed too: {}",
                        rollback_error.value(py).str()?
                    ),),
                )?;
            }
        }
        Ok(false)
    }

    /// Runs one statement inside the write; returns its cursor. Once the write's
    /// transaction ended this raises `ProgrammingError` and runs nothing.
    #[pyo3(signature = (sql, params = None))]
    fn execute<'py>(
        &self,
        py: Python<'py>,
        sql: &Bound<'py, PyAny>,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let serial = self.serial()?;
        let Ok(text) = sql.cast::<PyString>() else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "sql must be a str, not {}",
                sql.get_type().name()?
            )));
        };
        let result =
            self.session
                .get()
                .execute(py, &text.to_cow()?, params, Some(serial), false)?;
        let cursor = new_cursor(py, self.connection.bind(py))?;
        let (description, rows, rowcount, lastrowid) = result;
        cursor.call_method1(
            pyo3::intern!(py, "_take"),
            (description, rows, rowcount, lastrowid),
        )
    }

    /// The number of the write's transaction while it is open (for the Python subclass);
    /// raises `ProgrammingError` once it ended.
    fn _within(&self) -> PyResult<u64> {
        self.serial()
    }

    /// The connection the write runs on.
    #[getter]
    fn connection(&self, py: Python<'_>) -> Py<PyAny> {
        self.connection.clone_ref(py)
    }

    /// The ledger given to `conn.write()`.
    #[getter]
    fn ledger(&self, py: Python<'_>) -> Py<PyAny> {
        self.ledger.clone_ref(py)
    }

    /// The waits for the writer lock the write took.
    #[getter]
    fn waits(&self) -> u32 {
        self.state().waits
    }

    /// The stored floor read under the writer lock (`None`: no floor row).
    #[getter]
    fn floor(&self) -> Option<i64> {
        self.state().floor
    }

    /// The refused writers still connected when the write started.
    #[getter]
    fn refused(&self, py: Python<'_>) -> Py<PyAny> {
        list_in(py, &mut self.state().refused)
    }

    /// The writer alert texts to raise on the ledger.
    #[getter]
    fn alerts(&self, py: Python<'_>) -> Py<PyAny> {
        list_in(py, &mut self.state().alerts)
    }
}

/// The list kept in `slot`, made empty the first time it is asked for.
fn list_in(py: Python<'_>, slot: &mut Option<Py<PyAny>>) -> Py<PyAny> {
    slot.get_or_insert_with(|| PyList::empty(py).into_any().unbind())
        .clone_ref(py)
}

/// Adds the class to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PgWrite>()?;
    m.add("PG_UNCOMMITTED_BEFORE_WRITE", UNCOMMITTED_BEFORE_WRITE)
}
