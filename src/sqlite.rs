//! The few things the queue asks of a SQLite connection.
//!
//! The queue never opens a connection of its own: it drives the host's
//! (a `rusqlite::Connection`, a C caller's `sqlite3*`, PHP's `SQLite3`, a
//! Python `sqlite3.Connection`) through [`SqliteSession`], so every host keeps
//! the one system `libsqlite3` it already uses.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use libsqlite3_sys as ffi;

use crate::error::SqliteFailure;

/// A connection the queue can start and end transactions on.
pub trait SqliteSession {
    /// Runs one or more statements that return no rows.
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure>;

    /// Sets SQLite's busy timeout, so writers outside the queue are waited
    /// for within the time left.
    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure>;

    /// Whether the connection is inside a transaction (`None`: unknown).
    fn in_transaction(&self) -> Option<bool> {
        None
    }

    /// Whether `sql` only reads (`None`: unknown, and the queue decides by
    /// the statement's first word).
    fn is_read_only(&self, _sql: &str) -> Option<bool> {
        None
    }

    /// The connection's main database file as SQLite names it
    /// (`sqlite3_db_filename(db, "main")`, an absolute path): an empty path
    /// for an in-memory or temporary database, `Ok(None)` when the host
    /// cannot tell (the queue then skips its check that the connection and
    /// the queue serve the same database).
    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        Ok(None)
    }

    /// The connection's busy timeout (`PRAGMA busy_timeout`), which the queue
    /// restores when a turn ends; `Ok(None)` when the host cannot tell (it is
    /// then left at the time that was left of the wait).
    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        Ok(None)
    }

    /// Whether the connection's open main database file is no longer the
    /// file at its path (renamed over, or removed), as SQLite's
    /// `SQLITE_FCNTL_HAS_MOVED` tells; `None` when the host cannot tell.
    fn has_moved(&self) -> Option<bool> {
        None
    }

    /// Whether the host opens a transaction of its own before a write run
    /// outside one (Python's `sqlite3` in its default mode, where
    /// `isolation_level` is not `None`). The queue then runs a queued
    /// statement inside its own `BEGIN IMMEDIATE` … `COMMIT`, so the host
    /// opens none and nothing is left uncommitted when the turn ends.
    fn implicit_transactions(&self) -> bool {
        false
    }

    /// The connection's handle, when the queue may set the connection's
    /// commit and rollback hooks (`sqlite3_commit_hook`,
    /// `sqlite3_rollback_hook`) for the length of a transaction it began, so
    /// that a transaction the host ends on its own (Python's `with conn:`, a
    /// script's `COMMIT`) gives the turn back at once. Only for hosts that
    /// offer no such hooks to their own users, since SQLite keeps one of each
    /// per connection: `None` (the default) leaves the hooks alone.
    fn end_hooks_handle(&self) -> Option<*mut ffi::sqlite3> {
        None
    }

    /// A number that tells this connection from the host's others while it
    /// is open (its `sqlite3*` address, where the host has one), so that a
    /// `begin` on the connection whose transaction the host ended ends the
    /// turn that transaction held; `None` when the host cannot tell.
    fn connection_id(&self) -> Option<usize> {
        None
    }
}

/// Called by SQLite as a transaction of the hooked connection commits (before the commit is
/// durable) or rolls back; the argument is the one given to [`set_end_hooks`].
pub(crate) type EndHook = unsafe extern "C" fn(*mut std::ffi::c_void);

/// Sets the commit and rollback hooks of `db` to `hook` with `arg`, or clears both with
/// `None`. Returns the commit hook's argument before (SQLite tells only that).
///
/// # Safety
/// `db` must be an open connection; `arg` must stay valid while the hooks are set.
pub(crate) unsafe fn set_end_hooks(
    db: *mut ffi::sqlite3,
    hook: Option<(EndHook, CommitHook)>,
    arg: *mut std::ffi::c_void,
) -> *mut std::ffi::c_void {
    let (rollback, commit) = match hook {
        Some((rollback, commit)) => (Some(rollback), Some(commit)),
        None => (None, None),
    };
    let before = ffi::sqlite3_commit_hook(db, commit, arg);
    ffi::sqlite3_rollback_hook(db, rollback, arg);
    before
}

