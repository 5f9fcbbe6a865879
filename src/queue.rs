//! The write queue: writers of one SQLite database take turns across
//! processes before `BEGIN IMMEDIATE`.
//!
//! A writer takes an exclusive `flock()` on `<db>.writer-lock`, holding a
//! shared `flock()` on `<db>.writer-queue` while it waits so that others
//! see a writer waiting. With its turn held it sets the connection's busy
//! timeout to the time left and runs `BEGIN IMMEDIATE`; COMMIT or ROLLBACK
//! gives the turn back. If the process dies the kernel drops its locks, so
//! a crash never blocks the queue.
//!
//! ```no_run
//! use std::time::{Duration, Instant};
//! use writerlock::{Wait, WriterQueue};
//!
//! let conn = rusqlite::Connection::open("site.db")?;
//! let queue = WriterQueue::new("site.db");
//! queue.begin(&conn, &Wait::transaction(Duration::from_secs(25)))?;
//! conn.execute("INSERT INTO t VALUES (1)", [])?;
//! queue.commit(&conn)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Busy, BusyKind, Error, Result, SqliteFailure};
use crate::handoff::Page;
use crate::holders;
use crate::lockfiles::{self, LockFiles};
use crate::paths;
use crate::polling::{FilesView, Gave};
use crate::process::current_pid;
use crate::slice::{Leaving, Slice};
use crate::sqlite::{self, looks_read_only, SqliteSession};
use crate::wait::{poll_pause, Deadline, Strategy, Wait};

/// A process's handle on one database's write queue.
///
/// Cheap to create: the lock files open at the first turn. A handle is
/// `Sync`: two threads may share it, and the second waits until the first
/// gives the turn back (each handle owns its descriptors, so two handles in
/// one process exclude each other like two processes). After `fork()` the
/// child's copy never touches the parent's lock and opens its own files.
#[derive(Debug)]
pub struct WriterQueue {
    database: PathBuf,
    in_memory: bool,
    strategy: Strategy,
    turn: Arc<Turn>,
}

/// A handle's turn and what belongs to it, shared (weakly) with the commit
/// and rollback hooks a turn sets on a connection that offers them, so a
/// transaction the host ends gives the turn back.
#[derive(Debug, Default)]
struct Turn {
    state: Mutex<State>,
    turn_free: Condvar,
}

#[derive(Debug, Default)]
struct State {
    files: Option<LockFiles>,
    /// The hand-off page mapped from the queue file, where usable.
    page: Option<Page>,
    owner: Option<Owner>,
    holding: bool,
    last_wait: Duration,
    /// This handle's slice (hand-off only): when it last got its turn in
    /// arrival order, and how many turns it took straight back since.
    slice: Slice,
    /// Threads of this process waiting for another thread's turn to end.
    waiting_threads: usize,
    /// The connection database file last found to be this queue's database
    /// (the check at each turn's start then needs no `stat()`).
    checked_file: Option<PathBuf>,
    /// The busy timeout the connection had before the turn's `begin`,
    /// restored when the transaction ends.
    caller_timeout: Option<Duration>,
    /// The commit and rollback hooks the turn's `begin` set on its
    /// connection, if the host allows them.
    hooked: Option<Hooked>,
    /// The connection (`SqliteSession::connection_id`) of the `begin` that
    /// took the turn held, if it was taken that way and the host tells.
    began: Option<usize>,
}

/// The commit and rollback hooks a turn set on its connection.
///
/// The hooks' argument is an `Arc<HookTarget>` made raw: that reference
/// belongs to the connection and is freed exactly once, by the hook when it
/// fires or by the queue when it clears the hooks itself (on the same
/// connection, which it has at hand then). The one here lets the queue tell
/// its current hooks from older ones.
#[derive(Debug)]
struct Hooked {
    target: Arc<HookTarget>,
}

/// What a connection's commit and rollback hooks know of the turn.
#[derive(Debug)]
struct HookTarget {
    turn: std::sync::Weak<Turn>,
    /// The hooked connection's handle (an address: the state is `Send`).
    db: usize,
    /// Set while the queue runs its own `COMMIT` or `ROLLBACK`, which ends
    /// the turn itself (and keeps it when SQLite refuses the `COMMIT`).
    quiet: std::sync::atomic::AtomicBool,
}

