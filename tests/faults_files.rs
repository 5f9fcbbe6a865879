//! The SQLite queue's lock files against what production does to them,
//! with real processes: symbolic links, FIFOs, directories, hard links and
//! foreign content in their place, leases, files made by root or unreadable
//! to the writer, and a full file system.
//!
//! Tests that need root (tmpfs mounts, a second user) print why they skip
//! when not run as root.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use writerlock::lockfiles::queue_path;
use writerlock::{Error, WriterQueue};

/// The error of a first turn on `db` (`None` when it was granted), with
/// how long it took.
fn first_turn_outcome(db: &Path, limit: f64) -> (Option<Error>, Duration) {
    let queue = WriterQueue::new(db);
    let conn = open(db);
    let started = Instant::now();
    let outcome = queue.begin(&conn, &wait_secs(limit));
    let took = started.elapsed();
    match outcome {
        Ok(()) => {
            queue.rollback(&conn).expect("rollback");
            (None, took)
        }
        Err(e) => (Some(e), took),
    }
}

fn expect_unsafe(db: &Path, file: &Path, want: &str) {
    let (err, took) = first_turn_outcome(db, 1.0);
    let err = err.unwrap_or_else(|| panic!("{want}: the writer used {}", file.display()));
    let text = err.to_string();
    eprintln!("{want}: {text} ({:.1} ms)", took.as_secs_f64() * 1e3);
    assert!(
        matches!(err, Error::UnsafeLockFile { ref path, .. } if path == file),
        "{want}: {err:?}"
    );
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(text.contains(want), "{text}");
    assert!(took < Duration::from_millis(500), "{want}: took {took:?}");
}

const NOBODY: u32 = 65534;

/// Runs `f` in a child as the user `nobody` (root only).
fn as_nobody(f: impl FnOnce() -> i32) -> i32 {
    wait(fork(|| {
        // SAFETY: dropping privileges in the child.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return 90;
            }
        }
        f()
    }))
}

/// A small tmpfs, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// A symbolic link in place of a lock file is never followed: the file it
/// points at is neither padded nor written, and the error says so.
fn a_symlinked_lock_file_is_refused_and_its_target_untouched() {
    for which in ["queue", "lock"] {
        let db = Db::new();
        let target = db.dir.path().join("precious.txt");
        std::fs::write(&target, b"keep me").expect("target");
        let link = if which == "queue" {
            queue_path(&db.path)
        } else {
            writerlock::lockfiles::lock_path(&db.path)
        };
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        expect_unsafe(&db.path, &link, "is a symbolic link");
        assert_eq!(std::fs::read(&target).expect("target"), b"keep me");
    }
}

/// A FIFO in place of the queue file: a prompt error, not a hang.
fn a_fifo_lock_file_is_refused_at_once() {
    let db = Db::new();
    let fifo = queue_path(&db.path);
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    expect_unsafe(&db.path, &fifo, "is a FIFO");
}

/// A directory in place of the lock file.
fn a_directory_lock_file_is_refused() {
    let db = Db::new();
    let dir = writerlock::lockfiles::lock_path(&db.path);
    std::fs::create_dir(&dir).expect("dir");
    expect_unsafe(&db.path, &dir, "is a directory");
}

/// Lock and queue file that are one inode (a hard link) would make every
/// writer wait for itself: refused at once, naming both.
fn lock_and_queue_files_of_one_inode_are_refused() {
    let db = Db::new();
    let lock = writerlock::lockfiles::lock_path(&db.path);
    std::fs::write(&lock, b"").expect("lock file");
    let queue = queue_path(&db.path);
    std::fs::hard_link(&lock, &queue).expect("hard link");
    expect_unsafe(&db.path, &queue, "is the same file as");
}