/// Called by SQLite as a transaction commits; nonzero turns the commit into a rollback.
pub(crate) type CommitHook = unsafe extern "C" fn(*mut std::ffi::c_void) -> std::ffi::c_int;

/// Decides from its first keyword whether a statement only reads: `SELECT`,
/// `VALUES`, `EXPLAIN` and a `PRAGMA` without `=` read; everything else,
/// `WITH` included (it may lead an INSERT), counts as a write.
pub fn looks_read_only(sql: &str) -> bool {
    let mut rest = sql.trim_start();
    // Skip leading comments.
    loop {
        if let Some(after) = rest.strip_prefix("--") {
            rest = after
                .split_once('\n')
                .map(|(_, r)| r)
                .unwrap_or("")
                .trim_start();
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after
                .split_once("*/")
                .map(|(_, r)| r)
                .unwrap_or("")
                .trim_start();
        } else {
            break;
        }
    }
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    match word.as_str() {
        "SELECT" | "VALUES" | "EXPLAIN" => true,
        "PRAGMA" => !rest.contains('='),
        _ => false,
    }
}

fn clamp_millis(timeout: Duration) -> i32 {
    timeout.as_millis().min(i32::MAX as u128) as i32
}

impl SqliteSession for rusqlite::Connection {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        if own_statement(sql).is_some() {
            // The queue's own statements stay prepared in the connection's cache.
            return self
                .prepare_cached(sql)
                .and_then(|mut statement| statement.execute([]).map(|_| ()))
                .map_err(failure_from_rusqlite);
        }
        self.execute_batch(sql).map_err(failure_from_rusqlite)
    }

    fn has_moved(&self) -> Option<bool> {
        // SAFETY: the handle stays valid while `self` is borrowed.
        unsafe { RawSqlite::from_handle(self.handle()) }.and_then(|raw| raw.has_moved())
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        self.busy_timeout(timeout).map_err(failure_from_rusqlite)
    }

    fn connection_id(&self) -> Option<usize> {
        // SAFETY: only the address is taken.
        Some(unsafe { self.handle() } as usize)
    }

    fn in_transaction(&self) -> Option<bool> {
        Some(!self.is_autocommit())
    }

    fn is_read_only(&self, sql: &str) -> Option<bool> {
        // SAFETY: the handle stays valid while `self` is borrowed.
        unsafe { RawSqlite::from_handle(self.handle()) }.and_then(|raw| raw.is_read_only(sql))
    }

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        // SAFETY: the handle stays valid while `self` is borrowed.
        match unsafe { RawSqlite::from_handle(self.handle()) } {
            Some(raw) => raw.main_database_file(),
            None => Ok(None),
        }
    }

    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        // Read at every turn's start: the statement is kept prepared in the
        // connection's cache rather than parsed each time.
        self.prepare_cached("PRAGMA busy_timeout")
            .and_then(|mut statement| statement.query_row([], |row| row.get::<_, i64>(0)))
            .map(|ms| Some(Duration::from_millis(ms.max(0) as u64)))
            .map_err(failure_from_rusqlite)
    }
}

/// Turns a rusqlite error into SQLite's code and message.
pub fn failure_from_rusqlite(err: rusqlite::Error) -> SqliteFailure {
    match err {
        rusqlite::Error::SqliteFailure(code, message) => SqliteFailure::new(
            code.extended_code,
            message.unwrap_or_else(|| code.to_string()),
        ),
        other => SqliteFailure::new(ffi::SQLITE_ERROR, other.to_string()),
    }
}

/// A borrowed `sqlite3*` from a C caller.
#[derive(Debug, Clone, Copy)]
pub struct RawSqlite {
    db: *mut ffi::sqlite3,
}

impl RawSqlite {
    /// Wraps a connection handle; `None` for a null pointer.
    ///
    /// # Safety
    /// `db` must be an open connection that stays open, and is not used by
    /// another thread, while the wrapper is in use.
    pub unsafe fn from_handle(db: *mut ffi::sqlite3) -> Option<RawSqlite> {
        if db.is_null() {
            None
        } else {
            Some(RawSqlite { db })
        }
    }

    /// The wrapped handle.
    pub fn handle(&self) -> *mut ffi::sqlite3 {
        self.db
    }

