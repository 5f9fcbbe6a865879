//! `writerlock._native.lock_status`: who holds a database's writer lock and who waits, for
//! `python -m writerlock status` (the package's own status, which needs no `writerlock`
//! command on the machine). The facts come from the core: `/proc/locks` through
//! [`writerlock::holders`], the hold time from the hand-off page, and the file system's
//! `statfs` magic number; `writerlock/__main__.py` words them.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use writerlock::holders::{self, FileLock, LockKind};
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

fn statfs_magic(path: &Path) -> Option<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statfs is a valid out buffer; the path is NUL-terminated.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c_path.as_ptr(), &mut buf) };
    // f_type is a signed word on some targets; the magic numbers are 32-bit.
    (rc == 0).then_some(buf.f_type as u64 & 0xffff_ffff)
}

/// The writer lock of the database at `path` as a dict: `lock_file`, `queue_file` (paths),
/// `lock_exists`, `queue_exists`, `holder` (pid or None), `held_for` (seconds, from the
/// hand-off page, or None), `waiters` (pids with a shared flock on the queue file),
/// `blocked` (pids in a blocking flock on the lock file), `outside_queue` (pids holding
/// SQLite's write lock other than the holder) and `fs_magic` (statfs, or None).
#[pyfunction]
pub fn lock_status(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let lock_path = lockfiles::lock_path(&path);
    let queue_path = lockfiles::queue_path(&path);
    let (lock_locks, queue_locks) = (locks(&lock_path)?, locks(&queue_path)?);
    let holder = lock_locks.iter().find_map(|l| {
        (l.kind == LockKind::Flock && l.exclusive && !l.blocked)
            .then_some(l.pid)
            .flatten()
    });
    let blocked: Vec<u32> = lock_locks
        .iter()
        .filter(|l| l.blocked)
        .filter_map(|l| l.pid)
        .collect();
    let waiters: Vec<u32> = queue_locks
        .iter()
        .filter(|l| l.kind == LockKind::Flock && !l.exclusive && !l.blocked)
        .filter_map(|l| l.pid)
        .collect();
    let held_for = holder.and_then(|pid| {
        let page = writerlock::handoff::inspect(&queue_path)?;
        (page.holder_pid == Some(pid))
            .then_some(page.held_for)
            .flatten()
            .map(|d| d.as_secs_f64())
    });
    let except: Vec<u32> = holder.into_iter().collect();
    let outside = holders::sqlite_writers(&path, &except);
    let fs_target = if path.exists() {
        path.clone()
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    };
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
    out.set_item("fs_magic", statfs_magic(&fs_target))?;
    Ok(out)
}