impl HookTarget {
    /// Clears the connection's hooks and frees their reference.
    ///
    /// # Safety
    /// The hooks must still be set on the connection, which must be open,
    /// and `this` must be the pointer they were set with.
    unsafe fn unhook(this: *const HookTarget) {
        let db = (*this).db as *mut libsqlite3_sys::sqlite3;
        let set = sqlite::set_end_hooks(db, None, std::ptr::null_mut());
        if set == this.cast_mut().cast() {
            drop(Arc::from_raw(this));
        } else if !set.is_null() {
            // Another queue's hooks (a connection that began its last turn through another
            // handle): only this crate sets hooks on such connections, so they are put back,
            // and this handle's reference, no longer set anywhere, is left as it is.
            sqlite::set_end_hooks(db, Some((on_rollback, on_commit)), set);
        }
    }
}

/// SQLite's commit hook: the host commits a transaction the queue began.
unsafe extern "C" fn on_commit(arg: *mut std::ffi::c_void) -> std::ffi::c_int {
    on_transaction_end(arg.cast_const().cast());
    0
}

/// SQLite's rollback hook: the transaction the queue began rolled back.
unsafe extern "C" fn on_rollback(arg: *mut std::ffi::c_void) {
    on_transaction_end(arg.cast_const().cast());
}

/// Gives the turn back when the host ended the transaction the turn began
/// (its own `COMMIT`, `with conn:`, a script), with the connection's busy
/// timeout as it was before `begin`. Runs inside SQLite's `COMMIT`: in WAL
/// mode nothing can refuse the commit after this point, so the turn is free
/// a few microseconds before SQLite's write lock; in rollback-journal mode a
/// `COMMIT` that then fails on readers (`SQLITE_BUSY`) keeps the
/// transaction but has given the turn back, and SQLite's own lock still
/// keeps the next writer out until it ends.
unsafe fn on_transaction_end(this: *const HookTarget) {
    // Nothing may unwind into SQLite.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let target = &*this;
        if target.quiet.load(Ordering::Acquire) {
            return;
        }
        let db = target.db as *mut libsqlite3_sys::sqlite3;
        let turn = target.turn.upgrade();
        let ended = turn.as_ref().and_then(|turn| {
            let mut st = turn.state();
            let current = st
                .hooked
                .as_ref()
                .is_some_and(|h| std::ptr::eq(Arc::as_ptr(&h.target), this));
            current.then(|| {
                st.hooked = None;
                st.caller_timeout.take()
            })
        });
        // SAFETY: these hooks are set (they are running) on the open connection `db`.
        HookTarget::unhook(this);
        if let (Some(turn), Some(saved)) = (turn, ended) {
            if let Some(timeout) = saved {
                let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
                libsqlite3_sys::sqlite3_busy_timeout(db, ms);
            }
            let _ = turn.release();
        }
    }));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    pid: u32,
    thread: u64,
}

/// The next number [`thread_number`] hands out.
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