    fn failure(&self, rc: i32) -> SqliteFailure {
        // SAFETY: db is valid per the constructor's contract.
        let message = unsafe {
            let ptr = ffi::sqlite3_errmsg(self.db);
            if ptr.is_null() {
                String::from("unknown error")
            } else {
                CStr::from_ptr(ptr).to_string_lossy().into_owned()
            }
        };
        let code = unsafe { ffi::sqlite3_extended_errcode(self.db) };
        SqliteFailure::new(if code != 0 { code } else { rc }, message)
    }
}

fn c_string(sql: &str) -> Result<CString, SqliteFailure> {
    CString::new(sql).map_err(|_| {
        SqliteFailure::new(
            ffi::SQLITE_MISUSE,
            "the statement contains a NUL byte; pass SQL text without NUL characters",
        )
    })
}

impl SqliteSession for RawSqlite {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        let sql = c_string(sql)?;
        let mut errmsg: *mut libc::c_char = std::ptr::null_mut();
        // SAFETY: valid handle and NUL-terminated SQL; errmsg freed below.
        let rc = unsafe {
            ffi::sqlite3_exec(
                self.db,
                sql.as_ptr(),
                None,
                std::ptr::null_mut(),
                &mut errmsg,
            )
        };
        if rc == ffi::SQLITE_OK {
            return Ok(());
        }
        let message = if errmsg.is_null() {
            None
        } else {
            // SAFETY: sqlite3_exec allocated it with sqlite3_malloc.
            let text = unsafe { CStr::from_ptr(errmsg).to_string_lossy().into_owned() };
            unsafe { ffi::sqlite3_free(errmsg.cast()) };
            Some(text)
        };
        let mut failure = self.failure(rc);
        if let Some(message) = message {
            failure.message = message;
        }
        Err(failure)
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        // SAFETY: valid handle.
        let rc = unsafe { ffi::sqlite3_busy_timeout(self.db, clamp_millis(timeout)) };
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(self.failure(rc))
        }
    }

    fn connection_id(&self) -> Option<usize> {
        Some(self.db as usize)
    }

    fn in_transaction(&self) -> Option<bool> {
        // SAFETY: valid handle.
        Some(unsafe { ffi::sqlite3_get_autocommit(self.db) } == 0)
    }

    fn is_read_only(&self, sql: &str) -> Option<bool> {
        let sql = c_string(sql).ok()?;
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        let mut tail: *const libc::c_char = std::ptr::null();
        // SAFETY: valid handle; the statement is finalized below.
        let rc =
            unsafe { ffi::sqlite3_prepare_v2(self.db, sql.as_ptr(), -1, &mut stmt, &mut tail) };
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            if !stmt.is_null() {
                unsafe { ffi::sqlite3_finalize(stmt) };
            }
            return None;
        }
        // SAFETY: stmt was prepared above; tail points into `sql`.
        let read_only = unsafe { ffi::sqlite3_stmt_readonly(stmt) } != 0;
        let more = unsafe {
            !tail.is_null()
                && !CStr::from_ptr(tail)
                    .to_bytes()
                    .iter()
                    .all(|b| b.is_ascii_whitespace() || *b == b';')
        };
        unsafe { ffi::sqlite3_finalize(stmt) };
        // Several statements: decide by the first only when it writes.
        Some(read_only && !more)
    }

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        // SAFETY: valid handle; the name is a static C string. SQLite returns
        // NULL when there is no "main" (never for an open connection) and ""
        // for an in-memory or temporary database; the text stays valid while
        // the connection is open, and is copied at once.
        let name = unsafe { ffi::sqlite3_db_filename(self.db, c"main".as_ptr()) };
        if name.is_null() {
            return Ok(Some(PathBuf::new()));
        }
        let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
        Ok(Some(PathBuf::from(OsStr::from_bytes(bytes))))
    }

    fn has_moved(&self) -> Option<bool> {
        let mut moved: libc::c_int = 0;
        // SAFETY: valid handle; the opcode writes one int through the pointer.
        let rc = unsafe {
            ffi::sqlite3_file_control(
                self.db,
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_HAS_MOVED,
                (&mut moved as *mut libc::c_int).cast(),
            )
        };
        // In-memory databases answer SQLITE_NOTFOUND: nothing to move.
        (rc == ffi::SQLITE_OK).then_some(moved != 0)
    }

    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        // SAFETY: valid handle and a static statement; finalized below.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.db,
                c"PRAGMA busy_timeout".as_ptr(),
                -1,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            let failure = self.failure(rc);
            if !stmt.is_null() {
                unsafe { ffi::sqlite3_finalize(stmt) };
            }
            return Err(failure);
        }
        // SAFETY: stmt was prepared above.
        let rc = unsafe { ffi::sqlite3_step(stmt) };
        let result = if rc == ffi::SQLITE_ROW {
            let ms = unsafe { ffi::sqlite3_column_int64(stmt, 0) };
            Ok(Some(Duration::from_millis(ms.max(0) as u64)))
        } else {
            Err(self.failure(rc))
        };
        unsafe { ffi::sqlite3_finalize(stmt) };
        result
    }
}

