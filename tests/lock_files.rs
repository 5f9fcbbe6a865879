//! The lock files seen from outside the queue: which databases get them (a
//! file whose name looks like an in-memory URI is still a file), and what a
//! process forked by a writer inherits.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use writerlock::lockfiles::{lock_path, queue_path};
use writerlock::{BusyKind, Error, Wait, WriterQueue};

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

/// A writer whose standard input is closed (a daemon, a cron job) gets
/// its turn: the lock file may open as descriptor 0, which is a descriptor
/// like any other.
fn a_writer_with_its_standard_input_closed_gets_its_turn() {
    let db = Db::new();
    let child = fork(|| {
        unsafe { libc::close(0) };
        // No SQLite connection first: the lock file is the first file opened.
        let queue = WriterQueue::new(&db.path);
        if let Err(err) = queue.take(BusyKind::Transaction, &turn_wait()) {
            eprintln!("a turn with standard input closed: {err}");
            return 1;
        }
        if probe_lock(&db.path) != Probe::Held {
            return 2;
        }
        i32::from(queue.release().is_err()) * 3
    });
    assert_eq!(wait(child), 0, "see the child's message above");
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// The error for a lock file that is not a regular file, from a fresh
/// handle's first turn.
fn first_turn_refusal(db: &Path) -> Error {
    let queue = WriterQueue::new(db);
    match queue.take(BusyKind::Transaction, &turn_wait()) {
        Ok(_) => panic!("a turn was granted on {}", db.display()),
        Err(err) => err,
    }
}

/// A lock file refused for what it is (a FIFO: it opens, then fails the
/// regular-file check) leaves no descriptor behind, however often writers
/// try.
fn a_refused_lock_file_leaves_no_descriptor_open() {
    let db = Db::new();
    let fifo = queue_path(&db.path);
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    first_turn_refusal(&db.path);
    let before = open_descriptors();
    for _ in 0..20 {
        let err = first_turn_refusal(&db.path);
        assert!(err.to_string().contains("is a FIFO"), "{err}");
    }
    assert_eq!(
        open_descriptors(),
        before,
        "descriptors leaked by refused turns"
    );
}

/// A lock file that is a Unix socket or a character device is refused
/// with what it is. The device needs root (mknod); without root that half
/// is skipped with a printed reason.
fn sockets_and_devices_in_place_of_a_lock_file_are_named() {
    let db = Db::new();
    let socket: PathBuf = lock_path(&db.path);
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind a socket");
    let err = first_turn_refusal(&db.path);
    assert!(
        matches!(err, Error::UnsafeLockFile { ref path, .. } if *path == socket),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("is a socket, not a regular file"),
        "{err}"
    );

    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped the character and block devices: mknod needs root");
        return;
    }
    let db = Db::new();
    let device = lock_path(&db.path);
    let c = std::ffi::CString::new(device.as_os_str().as_encoded_bytes()).expect("path");
    // The null device's numbers (1, 3): opening it harms nothing.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    let err = first_turn_refusal(&db.path);
    assert!(
        err.to_string()
            .contains("is a character device, not a regular file"),
        "{err}"
    );

    // A block device that names no disk (loop device 255, not set up):
    // whether opening it fails or not, it is named.
    let db = Db::new();
    let device = lock_path(&db.path);
    let c = std::ffi::CString::new(device.as_os_str().as_encoded_bytes()).expect("path");
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 255)) };
    assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    let err = first_turn_refusal(&db.path);
    assert!(
        err.to_string()
            .contains("is a block device, not a regular file"),
        "{err}"
    );
}

