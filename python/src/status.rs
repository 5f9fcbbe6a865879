//! `writerlock._native.lock_status`: who holds a database's writer lock and who waits, for
//! `python -m writerlock status` (the package's own status, which needs no `writerlock`
//! command on the machine). The facts come from the core's [`writerlock::status::inspect`],
//! as for the command, in the shape of the command's `--json` document, after the command's
//! own check of the path ([`writerlock::status::check_database`]); `writerlock/__main__.py`
//! words them.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use writerlock::status::{self, Holder, NotADatabase, Process, Waiter};

/// Seconds to the millisecond, as the command prints them.
fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn holder_dict<'py>(py: Python<'py>, h: &Holder) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("pid", h.pid)?;
    d.set_item("alive", h.alive)?;
    d.set_item("command", h.command.as_deref())?;
    d.set_item("held_for_s", h.held_for.map(secs))?;
    d.set_item("held_for_source", &h.held_for_source)?;
    d.set_item("process_age_s", h.process_age.map(secs))?;
    d.set_item("descriptor_open_in", &h.descriptor_open_in)?;
    Ok(d)
}

fn waiter_dict<'py>(py: Python<'py>, w: &Waiter) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("pid", w.pid)?;
    d.set_item("command", w.command.as_deref())?;
    d.set_item("waited_s", w.waited.map(secs))?;
    d.set_item("ticket", w.ticket)?;
    d.set_item("process_age_s", w.process_age.map(secs))?;
    Ok(d)
}

fn process_dict<'py>(py: Python<'py>, p: &Process) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("pid", p.pid)?;
    d.set_item("command", p.command.as_deref())?;
    Ok(d)
}

/// The writer lock of the database at `path` as a dict, as `writerlock status --json` shows
/// it: `lock_file` and `queue_file` (`{"path", "exists"}`), `holder` (None, or `pid`,
/// `alive`, `command`, `held_for_s`, `held_for_source`, `process_age_s`,
/// `descriptor_open_in`), `waiting` (how many), `queue` (the waiters oldest first: `pid`,
/// `command`, `waited_s`, `ticket`, `process_age_s`), `blocked` (pids in a blocking flock on
/// the lock file), `outside` (processes holding SQLite's write lock other than the holder:
/// `pid`, `command`) and `filesystem`
/// (`name`, `magic`, `kind`, `warning`). Reads only. Raises OSError when `/proc/locks`
/// cannot be read.
/// The status of the database at `path`, as `writerlock status --json` shows it (without
/// `database`). The path is checked first as the command checks it
/// ([`status::check_database`]): an in-memory database or a file that is not a SQLite
/// database raises `ValueError`, a missing one `FileNotFoundError`, an unreadable one
/// `OSError`, each with the command's message.
#[pyfunction]
pub fn lock_status(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    status::check_database(&path).map_err(|e| match e {
        NotADatabase::InMemory | NotADatabase::NotSqlite { .. } => {
            PyValueError::new_err(e.to_string())
        }
        NotADatabase::Missing { .. } => PyFileNotFoundError::new_err(e.to_string()),
        NotADatabase::Unreadable { .. } => PyOSError::new_err(e.to_string()),
    })?;
    let s = status::inspect(&path).map_err(|e| PyOSError::new_err(e.to_string()))?;
    let file = |p: &PathBuf, exists: bool| -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("path", p.display().to_string())?;
        d.set_item("exists", exists)?;
        Ok(d)
    };
    let out = PyDict::new(py);
    out.set_item("lock_file", file(&s.lock_file, s.lock_exists)?)?;
    out.set_item("queue_file", file(&s.queue_file, s.queue_exists)?)?;
    out.set_item(
        "holder",
        s.holder.as_ref().map(|h| holder_dict(py, h)).transpose()?,
    )?;
    out.set_item("waiting", s.waiting)?;
    let queue = s
        .queue
        .iter()
        .map(|w| waiter_dict(py, w))
        .collect::<PyResult<Vec<_>>>()?;
    out.set_item("queue", queue)?;
    out.set_item("blocked", &s.blocked)?;
    let outside = s
        .outside
        .iter()
        .map(|p| process_dict(py, p))
        .collect::<PyResult<Vec<_>>>()?;
    out.set_item("outside", outside)?;
    let fs = PyDict::new(py);
    fs.set_item("name", s.filesystem.name)?;
    fs.set_item("magic", s.filesystem.magic_hex())?;
    fs.set_item("kind", s.filesystem.kind.as_str())?;
    fs.set_item("warning", s.filesystem.warning())?;
    out.set_item("filesystem", fs)?;
    Ok(out)
}