/// A queue file that holds something else (a file a hard link or an old
/// tool left there) is never padded or written: the writers poll.
fn a_foreign_non_empty_queue_file_is_never_written() {
    let db = Db::new();
    let queue = queue_path(&db.path);
    let content = b"#!/bin/sh\necho not a page\n".repeat(10);
    std::fs::write(&queue, &content).expect("queue file");
    let (err, _) = first_turn_outcome(&db.path, 2.0);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(std::fs::read(&queue).expect("read"), content);
}

/// A lease another process holds on the queue file: the first turn ends
/// within its limit with an error that says so, instead of waiting out
/// the kernel's 45 s lease-break time inside `open()`.
fn a_leased_lock_file_cannot_outlast_the_limit() {
    let db = Db::new();
    let queue = queue_path(&db.path);
    std::fs::write(&queue, b"").expect("queue file");
    let pipe = Pipe::new();
    let leaser = lease_holder(&queue, &pipe, None);
    if pipe.recv(Duration::from_secs(10)) != Some(1) {
        let code = wait(leaser);
        return skip(
            "a_leased_lock_file_cannot_outlast_the_limit",
            &format!("this file system refused a lease (child exit {code})"),
        );
    }
    let (err, took) = first_turn_outcome(&db.path, 1.0);
    kill9(leaser);
    let err = err.expect("a writer opened a leased file for writing");
    eprintln!("lease: {err} ({:.2} s)", took.as_secs_f64());
    assert!(
        matches!(
            err,
            Error::UnsafeLockFile {
                problem: writerlock::LockFileProblem::Leased,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

/// A root cron job under `umask 077` creates the lock files; the web
/// server's user (here `nobody`, the database's owner) still writes.
fn lock_files_made_by_root_take_the_databases_owner_and_mode() {
    let name = "lock_files_made_by_root_take_the_databases_owner_and_mode";
    if !is_root() {
        return skip(name, "needs root to create files for another user");
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let db = Db::new();
    for path in [db.dir.path(), db.path.as_path()] {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).expect("chown");
    }
    std::fs::set_permissions(&db.path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let path = db.path.clone();
    let root_job = fork(move || {
        // SAFETY: setting this child's umask.
        unsafe { libc::umask(0o077) };
        let queue = WriterQueue::new(&path);
        let conn = open(&path);
        i32::from(queue.begin(&conn, &wait_secs(2.0)).is_err() || queue.rollback(&conn).is_err())
    });
    assert_eq!(wait(root_job), 0);
    for file in [
        writerlock::lockfiles::lock_path(&db.path),
        queue_path(&db.path),
    ] {
        let meta = std::fs::metadata(&file).expect("lock file");
        assert_eq!(meta.mode() & 0o777, 0o640, "{}", file.display());
        assert_eq!(
            (meta.uid(), meta.gid()),
            (NOBODY, NOBODY),
            "{}",
            file.display()
        );
    }
    let path = db.path.clone();
    let code = as_nobody(move || {
        let queue = WriterQueue::new(&path);
        let conn = open(&path);
        match queue.begin(&conn, &wait_secs(2.0)) {
            Ok(()) => {}
            Err(e) => {
                eprintln!("as nobody: {e}");
                return 1;
            }
        }
        let ok = publish_body(&conn, Duration::ZERO).is_ok();
        i32::from(!ok || queue.commit(&conn).is_err()) * 2
    });
    assert_eq!(code, 0, "the database's owner could not write after root");
    assert_eq!(db.count(), 1);
}

/// A lock file nobody else may read: the error names the file, its owner
/// and mode, the user, and what to do.
fn an_unreadable_lock_file_is_explained() {
    let name = "an_unreadable_lock_file_is_explained";
    if !is_root() {
        return skip(name, "needs root to make a file another user cannot read");
    }
    use std::os::unix::fs::PermissionsExt;
    let db = Db::new();
    std::fs::set_permissions(db.dir.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod dir");
    std::fs::set_permissions(&db.path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let lock = writerlock::lockfiles::lock_path(&db.path);
    std::fs::write(&lock, b"").expect("lock file");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let pipe = Pipe::new();
    let path = db.path.clone();
    let code = as_nobody(|| {
        let (err, _) = first_turn_outcome(&path, 1.0);
        let Some(err) = err else { return 1 };
        let text = err.to_string();
        eprintln!("as nobody: {text}");
        let ok = matches!(err, Error::LockFileAccess { .. })
            && text.contains(&lock.display().to_string())
            && text.contains("root (uid 0)")
            && text.contains("mode 0600")
            && text.contains("nobody (uid 65534)")
            && text.contains("chmod a+r");
        pipe.send(u8::from(ok));
        0
    });
    assert_eq!(code, 0);
    assert_eq!(
        pipe.recv(Duration::from_secs(1)),
        Some(1),
        "the message lacks a part"
    );
}

/// A full file system: the page's blocks cannot be allocated, so the
/// writer polls (or gets SQLite's "database or disk is full"); before, the
/// first touch of a sparse page killed it with SIGBUS.
fn a_full_file_system_never_kills_a_writer() {
    let name = "a_full_file_system_never_kills_a_writer";
    if !is_root() {
        return skip(name, "needs root to mount a small tmpfs");
    }
    let fs = SmallFs {
        dir: tempfile::tempdir().expect("tempdir"),
    };
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(fs.dir.path())
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount -t tmpfs failed");
    let db = fs.dir.path().join("site.db");
    open(&db)
        .execute_batch(
            "CREATE TABLE publishes (n INTEGER, pid INTEGER, start_us INTEGER, end_us INTEGER);",
        )
        .expect("schema");
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(fs.dir.path().join("filler")).expect("filler");
        while filler.write_all(&[0xAB; 1024]).is_ok() {}
        let _ = filler.flush();
    }
    let path = db.clone();
    let writer = fork(move || {
        let queue = WriterQueue::new(&path);
        let conn = open(&path);
        match queue.begin(&conn, &wait_secs(2.0)) {
            Ok(()) => {
                let wrote = publish_body(&conn, Duration::ZERO);
                let ended = if wrote.is_ok() {
                    queue.commit(&conn).is_ok()
                } else {
                    queue.rollback(&conn).is_ok()
                };
                eprintln!("on a full disk: turn taken, write {wrote:?}, ended {ended}");
                0
            }
            Err(e) => {
                eprintln!("on a full disk: {e}");
                3
            }
        }
    });
    let code = wait(writer);
    assert!(code < 128, "the writer was killed by signal {}", code - 128);
    assert_eq!(code, 0, "no turn on a free lock on a full disk");
}

fn main() {
    run_tests(&[
        (
            "a_symlinked_lock_file_is_refused_and_its_target_untouched",
            a_symlinked_lock_file_is_refused_and_its_target_untouched,
        ),
        (
            "a_fifo_lock_file_is_refused_at_once",
            a_fifo_lock_file_is_refused_at_once,
        ),
        (
            "a_directory_lock_file_is_refused",
            a_directory_lock_file_is_refused,
        ),
        (
            "lock_and_queue_files_of_one_inode_are_refused",
            lock_and_queue_files_of_one_inode_are_refused,
        ),
        (
            "a_foreign_non_empty_queue_file_is_never_written",
            a_foreign_non_empty_queue_file_is_never_written,
        ),
        (
            "a_leased_lock_file_cannot_outlast_the_limit",
            a_leased_lock_file_cannot_outlast_the_limit,
        ),
        (
            "lock_files_made_by_root_take_the_databases_owner_and_mode",
            lock_files_made_by_root_take_the_databases_owner_and_mode,
        ),
        (
            "an_unreadable_lock_file_is_explained",
            an_unreadable_lock_file_is_explained,
        ),
        (
            "a_full_file_system_never_kills_a_writer",
            a_full_file_system_never_kills_a_writer,
        ),
    ]);
}