/// Whether the shared object at `path`, already loaded into this process (a
/// host's SQLite module: Python's `_sqlite3`, PHP's `sqlite3.so`), calls the
/// same `libsqlite3` this crate does rather than a copy of SQLite linked
/// into it. Only then may a connection handle from that module be driven
/// here: a handle of one copy of SQLite passed to another is undefined
/// behaviour. False for anything that cannot be checked.
pub fn shares_this_sqlite(path: &std::path::Path) -> bool {
    let Ok(name) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: RTLD_NOLOAD only looks the object up (it loads nothing, runs
    // no constructor) and the reference it takes is dropped below.
    unsafe {
        let module = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if module.is_null() {
            return false;
        }
        // Searched in the module, then in its dependencies in load order: a
        // module linking the system library finds that library's symbol.
        let theirs = libc::dlsym(module, c"sqlite3_libversion".as_ptr());
        libc::dlclose(module);
        let ours = ffi::sqlite3_libversion as *const libc::c_void;
        !theirs.is_null() && std::ptr::eq(theirs.cast_const(), ours)
    }
}

/// The statements the queue itself runs on a connection, in [`SqliteHandle`]'s slot order.
const OWN_STATEMENTS: [&CStr; 4] = [
    c"BEGIN IMMEDIATE",
    c"COMMIT",
    c"ROLLBACK",
    c"PRAGMA busy_timeout",
];

/// The slot of one of the queue's own statements, `None` for any other SQL.
fn own_statement(sql: &str) -> Option<usize> {
    OWN_STATEMENTS
        .iter()
        .position(|own| own.to_bytes() == sql.as_bytes())
}

/// One prepared statement, used by one thread at a time.
struct Slot(std::sync::Mutex<*mut ffi::sqlite3_stmt>);

/// A host connection's own `sqlite3*` with the queue's statements
/// (`BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`, `PRAGMA busy_timeout`) prepared
/// once, at their first use, and finalized when the handle is dropped.
///
/// This is how a host whose connection object hides its handle behind a
/// statement layer of its own (Python's `sqlite3`) is driven without going
/// through that layer: each turn then costs no parsing and no host-level
/// call. Every other method is [`RawSqlite`]'s.
///
/// Prepared statements keep a connection closed with `sqlite3_close_v2()`
/// allocated (a "zombie") until they are finalized, so the handle's address
/// is never reused by another connection while this value lives; a host
/// whose close is `sqlite3_close()` (which refuses to close with statements
/// outstanding) must not keep one across its caller's calls.
pub struct SqliteHandle {
    raw: RawSqlite,
    slots: [Slot; 4],
    /// The descriptor SQLite holds on the main database file, once found
    /// ([`SqliteHandle::open_descriptor`]): `UNKNOWN` before, `UNUSABLE` when
    /// it cannot be found safely.
    open_fd: std::sync::atomic::AtomicI32,
}

/// [`SqliteHandle::open_fd`] before the first look.
const UNKNOWN: i32 = -1;
/// [`SqliteHandle::open_fd`] when SQLite's descriptor cannot be found safely.
const UNUSABLE: i32 = -2;

// SAFETY: the connection is used as the host uses it (SQLite's serialized
// threading mode, which the system library and every host here use), and
// each prepared statement is stepped by one thread at a time under its
// slot's mutex.
unsafe impl Send for SqliteHandle {}
// SAFETY: as for Send: shared use goes through the slots' mutexes.
unsafe impl Sync for SqliteHandle {}

impl std::fmt::Debug for SqliteHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteHandle")
            .field("db", &self.raw.db)
            .finish()
    }
}