thread_local! {
    /// The turns this thread took, by database (checked when read: a turn
    /// may end in another thread, or the handle be gone).
    static TAKEN: std::cell::RefCell<Vec<(PathBuf, std::sync::Weak<Turn>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Notes that this thread holds `turn` of `database`.
fn note_taken(database: &Path, turn: &Arc<Turn>) {
    let _ = TAKEN.try_with(|taken| {
        let mut taken = taken.borrow_mut();
        taken.retain(|(_, t)| t.strong_count() > 0 && !std::ptr::eq(t.as_ptr(), Arc::as_ptr(turn)));
        taken.push((database.to_path_buf(), Arc::downgrade(turn)));
    });
}

/// Whether the calling thread (`me`) holds the turn of `database` through
/// a handle other than `turn`'s. Called with no turn's state locked.
fn taken_through_another_handle(database: &Path, turn: &Arc<Turn>, me: Owner) -> bool {
    let candidates: Vec<Arc<Turn>> = TAKEN
        .try_with(|taken| {
            taken
                .borrow()
                .iter()
                .filter(|(db, t)| db == database && !std::ptr::eq(t.as_ptr(), Arc::as_ptr(turn)))
                .filter_map(|(_, t)| t.upgrade())
                .collect()
        })
        .unwrap_or_default();
    candidates.iter().any(|other| {
        let st = other.state();
        st.holding && st.owner == Some(me)
    })
}

/// A number unique to the calling thread for the process's lifetime.
/// Unlike `std::thread::current()` it allocates nothing in threads that
/// Rust did not start (a C or PHP host's), so valgrind finds no "possibly
/// lost" thread handle in the host at exit.
fn thread_number() -> u64 {
    THREAD.try_with(|n| *n).unwrap_or(0)
}

impl Owner {
    fn current() -> Owner {
        Owner {
            pid: current_pid(),
            thread: thread_number(),
        }
    }
}

impl State {
    /// In a forked child, forgets what belonged to the parent: its turn
    /// (never unlocked here) and its descriptors (closed by the fork handler).
    fn refresh_after_fork(&mut self) {
        let pid = current_pid();
        if self.owner.is_some_and(|o| o.pid != pid) {
            self.owner = None;
            self.holding = false;
            self.slice.end();
            self.waiting_threads = 0;
            self.caller_timeout = None;
            // The child's copy of the connection keeps its copy of the hooks,
            // which find no turn of theirs when they fire.
            self.hooked = None;
        }
        if self.files.as_ref().is_some_and(|f| !f.owned_here()) {
            if let Some(files) = self.files.take() {
                files.discard(false);
            }
            // The child's copy of the mapping; unmapping it touches
            // nothing of the parent's.
            self.page = None;
        }
    }
}

impl Turn {
    fn state(&self) -> MutexGuard<'_, State> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        guard.refresh_after_fork();
        guard
    }

    /// Gives the turn back. Returns false when this handle held none.
    fn release(&self) -> Result<bool> {
        let mut st = self.state();
        if !st.holding {
            return Ok(false);
        }
        let mut result = Ok(true);
        let leaving = st.slice.leaving();
        if let Some(files) = st.files.as_ref() {
            if let Some(page) = st.page.as_ref() {
                page.as_ref().note_releasing();
            }
            files.unmark_turn();
            if let Err(source) = lockfiles::unlock(files.lock.fd()) {
                result = Err(Error::Flock {
                    path: files.lock.path().to_path_buf(),
                    source,
                });
            }
            if let Some(page) = st.page.as_ref() {
                page.as_ref().note_released(leaving);
            }
        }
        st.holding = false;
        st.began = None;
        st.owner = None;
        // Hooks still set on a connection (a turn given back without its
        // transaction ending: the handle dropped, a PHP request's end) must not
        // end a later turn when that transaction ends: they find none of theirs,
        // and clear themselves.
        st.hooked = None;
        let notify = st.waiting_threads > 0;
        drop(st);
        if notify {
            self.turn_free.notify_one();
        }
        result
    }
}

impl WriterQueue {
    /// A queue for the database at `database`, with the default strategy
    /// ([`Strategy::Handoff`]). A relative path is made absolute against
    /// the current directory now, so a later `chdir()` changes nothing.
    /// `:memory:` and an empty path need no queue: their turns are granted
    /// at once.
    pub fn new(database: impl AsRef<Path>) -> WriterQueue {
        WriterQueue::with_strategy(database, Strategy::default())
    }

    /// A queue for the connection's own main database file, so the path is
    /// never typed twice. Fails when the connection cannot tell its file.
    pub fn for_connection<S: SqliteSession + ?Sized>(conn: &S) -> Result<WriterQueue> {
        database_of(conn).map(WriterQueue::new)
    }

    /// A queue with an explicit waiting strategy (benchmarks compare them).
    pub fn with_strategy(database: impl AsRef<Path>, strategy: Strategy) -> WriterQueue {
        let given = database.as_ref();
        let database = if paths::is_in_memory(given) || given.is_absolute() {
            given.to_path_buf()
        } else {
            // Fails only without a current directory; the path then stays as given.
            std::path::absolute(given).unwrap_or_else(|_| given.to_path_buf())
        };
        WriterQueue {
            in_memory: paths::is_in_memory(&database),
            database,
            strategy,
            turn: Arc::new(Turn::default()),
        }
    }

    /// The database this queue serves (absolute, or the in-memory name).
    pub fn database(&self) -> &Path {
        &self.database
    }

    /// The waiting strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.turn.state()
    }

    /// Whether this handle holds the writer turn (in this process).
    pub fn holding(&self) -> bool {
        self.state().holding
    }

    /// Whether the calling thread holds this handle's turn through a
    /// `begin` on the connection `id` (never for an unknown connection).
    fn began_here(&self, id: Option<usize>) -> bool {
        let st = self.state();
        st.holding
            && id.is_some()
            && st.began == id
            && st.owner.is_some_and(|o| o.thread == thread_number())
    }

    /// How long the last turn (a `begin`, a queued statement or a `take`)
    /// waited before it was granted.
    pub fn last_wait(&self) -> Duration {
        self.state().last_wait
    }

    /// Checks that `conn`'s main database is the file this queue serves
    /// (by device and inode), refusing with [`Error::WrongDatabase`]
    /// otherwise, and refusing with [`Error::DatabaseReplaced`] a connection
    /// whose open file is no longer the file at its path (renamed over or
    /// removed). `begin` and `execute` check at each turn's start; the
    /// answer of the first check is kept per connection file name. A
    /// connection that cannot tell its file passes.
    pub fn check_connection<S: SqliteSession + ?Sized>(&self, conn: &S) -> Result<()> {
        let file = match conn.main_database_file() {
            Ok(Some(file)) => file,
            Ok(None) => return Ok(()),
            Err(failure) => {
                return Err(Error::Sqlite {
                    statement: "reading the connection's database file",
                    failure,
                })
            }
        };
        if conn.has_moved() == Some(true) {
            return Err(Error::DatabaseReplaced { path: file });
        }
        if self.state().checked_file.as_deref() == Some(file.as_path()) {
            return Ok(());
        }
        let same = if self.in_memory || paths::is_in_memory(&file) {
            self.in_memory && paths::is_in_memory(&file)
        } else {
            same_file(&self.database, &file)
        };
        if !same {
            return Err(Error::WrongDatabase {
                queue_database: self.database.clone(),
                connection_database: file,
            });
        }
        self.state().checked_file = Some(file);
        Ok(())
    }

    /// Takes the writer turn without starting a transaction, for hosts that
    /// run `BEGIN` themselves. Returns how long it waited. `kind` picks the
    /// busy message if the limit runs out.
    pub fn take(&self, kind: BusyKind, wait: &Wait) -> Result<Duration> {
        let deadline = Deadline::of(wait);
        self.take_until(kind, wait, &deadline)?;
        let waited = deadline.waited();
        self.state().last_wait = waited;
        Ok(waited)
    }

    /// Gives the turn back. Returns false when this handle held none.
    pub fn release(&self) -> Result<bool> {
        self.turn.release()
    }

    /// Sets the commit and rollback hooks of `conn`, where its host allows
    /// them, so a transaction the host ends gives this turn back at once.
    fn hook<S: SqliteSession + ?Sized>(&self, conn: &S) {
        let Some(db) = conn.end_hooks_handle().filter(|db| !db.is_null()) else {
            return;
        };
        self.unhook(conn);
        let target = Arc::new(HookTarget {
            turn: Arc::downgrade(&self.turn),
            db: db as usize,
            quiet: std::sync::atomic::AtomicBool::new(false),
        });
        let arg = Arc::into_raw(Arc::clone(&target));
        // SAFETY: an open connection; the reference made raw lives until the hooks are
        // cleared (HookTarget::unhook).
        unsafe { sqlite::set_end_hooks(db, Some((on_rollback, on_commit)), arg.cast_mut().cast()) };
        self.state().hooked = Some(Hooked { target });
    }

    /// Clears the hooks this handle set on `conn`, if they are still set.
    fn unhook<S: SqliteSession + ?Sized>(&self, conn: &S) {
        let Some(db) = conn.end_hooks_handle() else {
            return;
        };
        let hooked = self.state().hooked.take_if(|h| h.target.db == db as usize);
        if let Some(hooked) = hooked {
            // SAFETY: the hooks were set on this connection, open as the caller uses it, and
            // have not fired (they would have taken `hooked`).
            unsafe { HookTarget::unhook(Arc::as_ptr(&hooked.target)) };
        }
    }

    /// Makes the hooks of this turn do nothing (while the queue's own
    /// `COMMIT` or `ROLLBACK` runs), or act again.
    fn quiet_hooks(&self, quiet: bool) {
        if let Some(hooked) = self.state().hooked.as_ref() {
            hooked.target.quiet.store(quiet, Ordering::Release);
        }
    }

    fn busy(&self, kind: BusyKind, wait: &Wait, deadline: &Deadline) -> Error {
        // Read the clock before the /proc/locks lookup, which takes time.
        let waited = deadline.waited();
        let (holder_pid, outside_pid) = if self.in_memory {
            (None, None)
        } else {
            holders::holder_and_outside_writer(&self.database, current_pid())
        };
        Error::Busy(Busy {
            kind,
            waited,
            limit: wait.limit(),
            setting: wait.setting().to_string(),
            holder_pid,
            outside_pid,
        })
    }

    fn interrupted(kind: BusyKind, deadline: &Deadline) -> Error {
        Error::Interrupted {
            kind,
            waited: deadline.waited(),
        }
    }

    fn take_until(&self, kind: BusyKind, wait: &Wait, deadline: &Deadline) -> Result<()> {
        let me = Owner::current();
        if !self.in_memory && taken_through_another_handle(&self.database, &self.turn, me) {
            return Err(Error::HeldThroughAnotherHandle {
                database: self.database.clone(),
            });
        }
        let mut st = {
            let mut st = self.state();
            loop {
                match st.owner {
                    None => break,
                    Some(owner) if owner.thread == me.thread => return Err(Error::AlreadyHolding),
                    Some(_) => {
                        let left = deadline.left();
                        if left.is_zero() {
                            drop(st);
                            return Err(self.busy(kind, wait, deadline));
                        }
                        st.waiting_threads += 1;
                        st = self
                            .turn
                            .turn_free
                            .wait_timeout(st, deadline.nap(left))
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                        st.waiting_threads = st.waiting_threads.saturating_sub(1);
                        if st.owner.is_some() {
                            // The check runs without the state's mutex: a
                            // host's check may take its interpreter lock,
                            // which a thread asking holding() may hold.
                            drop(st);
                            if deadline.interrupted() {
                                return Err(Self::interrupted(kind, deadline));
                            }
                            st = self.state();
                        } else {
                            st.refresh_after_fork();
                        }
                    }
                }
            }
            if self.in_memory {
                st.owner = Some(me);
                st.holding = true;
                return Ok(());
            }
            st.owner = Some(me);
            st
        };
        loop {
            let outcome = match self.prepare_files(st, kind, deadline) {
                Ok(Prepared::TakenBack) => Ok(true),
                Ok(Prepared::Wait(view, page)) => {
                    // A panic inside the wait (a host's interrupt check) must not leave
                    // the handle owned by a wait that no longer runs.
                    let unwinding = ResetOnUnwind {
                        queue: self,
                        lock_fd: view.lock_fd,
                    };
                    // A turn granted in arrival order: not taken back within a slice.
                    let outcome = match page {
                        Some(page) => crate::handoff::wait_for_turn(&view, page, deadline),
                        None => crate::polling::wait_for_turn(&view, deadline),
                    }
                    .map(|()| false);
                    std::mem::forget(unwinding);
                    outcome
                }
                Err(err) => {
                    self.give_up_ownership();
                    return Err(err);
                }
            };

            st = self.state();
            let gave = match outcome {
                Ok(took_back) => match confirm_turn(&mut st) {
                    Ok(Confirmed::Held) => {
                        st.holding = true;
                        note_taken(&self.database, &self.turn);
                        if took_back {
                            st.slice.took_back();
                        } else {
                            st.slice.granted();
                        }
                        return Ok(());
                    }
                    // The files were reopened: wait again on them.
                    Ok(Confirmed::Reopen) => continue,
                    // Another writer holds the turn through a lock file
                    // removed or replaced since: wait for it by polling.
                    Ok(Confirmed::HeldElsewhere) => {
                        if deadline.passed() {
                            Gave::Up
                        } else {
                            drop(st);
                            if !deadline.sleep(poll_pause(deadline.waited())) {
                                self.give_up_ownership();
                                return Err(Self::interrupted(kind, deadline));
                            }
                            st = self.state();
                            continue;
                        }
                    }
                    Err(source) => Gave::Failed(source),
                },
                Err(gave) => gave,
            };
            st.owner = None;
            let path = st
                .files
                .as_ref()
                .map(|f| f.lock.path().to_path_buf())
                .unwrap_or_default();
            let notify = st.waiting_threads > 0;
            drop(st);
            if notify {
                self.turn.turn_free.notify_one();
            }
            return match gave {
                Gave::Up => Err(self.busy(kind, wait, deadline)),
                Gave::Interrupted => Err(Self::interrupted(kind, deadline)),
                Gave::Failed(source) => Err(Error::Flock { path, source }),
            };
        }
    }

    /// Clears the handle's owner after a failed turn and wakes a thread
    /// waiting for it.
    fn give_up_ownership(&self) {
        let mut st = self.state();
        st.owner = None;
        let notify = st.waiting_threads > 0;
        drop(st);
        if notify {
            self.turn.turn_free.notify_one();
        }
    }

    /// With the handle owned by the calling thread: opens the lock files if
    /// none are open (or the open ones are no longer the files at their
    /// paths) and maps the hand-off page, and returns what the wait needs;
    /// within a hand-off slice, takes the lock straight back first if it is
    /// free ([`Prepared::TakenBack`]).
    fn prepare_files<'q>(
        &'q self,
        mut st: MutexGuard<'q, State>,
        kind: BusyKind,
        deadline: &Deadline,
    ) -> Result<Prepared> {
        // Within a hand-off slice the lock is first taken straight back if it is free, before
        // the files are checked: the check after the lock is taken (confirm_turn) is the one
        // that keeps writers apart, and this one, which spares a wait on files no longer at
        // their paths, is then needed only by a turn that waits.
        if st.slice.open() {
            if let (Some(files), Some(page)) = (st.files.as_ref(), st.page.as_ref()) {
                if crate::handoff::take_back_in_slice(files.lock.fd(), page.as_ref()) {
                    return Ok(Prepared::TakenBack);
                }
            }
        }
        if st.files.as_ref().is_some_and(|f| !f.are_current()) {
            // Removed or replaced by an operator since the last turn: the
            // descriptors exclude nobody who opens the paths now.
            st.page = None;
            if let Some(files) = st.files.take() {
                files.discard(false);
            }
            st.slice.end();
        }
        if st.files.is_none() {
            // Opened without the state's mutex (an open may wait for a
            // lease, up to the limit), the handle owned meanwhile.
            drop(st);
            let opened = LockFiles::open(&self.database, kind, deadline).map(|files| {
                let page = (self.strategy == Strategy::Handoff && files.queue.writable())
                    .then(|| Page::map(files.queue.fd()))
                    .flatten();
                (files, page)
            });
            st = self.state();
            let (files, page) = opened?;
            st.files = Some(files);
            st.page = page;
        }
        let Some(files) = st.files.as_ref() else {
            return Err(Error::NotHolding);
        };
        let view = FilesView {
            lock_fd: files.lock.fd(),
            queue_fd: files.queue.fd(),
        };
        let page = st.page.as_ref().map(|p| p.as_ref());
        // A slice's straight-back try was made above.
        Ok(Prepared::Wait(view, page))
    }

    /// Checks that `conn` writes this queue's database, waits for the turn
    /// within `wait`, sets the connection's busy timeout to the time left
    /// and runs `BEGIN IMMEDIATE`. The caller's busy timeout comes back when
    /// the transaction ends (or here, when it could not start). On any
    /// failure the turn is given back and nothing was written.
    pub fn begin<S: SqliteSession + ?Sized>(&self, conn: &S, wait: &Wait) -> Result<()> {
        let open = conn.in_transaction();
        if open == Some(true) {
            return Err(Error::InTransaction);
        }
        if open == Some(false) && self.began_here(conn.connection_id()) {
            // The transaction of this thread's last `begin` was ended by the host without the
            // queue (a host whose hooks the queue cannot set): its turn ends now.
            self.release_ended(conn)?;
        }
        self.check_connection(conn)?;
        let caller_timeout = conn
            .busy_timeout()
            .map_err(|failure| Error::NotStarted { failure })?;
        let deadline = Deadline::of(wait);
        self.take_until(BusyKind::Transaction, wait, &deadline)?;
        let started = match begin_immediate(conn, &deadline) {
            Err(Started::Interrupted) => {
                restore_timeout(conn, caller_timeout);
                let _ = self.release();
                return Err(Self::interrupted(BusyKind::Transaction, &deadline));
            }
            Err(Started::Failed(failure)) => Err(failure),
            Ok(()) => Ok(()),
        };
        match started {
            Ok(()) => {
                {
                    let mut st = self.state();
                    st.last_wait = deadline.waited();
                    st.caller_timeout = caller_timeout;
                    st.began = conn.connection_id();
                }
                self.hook(conn);
                Ok(())
            }
            Err(failure) => {
                restore_timeout(conn, caller_timeout);
                let _ = self.release();
                if failure.is_busy() {
                    Err(self.busy(BusyKind::Transaction, wait, &deadline))
                } else {
                    Err(Error::NotStarted { failure })
                }
            }
        }
    }

    /// Commits and gives the turn back. If SQLite refuses the COMMIT the
    /// transaction, and the turn, stay until it ends.
    pub fn commit<S: SqliteSession + ?Sized>(&self, conn: &S) -> Result<()> {
        self.end(conn, "COMMIT")
    }

    /// Rolls back and gives the turn back.
    pub fn rollback<S: SqliteSession + ?Sized>(&self, conn: &S) -> Result<()> {
        self.end(conn, "ROLLBACK")
    }

    fn end<S: SqliteSession + ?Sized>(&self, conn: &S, statement: &'static str) -> Result<()> {
        if !self.holding() {
            return Err(Error::NotHolding);
        }
        self.quiet_hooks(true);
        match conn.exec(statement) {
            Ok(()) => {
                self.unhook(conn);
                self.give_back_timeout(conn);
                self.release()?;
                Ok(())
            }
            Err(failure) => {
                if conn.in_transaction() != Some(true) {
                    self.unhook(conn);
                    self.give_back_timeout(conn);
                    self.release()?;
                } else {
                    self.quiet_hooks(false);
                }
                Err(Error::Sqlite { statement, failure })
            }
        }
    }

    /// Gives the turn back after the caller ended the transaction itself
    /// (its own COMMIT or ROLLBACK, or a script that committed), putting
    /// back the busy timeout the connection had before `begin`. Runs no
    /// statement. Returns false when this handle held no turn.
    pub fn release_ended<S: SqliteSession + ?Sized>(&self, conn: &S) -> Result<bool> {
        self.unhook(conn);
        if !self.holding() {
            return Ok(false);
        }
        self.give_back_timeout(conn);
        self.release()
    }

    /// Restores the busy timeout the connection had before `begin`.
    fn give_back_timeout<S: SqliteSession + ?Sized>(&self, conn: &S) {
        let saved = self.state().caller_timeout.take();
        restore_timeout(conn, saved);
    }

    /// Runs one write statement outside a transaction, in turn, within
    /// `wait` (the busy timeout), after checking that `conn` writes this
    /// queue's database; the connection's own busy timeout comes back
    /// afterwards. A lock SQLite reports at once is tried again within the
    /// time left. Reads, and statements inside an open transaction, run at
    /// once without queueing.
    pub fn execute<S: SqliteSession + ?Sized>(
        &self,
        conn: &S,
        sql: &str,
        wait: &Wait,
    ) -> Result<()> {
        let reads = conn
            .is_read_only(sql)
            .unwrap_or_else(|| looks_read_only(sql));
        if reads || conn.in_transaction() == Some(true) {
            return conn.exec(sql).map_err(|failure| Error::Sqlite {
                statement: "the statement",
                failure,
            });
        }
        self.check_connection(conn)?;
        let caller_timeout = conn.busy_timeout().map_err(|failure| Error::Sqlite {
            statement: "the statement",
            failure,
        })?;
        let wrap = conn.implicit_transactions();
        let result = self.run_queued(wait, |left| {
            conn.set_busy_timeout(left)?;
            if !wrap {
                return conn.exec(sql);
            }
            // The host would open a (deferred) transaction of its own and leave it open:
            // the statement gets the queue's own instead, ended before the turn is.
            conn.exec("BEGIN IMMEDIATE")?;
            let done = conn.exec(sql).and_then(|()| conn.exec("COMMIT"));
            if done.is_err() && conn.in_transaction() != Some(false) {
                let _ = conn.exec("ROLLBACK");
            }
            done
        });
        restore_timeout(conn, caller_timeout);
        result
    }

    /// Runs `statement` in turn within `wait`, retrying while SQLite reports
    /// a lock, for hosts that bind parameters themselves. `statement` gets
    /// the time left, to use as its busy timeout.
    pub fn run_queued<T>(
        &self,
        wait: &Wait,
        mut statement: impl FnMut(Duration) -> std::result::Result<T, SqliteFailure>,
    ) -> Result<T> {
        let deadline = Deadline::of(wait);
        self.take_until(BusyKind::Statement, wait, &deadline)?;
        self.state().last_wait = deadline.waited();
        loop {
            // With an interrupt check, SQLite's own busy wait (a writer
            // outside the queue) runs in slices with the check between.
            match statement(deadline.nap(deadline.left())) {
                Ok(value) => {
                    self.release()?;
                    return Ok(value);
                }
                Err(failure) if failure.is_busy() && !deadline.passed() => {
                    if !deadline.sleep(poll_pause(deadline.waited())) {
                        let _ = self.release();
                        return Err(Self::interrupted(BusyKind::Statement, &deadline));
                    }
                }
                Err(failure) => {
                    let _ = self.release();
                    return Err(if failure.is_busy() {
                        self.busy(BusyKind::Statement, wait, &deadline)
                    } else {
                        Error::Sqlite {
                            statement: "the statement",
                            failure,
                        }
                    });
                }
            }
        }
    }
}