/// A lock file this user may not open, owned by a user id with no name
/// (a file copied from another machine, a deleted account): the message
/// names the owner by number. Needs root to own a file as another user.
fn a_lock_file_owned_by_an_unnamed_user_is_explained_by_number() {
    if unsafe { libc::geteuid() } != 0 {
        println!(
            "a_lock_file_owned_by_an_unnamed_user_is_explained_by_number: skipped: needs root"
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    const UNNAMED: u32 = 54_321;
    const NOBODY: u32 = 65_534;
    assert!(
        unsafe { libc::getpwuid(UNNAMED) }.is_null(),
        "uid {UNNAMED} has a name on this machine"
    );
    let db = Db::new();
    std::fs::set_permissions(db.dir.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod dir");
    std::fs::set_permissions(&db.path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let lock = lock_path(&db.path);
    std::fs::write(&lock, b"").expect("lock file");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::chown(&lock, Some(UNNAMED), Some(UNNAMED)).expect("chown");
    let path = db.path.clone();
    let child = fork(move || {
        // SAFETY: dropping privileges in the child.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return 90;
            }
        }
        let text = first_turn_refusal(&path).to_string();
        println!("as nobody: {text}");
        i32::from(!(text.contains("uid 54321") && text.contains("nobody (uid 65534)")))
    });
    assert_eq!(
        wait(child),
        0,
        "the message (above) does not name both users"
    );
}

/// A writer that may not create the missing lock file (a directory only
/// root may write) is told it lacks the permission, not that the file is
/// missing. Needs root to run as another user.
fn a_lock_file_that_cannot_be_created_says_why() {
    if unsafe { libc::geteuid() } != 0 {
        println!("a_lock_file_that_cannot_be_created_says_why: skipped: needs root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    const NOBODY: u32 = 65_534;
    let db = Db::new();
    std::fs::set_permissions(db.dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod dir");
    std::fs::set_permissions(&db.path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let path = db.path.clone();
    let child = fork(move || {
        // SAFETY: dropping privileges in the child.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return 90;
            }
        }
        let err = first_turn_refusal(&path);
        println!("as nobody: {err}");
        let why = match &err {
            Error::LockFile { source, .. } => source.raw_os_error(),
            _ => None,
        };
        i32::from(why != Some(libc::EACCES))
    });
    assert_eq!(wait(child), 0, "not a permission error (above)");
    assert!(!lock_path(&db.path).exists());
}

/// The descriptors of this process that name `file`, by number.
fn descriptors_of(file: &Path) -> Vec<i32> {
    let mut fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| {
            let e = e.ok()?;
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            (std::fs::read_link(e.path()).ok()? == file).then_some(fd)
        })
        .collect();
    fds.sort_unstable();
    fds
}

/// After a fork, a handle that reopens its lock files in the child may get
/// the descriptor numbers another handle had in the parent. When that other
/// handle then forgets the parent's descriptors, the new ones must stay
/// known to the fork handler: a grandchild forked while the child holds the
/// turn closes its copies at once, so the turn ends when the child dies,
/// however long the grandchild lives.
fn a_handle_reopened_after_fork_keeps_its_descriptors_closed_in_later_children() {
    let first = Db::new();
    let second = Db::new();
    let pipe = Pipe::new();
    let grandchild_file = first.dir.path().join("grandchild");
    let a = WriterQueue::new(&first.path);
    a.take(BusyKind::Transaction, &turn_wait())
        .expect("a's turn");
    a.release().expect("release");
    let b = WriterQueue::new(&second.path);
    b.take(BusyKind::Transaction, &turn_wait())
        .expect("b's turn");
    b.release().expect("release");
    let a_fds = descriptors_of(&lock_path(&first.path));
    assert_eq!(a_fds.len(), 1, "a's lock file descriptors: {a_fds:?}");
    let child = fork(|| {
        // b reopens first, on the lowest free numbers: a's, closed at the fork.
        if b.take(BusyKind::Transaction, &turn_wait()).is_err() {
            return 1;
        }
        if descriptors_of(&lock_path(&second.path)) != a_fds {
            return 5; // the numbers did not line up: nothing to show
        }
        // a forgets the parent's descriptors, which had the same numbers.
        let _ = a.holding();
        // The grandchild says it runs (its fork handler has run by then)
        // by writing its pid; the child waits for that before dying.
        let _grandchild = fork(|| {
            let _ = std::fs::write(&grandchild_file, std::process::id().to_string());
            std::thread::sleep(Duration::from_secs(5));
            0
        });
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&grandchild_file).map_or(true, |s| s.is_empty()) {
            if std::time::Instant::now() > until {
                return 2;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        pipe.send(1);
        unsafe { libc::_exit(0) }; // dies holding b's turn
    });
    assert_eq!(pipe.recv(Duration::from_secs(10)), Some(1));
    assert_eq!(
        wait(child),
        0,
        "the child (5: descriptor numbers did not line up)"
    );
    let grandchild: libc::pid_t = std::fs::read_to_string(&grandchild_file)
        .expect("the grandchild's pid")
        .parse()
        .expect("a pid");
    let alive = unsafe { libc::kill(grandchild, 0) } == 0;
    let probe = probe_lock(&second.path);
    unsafe { libc::kill(grandchild, libc::SIGKILL) };
    assert!(alive, "the grandchild died early");
    assert_eq!(
        probe,
        Probe::Free,
        "the grandchild kept the turn of its dead parent"
    );
}

/// A lock file whose descriptor was closed behind the queue's back (a host
/// that closes every descriptor above 2, say) fails the next turn with the
/// `flock()` error at once instead of retrying it forever.
fn a_turn_on_a_closed_descriptor_fails_at_once() {
    let db = Db::new();
    let pipe = Pipe::new();
    let child = fork(|| {
        let queue = WriterQueue::new(&db.path);
        if queue.take(BusyKind::Transaction, &turn_wait()).is_err() {
            return 1;
        }
        if queue.release().is_err() {
            return 2;
        }
        for fd in descriptors_of(&lock_path(&db.path)) {
            unsafe { libc::close(fd) };
        }
        let outcome = queue.take(
            BusyKind::Transaction,
            &Wait::transaction(Duration::from_secs(1)),
        );
        println!("a turn on a closed descriptor: {outcome:?}");
        pipe.send(u8::from(matches!(outcome, Err(Error::Flock { .. }))));
        0
    });
    let answer = pipe.recv(Duration::from_secs(5));
    if answer.is_none() {
        kill9(child);
    } else {
        wait(child);
    }
    assert_eq!(
        answer,
        Some(1),
        "None: the turn never ended; 0: another outcome (above)"
    );
}

/// A handle dropped after its turns closes its lock files: a long-lived
/// process that makes a handle per request keeps no descriptor per request.
fn dropped_handles_close_their_lock_files() {
    let db = Db::new();
    let before = open_descriptors();
    for _ in 0..20 {
        let queue = WriterQueue::new(&db.path);
        queue
            .take(BusyKind::Transaction, &turn_wait())
            .expect("the turn");
        queue.release().expect("release");
    }
    assert_eq!(
        open_descriptors(),
        before,
        "descriptors left by dropped handles"
    );
    assert!(descriptors_of(&lock_path(&db.path)).is_empty());
}

/// A database path handed over as bytes (by the C, PHP and Python
/// bindings) keeps every byte, including ones that are not UTF-8: the
/// turn locks that database's own lock file.
fn a_path_given_as_bytes_keeps_every_byte() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = dir.path().as_os_str().as_bytes().to_vec();
    bytes.extend_from_slice(b"/caf\xe9.db");
    let path = writerlock::lockfiles::path_from_bytes(&bytes);
    assert_eq!(path.as_os_str().as_bytes(), &bytes[..]);
    rusqlite::Connection::open(&path).expect("create the database");
    let queue = WriterQueue::new(&path);
    queue
        .take(BusyKind::Transaction, &turn_wait())
        .expect("the turn");
    assert_eq!(probe_lock(&path), Probe::Held);
    queue.release().expect("release");
}

/// Two threads share one handle. The first opens the lock files while a
/// lease another process holds on the queue file keeps them from opening,
/// and gives up at its 300 ms limit; the second, waiting behind it with a
/// 5 s limit, is woken at once, opens the files itself when the lease ends
/// (at 700 ms) and gets its turn then, not at its own limit.
fn a_thread_behind_a_failed_open_is_woken_at_once() {
    let db = Db::new();
    let queue_file = queue_path(&db.path);
    std::fs::write(&queue_file, b"").expect("queue file");
    let pipe = Pipe::new();
    let leaser = lease_holder(&queue_file, &pipe, Some(Duration::from_millis(700)));
    if pipe.recv(Duration::from_secs(10)) != Some(1) {
        let code = kill9(leaser);
        panic!("this file system refused a lease (child exit {code})");
    }
    let queue = WriterQueue::new(&db.path);
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| {
            let outcome = queue.take(
                BusyKind::Statement,
                &Wait::statement(Duration::from_millis(300)),
            );
            if outcome.is_ok() {
                let _ = queue.release();
            }
            outcome
        });
        std::thread::sleep(Duration::from_millis(100));
        let second = s.spawn(|| {
            let started = std::time::Instant::now();
            let outcome = queue.take(BusyKind::Transaction, &turn_wait());
            let took = started.elapsed();
            if outcome.is_ok() {
                let _ = queue.release();
            }
            (outcome.map(|_| ()), took)
        });
        (
            first.join().expect("first thread"),
            second.join().expect("second thread"),
        )
    });
    kill9(leaser);
    assert!(
        first.is_err(),
        "the first thread opened a leased file: {first:?}"
    );
    let (outcome, took) = second;
    println!("the second thread: {outcome:?} after {took:?}");
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(
        took < Duration::from_millis(2500),
        "the second thread slept {took:?} after the first one's open failed"
    );
}