impl SqliteHandle {
    /// Wraps a connection handle; `None` for a null pointer.
    ///
    /// # Safety
    /// `db` must be an open connection of this process's `libsqlite3`, and
    /// must not be closed with `sqlite3_close()` while this value lives (a
    /// `sqlite3_close_v2()` is fine: it waits for the statements).
    pub unsafe fn new(db: *mut ffi::sqlite3) -> Option<SqliteHandle> {
        let raw = RawSqlite::from_handle(db)?;
        Some(SqliteHandle {
            raw,
            slots: std::array::from_fn(|_| Slot(std::sync::Mutex::new(std::ptr::null_mut()))),
            open_fd: std::sync::atomic::AtomicI32::new(UNKNOWN),
        })
    }

    /// The descriptor SQLite's unix VFS holds on the main database file, so that a turn can
    /// tell a replaced file with one `fstat()` instead of a `stat()` of the path.
    ///
    /// Found once: `SQLITE_FCNTL_FILE_POINTER` gives the open file, which for SQLite's unix
    /// VFSes (every one named `unix…`, the system library's default) starts with its method
    /// table, its VFS and its inode record, then the descriptor; that layout is used only when
    /// the file's VFS pointer is the connection's (`SQLITE_FCNTL_VFS_POINTER`) and the
    /// descriptor is the file at the path (device and inode). `None` otherwise.
    fn open_descriptor(&self) -> Option<i32> {
        use std::sync::atomic::Ordering;
        match self.open_fd.load(Ordering::Acquire) {
            UNKNOWN => {}
            UNUSABLE => return None,
            fd => return Some(fd),
        }
        let found = self.find_descriptor();
        self.open_fd
            .store(found.unwrap_or(UNUSABLE), Ordering::Release);
        found
    }

    fn find_descriptor(&self) -> Option<i32> {
        use std::os::unix::fs::MetadataExt;
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        let mut vfs: *mut ffi::sqlite3_vfs = std::ptr::null_mut();
        // SAFETY: valid handle; each opcode writes one pointer through the argument.
        unsafe {
            if ffi::sqlite3_file_control(
                self.raw.db,
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_FILE_POINTER,
                (&mut file as *mut *mut ffi::sqlite3_file).cast(),
            ) != ffi::SQLITE_OK
                || ffi::sqlite3_file_control(
                    self.raw.db,
                    c"main".as_ptr(),
                    ffi::SQLITE_FCNTL_VFS_POINTER,
                    (&mut vfs as *mut *mut ffi::sqlite3_vfs).cast(),
                ) != ffi::SQLITE_OK
            {
                return None;
            }
            if file.is_null() || vfs.is_null() || (*file).pMethods.is_null() {
                return None;
            }
            let name = (*vfs).zName;
            if name.is_null() || !CStr::from_ptr(name).to_bytes().starts_with(b"unix") {
                return None;
            }
            // unixFile: pMethod, pVfs, pInode, then `int h`.
            let words = file.cast::<*const libc::c_void>();
            if words.add(1).read() != vfs.cast_const().cast() {
                return None;
            }
            let fd = words.add(3).cast::<libc::c_int>().read();
            if fd < 0 {
                return None;
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 {
                return None;
            }
            let path = self.raw.main_database_file().ok()??;
            let at_path = std::fs::metadata(&path).ok()?;
            (at_path.dev() == st.st_dev && at_path.ino() == st.st_ino).then_some(fd)
        }
    }

    /// The wrapped handle.
    pub fn handle(&self) -> *mut ffi::sqlite3 {
        self.raw.db
    }

    /// Whether `sql` is one of the statements the queue itself runs
    /// (`BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`, `PRAGMA busy_timeout`),
    /// which this handle keeps prepared.
    pub fn is_own_statement(sql: &str) -> bool {
        own_statement(sql).is_some()
    }

    /// Steps the statement of `slot`, preparing it first if needed, and
    /// hands its first row (if any) to `row`; the statement is reset after.
    fn step<T>(
        &self,
        slot: usize,
        row: impl FnOnce(*mut ffi::sqlite3_stmt) -> T,
    ) -> Result<Option<T>, SqliteFailure> {
        let mut stmt = self.slots[slot].0.lock().unwrap_or_else(|p| p.into_inner());
        if stmt.is_null() {
            let mut prepared: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
            // SAFETY: valid handle and a static statement; the result is
            // finalized in Drop.
            let rc = unsafe {
                ffi::sqlite3_prepare_v2(
                    self.raw.db,
                    OWN_STATEMENTS[slot].as_ptr(),
                    -1,
                    &mut prepared,
                    std::ptr::null_mut(),
                )
            };
            if rc != ffi::SQLITE_OK || prepared.is_null() {
                let failure = self.raw.failure(rc);
                if !prepared.is_null() {
                    unsafe { ffi::sqlite3_finalize(prepared) };
                }
                return Err(failure);
            }
            *stmt = prepared;
        }
        // SAFETY: the statement was prepared on this handle and is used
        // under its slot's mutex.
        let rc = unsafe { ffi::sqlite3_step(*stmt) };
        let result = match rc {
            ffi::SQLITE_ROW => Ok(Some(row(*stmt))),
            ffi::SQLITE_DONE => Ok(None),
            rc => Err(self.raw.failure(rc)),
        };
        unsafe { ffi::sqlite3_reset(*stmt) };
        result
    }
}

impl Drop for SqliteHandle {
    fn drop(&mut self) {
        for slot in &self.slots {
            let stmt = slot.0.lock().unwrap_or_else(|p| p.into_inner());
            if !stmt.is_null() {
                // SAFETY: prepared here and no longer in use.
                unsafe { ffi::sqlite3_finalize(*stmt) };
            }
        }
    }
}

impl SqliteSession for SqliteHandle {
    fn exec(&self, sql: &str) -> Result<(), SqliteFailure> {
        match own_statement(sql) {
            Some(slot) => self.step(slot, |_| ()).map(|_| ()),
            None => self.raw.exec(sql),
        }
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), SqliteFailure> {
        self.raw.set_busy_timeout(timeout)
    }