/// What a turn's wait starts from ([`WriterQueue::prepare_files`]).
enum Prepared {
    /// Within its hand-off slice the writer took the lock straight back (to be confirmed).
    TakenBack,
    /// The files to wait on, and the hand-off page where there is one.
    Wait(FilesView, Option<crate::handoff::PageRef>),
}

/// What the lock file's `flock()`, just taken, turned out to be.
enum Confirmed {
    /// The turn: the lock file is the one at its path and no other writer
    /// marks the turn on the queue file.
    Held,
    /// A lock file or queue file was removed or replaced: the descriptors
    /// were given up, and the wait starts again on the files at the paths.
    Reopen,
    /// Another writer marks the turn on the queue file: it holds the turn
    /// through a lock file removed or replaced since it took it.
    HeldElsewhere,
}

/// Checks the lock just taken (see [`Confirmed`]) and marks the turn on the
/// queue file; on anything but [`Confirmed::Held`] the lock is dropped
/// again (waking the hand-off line).
fn confirm_turn(st: &mut State) -> std::io::Result<Confirmed> {
    let Some(files) = st.files.as_ref() else {
        return Ok(Confirmed::Reopen);
    };
    let confirmed = if files.are_current() {
        files.mark_turn().map(|mark| match mark {
            lockfiles::Flock::Taken => Confirmed::Held,
            lockfiles::Flock::Held => Confirmed::HeldElsewhere,
        })
    } else {
        Ok(Confirmed::Reopen)
    };
    if matches!(confirmed, Ok(Confirmed::Held)) {
        return confirmed;
    }
    let _ = lockfiles::unlock(files.lock.fd());
    if let Some(page) = st.page.as_ref() {
        page.as_ref().note_released(Leaving::Done);
    }
    st.slice.end();
    if matches!(confirmed, Ok(Confirmed::Reopen)) {
        st.page = None;
        if let Some(files) = st.files.take() {
            files.discard(false);
        }
    }
    confirmed
}