/// A process serving 2,000 databases (a queue handle, two lock files each)
/// holds a turn on the last and forks a child that lives on; when the
/// parent is killed the turn is free at once: the child closed every
/// inherited lock descriptor, not only the first few hundred.
fn a_crash_frees_the_turn_with_two_thousand_queues_and_a_forked_child() {
    const QUEUES: usize = 2_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let last = dir.path().join(format!("site-{}.db", QUEUES - 1));
    let pipe = Pipe::new();
    let parent = fork(|| {
        // 4,000 lock descriptors and a few more.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        if limit.rlim_cur < 4_200 {
            limit.rlim_cur = limit.rlim_max.min(8_192);
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        }
        let queues: Vec<WriterQueue> = (0..QUEUES)
            .map(|i| WriterQueue::new(dir.path().join(format!("site-{i}.db"))))
            .collect();
        for queue in &queues {
            if queue.take(BusyKind::Transaction, &turn_wait()).is_err() {
                return 1;
            }
            if queue.release().is_err() {
                return 2;
            }
        }
        if queues[QUEUES - 1]
            .take(BusyKind::Transaction, &turn_wait())
            .is_err()
        {
            return 3;
        }
        let child = fork(|| {
            std::thread::sleep(Duration::from_secs(30));
            0
        });
        let _ = child;
        pipe.send(1);
        std::thread::sleep(Duration::from_secs(30));
        0
    });
    assert_eq!(
        pipe.recv(Duration::from_secs(60)),
        Some(1),
        "the parent opened {QUEUES} queues and holds the last one's turn"
    );
    assert_eq!(probe_lock(&last), Probe::Held, "the parent holds the turn");
    // The child of the parent lives on (its pid is the parent's child's).
    let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .expect("the parent's children");
    let child: libc::pid_t = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the forked child");
    assert_eq!(kill9(parent), 128 + libc::SIGKILL);
    let queue = WriterQueue::new(&last);
    let outcome = queue.take(
        BusyKind::Transaction,
        &Wait::transaction(Duration::from_secs(2)),
    );
    unsafe { libc::kill(child, libc::SIGKILL) };
    let waited = outcome.expect("the killed parent's turn is free while its child lives");
    assert!(
        waited < Duration::from_secs(1),
        "the turn came after {waited:?}"
    );
    queue.release().expect("release");
}