    fn in_transaction(&self) -> Option<bool> {
        self.raw.in_transaction()
    }

    fn is_read_only(&self, sql: &str) -> Option<bool> {
        self.raw.is_read_only(sql)
    }

    fn main_database_file(&self) -> Result<Option<PathBuf>, SqliteFailure> {
        self.raw.main_database_file()
    }

    fn busy_timeout(&self) -> Result<Option<Duration>, SqliteFailure> {
        // SAFETY (in the closure): the row of PRAGMA busy_timeout has one column.
        let ms = self.step(3, |stmt| unsafe { ffi::sqlite3_column_int64(stmt, 0) })?;
        Ok(ms.map(|ms| Duration::from_millis(ms.max(0) as u64)))
    }

    fn connection_id(&self) -> Option<usize> {
        Some(self.raw.db as usize)
    }

    fn end_hooks_handle(&self) -> Option<*mut ffi::sqlite3> {
        // The hosts this handle serves (Python's sqlite3) give their users no commit or
        // rollback hook of SQLite's, so setting them takes nothing from anyone.
        Some(self.raw.db)
    }

    fn has_moved(&self) -> Option<bool> {
        // A file renamed over, or removed, has no link left: one fstat() of SQLite's own
        // descriptor tells, where it is known; otherwise SQLite compares the path.
        if let Some(fd) = self.open_descriptor() {
            // SAFETY: zeroed stat is a valid out-argument; the descriptor is SQLite's, open
            // while the connection is.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstat(fd, &mut st) } == 0 {
                if st.st_nlink == 0 {
                    return Some(true);
                }
                // Still linked. (A file with a second hard link elsewhere keeps one when it
                // is renamed over: that case goes unnoticed.)
                return Some(false);
            }
        }
        self.raw.has_moved()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_keyword_decides() {
        assert!(looks_read_only("  select 1"));
        assert!(looks_read_only("-- hi\nSELECT 1"));
        assert!(looks_read_only("PRAGMA journal_mode"));
        assert!(!looks_read_only("PRAGMA journal_mode = wal"));
        assert!(!looks_read_only("INSERT INTO t VALUES (1)"));
        assert!(!looks_read_only(
            "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x"
        ));
    }

    #[test]
    fn rusqlite_connection_reports_read_only_statements() {
        let conn = rusqlite::Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t(x)").expect("create");
        assert_eq!(conn.is_read_only("SELECT * FROM t"), Some(true));
        assert_eq!(conn.is_read_only("INSERT INTO t VALUES (1)"), Some(false));
        assert_eq!(conn.in_transaction(), Some(false));
    }
}