/// Why `BEGIN IMMEDIATE` did not start.
enum Started {
    /// SQLite refused it (busy past the deadline, or another failure).
    Failed(SqliteFailure),
    /// The wait's interrupt check ended SQLite's busy wait.
    Interrupted,
}

/// `BEGIN IMMEDIATE` with the time left as busy timeout, which stays the
/// connection's busy timeout for the transaction. With an interrupt check,
/// SQLite's busy handler (waiting for a writer outside the queue) runs in
/// slices of at most [`crate::wait::INTERRUPT_CHECK`], the check between.
fn begin_immediate<S: SqliteSession + ?Sized>(
    conn: &S,
    deadline: &Deadline,
) -> std::result::Result<(), Started> {
    if !deadline.has_interrupt() {
        return conn
            .set_busy_timeout(deadline.left())
            .and_then(|()| conn.exec("BEGIN IMMEDIATE"))
            .map_err(Started::Failed);
    }
    loop {
        conn.set_busy_timeout(deadline.nap(deadline.left()))
            .map_err(Started::Failed)?;
        match conn.exec("BEGIN IMMEDIATE") {
            Ok(()) => {
                return conn.set_busy_timeout(deadline.left()).map_err(|failure| {
                    let _ = conn.exec("ROLLBACK");
                    Started::Failed(failure)
                });
            }
            Err(failure) if failure.is_busy() && !deadline.passed() => {
                if deadline.interrupted() {
                    return Err(Started::Interrupted);
                }
            }
            Err(failure) => return Err(Started::Failed(failure)),
        }
    }
}

