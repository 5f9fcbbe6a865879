//! The lock files seen from outside the queue: which databases get them (a
//! file whose name looks like an in-memory URI is still a file), and what a
//! process forked by a writer inherits.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use writerlock::{BusyKind, Wait, WriterQueue};

fn turn_wait() -> Wait {
    Wait::transaction(Duration::from_secs(5))
}

/// A file database whose name merely contains `mode=memory` (no `file:`
/// URI) is queued: its turn is the lock file's `flock()`, seen held from
/// another process.
fn a_file_named_like_an_in_memory_uri_is_still_queued() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["mode=memory.db", "ledger-mode=memory"] {
        let path = dir.path().join(name);
        rusqlite::Connection::open(&path).expect("create the database");
        let queue = WriterQueue::new(&path);
        queue
            .take(BusyKind::Transaction, &turn_wait())
            .expect("the turn");
        assert!(queue.holding());
        assert!(
            writerlock::lockfiles::lock_path(&path).exists(),
            "{name}: the turn was granted without a lock file"
        );
        assert_eq!(
            probe_lock(&path),
            Probe::Held,
            "{name}: the turn took no lock file"
        );
        queue.release().expect("release");
        assert_eq!(probe_lock(&path), Probe::Free, "{name}: kept after release");
    }
}

/// A relative name that starts like a `file:` URI but names no in-memory
/// database is a file in the current directory: the queue makes it
/// absolute (only in-memory names stay as given).
fn a_relative_name_starting_with_file_is_made_absolute() {
    let cwd = std::env::current_dir().expect("current directory");
    for name in ["file:ledger.db", "file:ledger.db?cache=shared"] {
        let queue = WriterQueue::new(name);
        assert_eq!(queue.database(), cwd.join(name), "{name}");
    }
    for name in [
        ":memory:",
        "file::memory:",
        "file:ledger?mode=memory",
        "file:ledger?cache=shared&mode=memory",
    ] {
        let queue = WriterQueue::new(name);
        assert_eq!(queue.database(), Path::new(name), "{name}");
    }
}

/// A child forked by a process that has used the queue keeps its standard
/// input, output and error: the fork handler closes only the lock files'
/// descriptors still open (here those of a live handle, not those of a
/// handle dropped before). Runs in the test process itself (never a forked
/// one), where the handler's table is as the program started.
fn a_forked_child_keeps_its_standard_descriptors() {
    let db = Db::new();
    {
        let earlier = WriterQueue::new(&db.path);
        earlier
            .take(BusyKind::Transaction, &turn_wait())
            .expect("the turn");
        earlier.release().expect("release");
    }
    let queue = WriterQueue::new(&db.path);
    queue
        .take(BusyKind::Transaction, &turn_wait())
        .expect("the turn");
    let child = fork(|| {
        let closed = (0..3)
            .filter(|fd| unsafe { libc::fcntl(*fd, libc::F_GETFD) } == -1)
            .count();
        i32::try_from(closed).unwrap_or(99)
    });
    let closed = wait(child);
    queue.release().expect("release");
    assert_eq!(
        closed, 0,
        "the forked child found {closed} of its standard descriptors closed"
    );
}

fn main() {
    run_tests(&[
        (
            "a_file_named_like_an_in_memory_uri_is_still_queued",
            a_file_named_like_an_in_memory_uri_is_still_queued,
        ),
        (
            "a_relative_name_starting_with_file_is_made_absolute",
            a_relative_name_starting_with_file_is_made_absolute,
        ),
        (
            "a_forked_child_keeps_its_standard_descriptors",
            a_forked_child_keeps_its_standard_descriptors,
        ),
    ]);
}