/// A process at its open-file limit is told that it is the descriptor
/// limit, not to check that the database's directory exists.
fn a_lock_file_at_the_descriptor_limit_says_so() {
    let db = Db::new();
    let pipe = Pipe::new();
    let child = fork(|| {
        // Fill the descriptor table up to a low limit.
        let limit = libc::rlimit {
            rlim_cur: 64,
            rlim_max: 64,
        };
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        let mut kept = Vec::new();
        while let Ok(file) = std::fs::File::open("/dev/null") {
            kept.push(file);
        }
        let queue = WriterQueue::new(&db.path);
        let text = match queue.take(BusyKind::Transaction, &turn_wait()) {
            Ok(_) => String::from("granted"),
            Err(err) => err.to_string(),
        };
        drop(kept);
        let ok = text.contains("descriptor limit") && !text.contains("directory exists");
        if !ok {
            eprintln!("at the descriptor limit: {text}");
        }
        pipe.send(u8::from(ok));
        0
    });
    let answer = pipe.recv(Duration::from_secs(10));
    wait(child);
    assert_eq!(
        answer,
        Some(1),
        "the message (above) does not name the descriptor limit"
    );
}

fn main() {
    run_tests(&[
        (
            "a_lock_file_at_the_descriptor_limit_says_so",
            a_lock_file_at_the_descriptor_limit_says_so,
        ),
        (
            "a_crash_frees_the_turn_with_two_thousand_queues_and_a_forked_child",
            a_crash_frees_the_turn_with_two_thousand_queues_and_a_forked_child,
        ),
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
        (
            "a_writer_with_its_standard_input_closed_gets_its_turn",
            a_writer_with_its_standard_input_closed_gets_its_turn,
        ),
        (
            "a_refused_lock_file_leaves_no_descriptor_open",
            a_refused_lock_file_leaves_no_descriptor_open,
        ),
        (
            "sockets_and_devices_in_place_of_a_lock_file_are_named",
            sockets_and_devices_in_place_of_a_lock_file_are_named,
        ),
        (
            "a_lock_file_owned_by_an_unnamed_user_is_explained_by_number",
            a_lock_file_owned_by_an_unnamed_user_is_explained_by_number,
        ),
        (
            "a_lock_file_that_cannot_be_created_says_why",
            a_lock_file_that_cannot_be_created_says_why,
        ),
        (
            "a_handle_reopened_after_fork_keeps_its_descriptors_closed_in_later_children",
            a_handle_reopened_after_fork_keeps_its_descriptors_closed_in_later_children,
        ),
        (
            "a_turn_on_a_closed_descriptor_fails_at_once",
            a_turn_on_a_closed_descriptor_fails_at_once,
        ),
        (
            "dropped_handles_close_their_lock_files",
            dropped_handles_close_their_lock_files,
        ),
        (
            "a_path_given_as_bytes_keeps_every_byte",
            a_path_given_as_bytes_keeps_every_byte,
        ),
        (
            "a_thread_behind_a_failed_open_is_woken_at_once",
            a_thread_behind_a_failed_open_is_woken_at_once,
        ),
    ]);
}