/// Armed while a wait runs without the state's mutex: if the wait unwinds
/// (a panic), the lock it may have just taken is dropped and the handle
/// has no owner again, so the next call works instead of waiting for a
/// turn that never ends.
struct ResetOnUnwind<'a> {
    queue: &'a WriterQueue,
    lock_fd: i32,
}

impl Drop for ResetOnUnwind<'_> {
    fn drop(&mut self) {
        // Unlocking a description that holds no lock is harmless.
        let _ = lockfiles::unlock(self.lock_fd);
        let mut st = self.queue.state();
        st.owner = None;
        st.holding = false;
        let notify = st.waiting_threads > 0;
        drop(st);
        if notify {
            self.queue.turn.turn_free.notify_one();
        }
    }
}

impl Drop for WriterQueue {
    fn drop(&mut self) {
        let mut st = self.turn.state.lock().unwrap_or_else(|p| p.into_inner());
        st.refresh_after_fork();
        let holding = st.holding;
        let page = st.page.take();
        if let Some(files) = st.files.take() {
            if holding && files.owned_here() {
                files.unmark_turn();
                let _ = lockfiles::unlock(files.lock.fd());
                if let Some(page) = page.as_ref() {
                    page.as_ref().note_released(Leaving::Done);
                }
            }
            files.discard(false);
        }
    }
}

/// The main database file of `conn`, for a queue made from the connection.
pub fn database_of<S: SqliteSession + ?Sized>(conn: &S) -> Result<PathBuf> {
    match conn.main_database_file() {
        Ok(Some(file)) if file.as_os_str().is_empty() => Ok(PathBuf::from(":memory:")),
        Ok(Some(file)) => Ok(file),
        Ok(None) => Err(Error::InvalidArgument {
            name: "conn",
            reason: String::from(
                "this connection does not tell which database file it has open; \
                 make the queue with the database's path instead",
            ),
        }),
        Err(failure) => Err(Error::Sqlite {
            statement: "reading the connection's database file",
            failure,
        }),
    }
}

/// Whether two paths name the same file (device and inode); paths that
/// cannot be examined compare by their text.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// Puts back a busy timeout saved before a turn. SQLite refuses one only on
/// a closed connection, where there is nothing left to restore, so a
/// failure here changes nothing the caller is told.
fn restore_timeout<S: SqliteSession + ?Sized>(conn: &S, saved: Option<Duration>) {
    if let Some(timeout) = saved {
        let _ = conn.set_busy_timeout(timeout);
    }
}
