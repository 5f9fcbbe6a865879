//! `writerlock._native.lock_status`: who holds a database's writer lock and who waits, for
//! `python -m writerlock status` (the package's own status, which needs no `writerlock`
//! command on the machine). The facts come from the core, as for the command: `/proc/locks`
//! through [`writerlock::holders`], the hold time from the hand-off page, and the file
//! system with its warning from [`writerlock::filesystem`]; `writerlock/__main__.py` words
//! them.

use std::path::{Path, PathBuf};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use writerlock::filesystem::FileSystem;
use writerlock::holders::{self, FileLock, WriterLocks};
use writerlock::lockfiles;

fn locks(path: &Path) -> PyResult<Vec<FileLock>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    holders::file_locks(path).map_err(|e| {
        PyOSError::new_err(format!(
            "could not read the locks on {} from /proc/locks: {e}",
            path.display()
        ))
    })
}

/// The writer lock of the database at `path` as a dict: `lock_file`, `queue_file` (paths),
/// `lock_exists`, `queue_exists`, `holder` (pid or None), `held_for` (seconds, from the
/// hand-off page, or None), `waiters` (pids with a shared flock on the queue file),
/// `blocked` (pids in a blocking flock on the lock file), `outside_queue` (pids holding
/// SQLite's write lock other than the holder) and the file system the database is on:
/// `fs_magic` (statfs, or None), `fs_name`, `fs_kind` (`local`, `network`, `fuse` or
/// `unknown`) and `fs_warning` (None on a local disk).
#[pyfunction]
pub fn lock_status(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let lock_path = lockfiles::lock_path(&path);
    let queue_path = lockfiles::queue_path(&path);
    let (lock_locks, queue_locks) = (locks(&lock_path)?, locks(&queue_path)?);
    let WriterLocks {
        holder,
        waiters,
        blocked,
        ..
    } = WriterLocks::from_locks(&lock_locks, &queue_locks);
    let held_for = holder.and_then(|pid| {
        let page = writerlock::handoff::inspect(&queue_path)?;
        (page.holder_pid == Some(pid))
            .then_some(page.held_for)
            .flatten()
            .map(|d| d.as_secs_f64())
    });
    let except: Vec<u32> = holder.into_iter().collect();
    let outside = holders::sqlite_writers(&path, &except);
    let fs = FileSystem::of_database(&path);
    let out = PyDict::new(py);
    out.set_item("lock_file", &lock_path)?;
    out.set_item("queue_file", &queue_path)?;
    out.set_item("lock_exists", lock_path.exists())?;
    out.set_item("queue_exists", queue_path.exists())?;
    out.set_item("holder", holder)?;
    out.set_item("held_for", held_for)?;
    out.set_item("waiters", waiters)?;
    out.set_item("blocked", blocked)?;
    out.set_item("outside_queue", outside)?;
    out.set_item("fs_magic", fs.magic)?;
    out.set_item("fs_name", fs.name)?;
    out.set_item("fs_kind", fs.kind.as_str())?;
    out.set_item("fs_warning", fs.warning())?;
    Ok(out)
}
