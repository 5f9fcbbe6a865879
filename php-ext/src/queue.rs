//! `WriterLock\Queue`: one database's write queue, for PHP's `\SQLite3`.
//!
//! The core [`WriterQueue`] behind a `Queue` object is kept per database path
//! for the life of the worker process, so a long-lived worker (a PHP-FPM worker
//! serving many requests, a CLI worker serving many jobs) opens the lock
//! files once and keeps them across requests: a `new Queue($path)` in each
//! request finds the handle the previous request used. After `pcntl_fork()`
//! the core gives the child its own files and never lets it touch the
//! parent's turn. A turn never outlives its request: the object gives it
//! back when PHP frees it, and the request shutdown gives back any turn still
//! held (the request's `SQLite3` objects close, and roll back, with it).

// PHP parameter names are camelCase (`$databasePath`, `$waitSeconds`), and
// ext-php-rs takes them from the Rust parameter names.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ext_php_rs::convert::FromZvalMut;
use ext_php_rs::convert::IntoZval;
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::{ClassFlags, DataType};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendCallable, ZendObject, Zval};
use ext_php_rs::zend::{ce, ClassEntry, ExecutorGlobals};
use writerlock::lockfiles::{is_in_memory, lock_path};
use writerlock::transaction::{self, AfterCommit, Connection, Step};
use writerlock::wait::{self, MIN_TRANSACTION_WAIT};
use writerlock::{BusyKind, Error, SqliteFailure, SqliteSession, Wait, WriterQueue};

use crate::exceptions::{self, BusyDetails, Kind};
use crate::interrupt::{self, Stopped};
use crate::session::{ConnKind, PhpSqlite, SQLITE_MISUSE};
use crate::zend;

/// The queues of this PHP worker (the process; in a threaded PHP build, the
/// request thread), one per database path. They are never dropped, so their
/// lock files stay open across requests. A thread of its own keeps queues of
/// its own: two handles exclude each other like two processes.
#[derive(Default)]
struct Registry {
    pid: u32,
    queues: HashMap<PathBuf, Arc<WriterQueue>>,
    transactions: u64,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    REGISTRY.with(|cell| {
        let mut reg = cell.borrow_mut();
        let pid = std::process::id();
        if reg.pid != pid {
            // A forked child: the queues stay (the core refreshes their
            // files), the count starts again for this process.
            reg.pid = pid;
            reg.transactions = 0;
        }
        f(&mut reg)
    })
}

fn shared_queue(path: &Path) -> Arc<WriterQueue> {
    with_registry(|reg| {
        Arc::clone(
            reg.queues
                .entry(path.to_path_buf())
                .or_insert_with(|| Arc::new(WriterQueue::new(path))),
        )
    })
}

fn count_transaction() {
    with_registry(|reg| reg.transactions += 1);
}

/// What phpinfo() shows about this worker: queues kept open, queued
/// transactions begun.
pub(crate) fn worker_figures() -> (usize, u64) {
    with_registry(|reg| (reg.queues.len(), reg.transactions))
}

/// Gives back every turn this worker still holds; runs at request shutdown.
pub(crate) fn release_all() {
    let queues: Vec<Arc<WriterQueue>> = with_registry(|reg| reg.queues.values().cloned().collect());
    for queue in queues {
        if queue.holding() {
            let _ = queue.release();
        }
    }
}

/// A `\SQLite3` or `PDO` (sqlite driver) argument. Declared with the union
/// type in the argument info (reflection and stubs show `SQLite3|PDO $db`),
/// checked at the call.
pub struct DbArg<'a>(&'a mut Zval);

impl<'a> FromZvalMut<'a> for DbArg<'a> {
    const TYPE: DataType = DataType::object("SQLite3|PDO");

    fn from_zval_mut(zval: &'a mut Zval) -> Option<Self> {
        Some(DbArg(zval))
    }
}

fn type_name(zv: &Zval) -> String {
    if let Some(object) = zv.object() {
        return object
            .get_class_name()
            .unwrap_or_else(|_| String::from("object"));
    }
    let name = match zv.get_type() {
        DataType::Null => "null",
        DataType::False | DataType::True | DataType::Bool => "bool",
        DataType::Long => "int",
        DataType::Double => "float",
        DataType::String => "string",
        DataType::Array => "array",
        DataType::Resource => "resource",
        _ => "mixed",
    };
    name.to_string()
}

/// A `callable` argument, checked at the call (so a bad one gets PHP's
/// own wording).
pub struct Callback<'a>(&'a Zval);

impl<'a> FromZvalMut<'a> for Callback<'a> {
    const TYPE: DataType = DataType::Callable;

    fn from_zval_mut(zval: &'a mut Zval) -> Option<Self> {
        Some(Callback(zval))
    }
}

/// `PDO::ATTR_DRIVER_NAME`.
const PDO_ATTR_DRIVER_NAME: i64 = 16;

fn type_error(message: String) -> PhpException {
    PhpException::new(message, 0, ce::type_error())
}

static SQLITE3_CLASS: AtomicUsize = AtomicUsize::new(0);
static PDO_CLASS: AtomicUsize = AtomicUsize::new(0);

/// An internal class (`SQLite3`, `PDO`), looked up once per process: an
/// extension's classes are registered at its startup and live as long as the
/// process, so the lookup (which lowercases the name into a new string) is
/// not repeated at every call.
fn internal_class(name: &str, cache: &AtomicUsize) -> Option<&'static ClassEntry> {
    let known = cache.load(Ordering::Relaxed);
    if known != 0 {
        // SAFETY: the address of an internal class entry, stored below; it is
        // never freed while the process runs PHP.
        return unsafe { (known as *const ClassEntry).as_ref() };
    }
    let found = ClassEntry::try_find(name)?;
    // ZEND_INTERNAL_CLASS: only those outlive the request.
    if found.type_ == 1 {
        cache.store(std::ptr::from_ref(found) as usize, Ordering::Relaxed);
    }
    Some(found)
}

/// The connection behind a `$db` argument: its object and class.
fn connection<'z>(zv: &'z Zval, method: &str) -> Result<(&'z ZendObject, ConnKind), PhpException> {
    let sqlite3 = internal_class("SQLite3", &SQLITE3_CLASS);
    let pdo = internal_class("PDO", &PDO_CLASS);
    if sqlite3.is_none() && pdo.is_none() {
        return Err(type_error(format!(
            "WriterLock\\Queue::{method}(): Argument #1 ($db) must be of type SQLite3|PDO, \
             but neither the sqlite3 nor the pdo_sqlite extension is loaded; install php8.2-sqlite3 \
             and enable them"
        )));
    }
    let Some(object) = zv.object() else {
        return Err(type_error(format!(
            "WriterLock\\Queue::{method}(): Argument #1 ($db) must be of type SQLite3|PDO, {} given",
            type_name(zv)
        )));
    };
    if sqlite3.is_some_and(|class| object.instance_of(class)) {
        return Ok((object, ConnKind::Sqlite3));
    }
    if !pdo.is_some_and(|class| object.instance_of(class)) {
        return Err(type_error(format!(
            "WriterLock\\Queue::{method}(): Argument #1 ($db) must be of type SQLite3|PDO, {} given",
            type_name(zv)
        )));
    }
    if let Ok(name) = crate::direct::pdo_driver_name(object) {
        // Read from PDO's own struct: no PHP call.
        return match name {
            Some(name) if name.to_bytes() == b"sqlite" => Ok((object, ConnKind::Pdo)),
            Some(name) => Err(PhpException::new(
                format!(
                    "WriterLock\\Queue::{method}(): Argument #1 ($db) must be a PDO connection of \
                     the sqlite driver (a \"sqlite:\" DSN), a PDO of the {} driver given",
                    name.to_string_lossy()
                ),
                0,
                ce::value_error(),
            )),
            None => Err(not_connected()),
        };
    }
    let (driver, thrown) = zend::without_signal_handlers(|| {
        let driver = zend::without_warnings(|| {
            object.try_call_method("getAttribute", vec![&PDO_ATTR_DRIVER_NAME])
        });
        (driver, ExecutorGlobals::take_exception())
    });
    match driver.ok().and_then(|zv| zv.string()) {
        Some(name) if thrown.is_none() && name == "sqlite" => Ok((object, ConnKind::Pdo)),
        Some(name) if thrown.is_none() => Err(PhpException::new(
            format!(
                "WriterLock\\Queue::{method}(): Argument #1 ($db) must be a PDO connection of the \
                 sqlite driver (a \"sqlite:\" DSN), a PDO of the {name} driver given"
            ),
            0,
            ce::value_error(),
        )),
        _ => Err(not_connected()),
    }
}

/// The exception for a PDO object that is not connected.
fn not_connected() -> PhpException {
    to_php(&Error::NotStarted {
        failure: SqliteFailure::new(
            SQLITE_MISUSE,
            String::from("the PDO object is not connected (its constructor did not run or failed)"),
        ),
    })
}

impl DbArg<'_> {
    fn object(&self, method: &str) -> Result<(&ZendObject, ConnKind), PhpException> {
        connection(self.0.dereference(), method)
    }
}

/// A number of seconds (`float`, an `int` accepted as PHP does), or the
/// parameter's default when the caller left it out.
pub enum Seconds<'a> {
    /// What the caller passed, checked at the call.
    Given(&'a mut Zval),
    /// The declared default.
    Default(f64),
}

impl<'a> FromZvalMut<'a> for Seconds<'a> {
    const TYPE: DataType = DataType::Double;

    fn from_zval_mut(zval: &'a mut Zval) -> Option<Self> {
        Some(Seconds::Given(zval))
    }
}

impl From<f64> for Seconds<'_> {
    fn from(value: f64) -> Self {
        Seconds::Default(value)
    }
}

impl ext_php_rs::convert::StubLiteral for Seconds<'_> {
    fn stub_literal(&self) -> String {
        match self {
            Seconds::Default(value) => format!("{value:?}"),
            Seconds::Given(_) => String::from("null"),
        }
    }
}

/// The default wait of `begin()`, `transaction()` and `acquire()`: the core's
/// [`wait::TRANSACTION_WAIT`] (25 s), the default of Exponential's
/// `[DatabaseSettings] SQLiteTransactionWait`.
const DEFAULT_WAIT: f64 = wait::TRANSACTION_WAIT.as_secs_f64();

/// The default wait of `exec()`: the core's [`wait::BUSY_TIMEOUT`] (5 s), the default of
/// Exponential's `[DatabaseSettings] SQLiteBusyTimeout` (5000 ms) and of Python's `execute()`.
const DEFAULT_STATEMENT_WAIT: f64 = wait::BUSY_TIMEOUT.as_secs_f64();

/// What a busy message of `begin()` names by default: the argument its limit came from
/// (Python names "the wait argument", C `wait_seconds of wl_queue_begin`). The queued
/// driver for Exponential passes its INI setting's name instead.
const BEGIN_SETTING: &str = "the waitSeconds argument of WriterLock\\Queue::begin()";
/// What a busy message of `transaction()` names by default.
const TRANSACTION_ARGUMENT: &str = "the waitSeconds argument of WriterLock\\Queue::transaction()";
/// What a busy message of `exec()` names by default.
const EXEC_SETTING: &str = "the waitSeconds argument of WriterLock\\Queue::exec()";
/// What a busy message of `acquire()` names by default.
const ACQUIRE_SETTING: &str = "the waitSeconds argument of WriterLock\\Queue::acquire()";

impl Seconds<'_> {
    fn get(
        &self,
        method: &str,
        position: u8,
        name: &'static str,
    ) -> Result<Duration, PhpException> {
        let zv = match self {
            Seconds::Given(zv) => zv.dereference(),
            Seconds::Default(value) => {
                return Wait::seconds(name, *value).map_err(|_| {
                    PhpException::new(format!("bad default for ${name}"), 0, ce::value_error())
                })
            }
        };
        let value = zv.double().or_else(|| zv.long().map(|l| l as f64));
        let Some(value) = value else {
            return Err(PhpException::new(
                format!(
                    "WriterLock\\Queue::{method}(): Argument #{position} (${name}) must be of type float, {} given",
                    type_name(zv)
                ),
                0,
                ce::type_error(),
            ));
        };
        Wait::seconds(name, value).map_err(|_| {
            PhpException::new(
                format!(
                    "WriterLock\\Queue::{method}(): Argument #{position} (${name}) must be a number \
                     of seconds from 0 up, {value} given"
                ),
                0,
                ce::value_error(),
            )
        })
    }
}

/// Turns a core error into the PHP exception that reports it: its class from the one table
/// ([`crate::kinds::class_of`]), its message the core's.
fn to_php(err: &Error) -> PhpException {
    let message = match err {
        Error::WrongDatabase {
            queue_database,
            connection_database,
        } => wrong_database_text(queue_database, connection_database),
        other => other.to_string(),
    };
    match crate::kinds::class_of(err.kind()) {
        Kind::Busy => match err.busy() {
            Some(busy) => exceptions::busy(&BusyDetails {
                message: &message,
                waited: busy.waited,
                limit: busy.limit,
                setting: &busy.setting,
                holder_pid: busy.holder_pid,
            }),
            None => exceptions::plain(Kind::Busy, &message, 5),
        },
        kind @ (Kind::Start | Kind::Base) => exceptions::plain(
            kind,
            &message,
            err.sqlite_error_code().map(i64::from).unwrap_or(0),
        ),
    }
}

/// The wrong-database message in PHP's words (it names `WriterLock\Queue::forConnection($db)`
/// where the core's text has `(or from the connection itself)`).
fn wrong_database_text(queue_database: &Path, connection_database: &Path) -> String {
    let connection = if connection_database.as_os_str().is_empty() {
        String::from("in memory or temporary")
    } else {
        connection_database.display().to_string()
    };
    format!(
        "this writer queue is for {} but the connection's database is {connection}; \
         writers exclude each other only through the queue of the database they \
         write, so nothing was run: make the queue for the connection's own database \
         file, or with WriterLock\\Queue::forConnection($db)",
        queue_database.display()
    )
}

/// What a method returns when a signal handler threw during its wait: the
/// handler's exception is pending and propagates (this one is not thrown
/// over it).
fn handler_threw() -> PhpException {
    PhpException::new(
        "a signal handler ended the wait for the writer turn; nothing was written".into(),
        0,
        ce::error(),
    )
}

/// The process holding the writer lock of `core`'s database, other than
/// this one, where `/proc/locks` shows it.
fn holder_of(core: &WriterQueue) -> Option<u32> {
    if is_in_memory(core.database()) {
        return None;
    }
    writerlock::holders::database_holder(core.database()).filter(|pid| *pid != current_pid())
}

fn current_pid() -> u32 {
    std::process::id()
}

/// One SQLite database's write queue, for PHP's `\SQLite3`: writers from
/// every process (PHP-FPM workers, CLI scripts, cronjobs, forked children)
/// take turns before `BEGIN IMMEDIATE` instead of failing with "database is
/// locked".
#[php_class]
#[php(name = "WriterLock\\Queue")]
#[php(flags = ClassFlags::Final)]
pub struct Queue {
    core: Arc<WriterQueue>,
    /// The process whose `begin()` through this object holds the turn.
    took: Option<u32>,
    /// The handle of the `SQLite3` object the transaction began on.
    began_on: Option<u32>,
    last_wait: Duration,
}

impl Queue {
    fn mine(&self) -> bool {
        self.took == Some(current_pid()) && self.core.holding()
    }

    fn settle(&mut self) {
        if !self.mine() {
            self.took = None;
            self.began_on = None;
        }
    }

    /// Whether `db` is the connection this queue's transaction began on.
    fn began_on(&self, db: &ZendObject) -> bool {
        self.began_on == Some(db.get_id())
    }
}

#[php_impl]
impl Queue {
    /// A queue for the database at `$databasePath` (as given to `new
    /// SQLite3()`; a relative path is taken from the current directory now).
    /// `:memory:` needs no queue. Throws `WriterLock\Exception` when the
    /// database's directory does not exist.
    pub fn __construct(databasePath: String) -> PhpResult<Self> {
        let given = PathBuf::from(&databasePath);
        let path = if is_in_memory(&given) || given.is_absolute() {
            given
        } else {
            std::path::absolute(&given).unwrap_or(given)
        };
        if !is_in_memory(&path) {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if let Err(source) = std::fs::metadata(dir).and_then(|m| {
                if m.is_dir() {
                    Ok(())
                } else {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::NotADirectory,
                        "not a directory",
                    ))
                }
            }) {
                let err = Error::LockFile {
                    path: lock_path(&path),
                    source,
                };
                return Err(to_php(&err));
            }
        }
        Ok(Queue {
            core: shared_queue(&path),
            took: None,
            began_on: None,
            last_wait: Duration::ZERO,
        })
    }

    /// Takes the turn within `$waitSeconds` (default 25 s, below 1 s raised
    /// to 1 s), sets the connection's busy timeout to the time left and runs
    /// `BEGIN IMMEDIATE`. Throws `WriterLock\BusyException` when the wait runs
    /// out (its message names `$setting`, by default this argument),
    /// `WriterLock\StartException` when the transaction could not start;
    /// nothing was written in either case.
    #[php(defaults(waitSeconds = DEFAULT_WAIT, setting = BEGIN_SETTING))]
    pub fn begin(&mut self, db: DbArg, waitSeconds: Seconds, setting: String) -> PhpResult<()> {
        let (object, kind) = db.object("begin")?;
        let limit = waitSeconds.get("begin", 2, "waitSeconds")?;
        self.begin_on("begin", object, kind, limit, setting)
    }

    /// Begins (as `begin()`, within `$waitSeconds`), runs `$fn($db)`, commits,
    /// and returns what `$fn` returned. Any throwable from `$fn`, or a COMMIT
    /// SQLite refuses, rolls the transaction back and gives the turn back; the
    /// throwable is rethrown as it was.
    #[php(defaults(waitSeconds = DEFAULT_WAIT, setting = TRANSACTION_ARGUMENT))]
    pub fn transaction(
        &mut self,
        db: DbArg,
        r#fn: Callback,
        waitSeconds: Seconds,
        setting: String,
    ) -> PhpResult<Zval> {
        let (object, kind) = db.object("transaction")?;
        let Ok(callable) = ZendCallable::new(r#fn.0) else {
            return Err(type_error(format!(
                "WriterLock\\Queue::transaction(): Argument #2 ($fn) must be a valid callback, {} given",
                type_name(r#fn.0)
            )));
        };
        let limit = waitSeconds.get("transaction", 3, "waitSeconds")?;
        self.begin_on("transaction", object, kind, limit, setting)?;
        let db_zval = db.0.dereference().shallow_clone();
        let result = callable.try_call(vec![&db_zval]);
        // A throwable from $fn is taken back (PHP code cannot run with an
        // exception pending) and thrown again after the rollback.
        let thrown = ExecutorGlobals::take_exception();
        let raised = !matches!((&result, &thrown), (Ok(_), None));
        // PHP's SQLite3 and PDO cannot tell whether $fn ended the transaction without running
        // a statement: the COMMIT's answer tells.
        let step = transaction::after_callback(raised, self.mine(), Connection::Unknown);
        // One session for the ends below: a COMMIT run on the connection's own handle keeps
        // its failure there, for the message.
        let session = PhpSqlite::new(object, kind);
        match step {
            // $fn ended the transaction itself, through this queue.
            Step::Done if !raised => self.settle(),
            Step::Done => {}
            Step::Commit => match self.finish(object, &session, "COMMIT") {
                Ok(true) => {}
                Ok(false) => {
                    let failure = session.last_failure_now();
                    let _ = self.finish(object, &session, "ROLLBACK");
                    if self.mine() {
                        let _ = self.core.release();
                        self.settle();
                    }
                    return Err(exceptions::plain(
                        Kind::Base,
                        &transaction::commit_failed_message(&failure),
                        i64::from(failure.code),
                    ));
                }
                Err(e) => {
                    let holding = self.mine();
                    let failure = (!holding).then(|| session.last_failure_now());
                    match transaction::after_failed_commit(
                        Connection::Unknown,
                        false,
                        holding,
                        failure.as_ref(),
                    ) {
                        // $fn ran COMMIT (or ROLLBACK) itself: SQLite has no transaction
                        // left to commit, and the turn is back.
                        AfterCommit::EndedByCallback => {}
                        AfterCommit::RollBack | AfterCommit::Fail => return Err(e),
                    }
                }
            },
            // With the connection's state unknown the core never answers ReleaseEnded or
            // ReleaseClosed; were it to, a rollback is the safe end.
            Step::Rollback | Step::ReleaseEnded | Step::ReleaseClosed => {
                if !matches!(self.finish(object, &session, "ROLLBACK"), Ok(true)) {
                    // The connection refused the ROLLBACK: the turn goes back anyway, and
                    // SQLite rolls back when the connection closes.
                    let _ = self.core.release();
                    self.settle();
                }
            }
        }
        if !raised {
            if let Ok(value) = result {
                return Ok(value);
            }
        }
        // Whatever the rollback itself may have left pending goes.
        drop(ExecutorGlobals::take_exception());
        match thrown {
            Some(exception) => match exception.into_zval(false) {
                Ok(zv) => Err(PhpException::from_message(String::new()).with_object(zv)),
                Err(_) => Err(PhpException::new(
                    "the callback of WriterLock\\Queue::transaction() threw".into(),
                    0,
                    ce::error(),
                )),
            },
            None => Err(PhpException::new(
                "WriterLock\\Queue::transaction(): the callback could not be called; \
                 the transaction was rolled back"
                    .into(),
                0,
                ce::error(),
            )),
        }
    }

    /// The queue of the database file an open `\SQLite3` or `PDO` (sqlite)
    /// connection uses (its main database, as `PRAGMA database_list` names
    /// it). Throws `WriterLock\Exception` for an in-memory or temporary
    /// database.
    pub fn for_connection(db: DbArg) -> PhpResult<Self> {
        let (object, kind) = db.object("forConnection")?;
        let session = PhpSqlite::new(object, kind);
        session
            .check_open()
            .map_err(|failure| to_php(&Error::NotStarted { failure }))?;
        let file = session.main_file().map_err(|failure| {
            to_php(&Error::Sqlite {
                statement: "PRAGMA database_list",
                failure,
            })
        })?;
        if file.is_empty() {
            return Err(exceptions::plain(
                Kind::Base,
                "WriterLock\\Queue::forConnection(): the connection's database is in memory or \
                 temporary (it has no file), so no other process can write it and it needs no queue",
                0,
            ));
        }
        Queue::__construct(file)
    }

    /// Commits and gives the turn back. Returns false when SQLite refused the
    /// COMMIT: the transaction, and the turn, stay open (retry, or roll
    /// back). Throws `WriterLock\Exception` when this queue holds no
    /// transaction, or when the COMMIT failed and SQLite ended the
    /// transaction.
    pub fn commit(&mut self, db: DbArg) -> PhpResult<bool> {
        self.end(db, "commit")
    }

    /// Rolls back and gives the turn back. Returns false when SQLite refused
    /// the ROLLBACK (the transaction and the turn stay).
    pub fn rollback(&mut self, db: DbArg) -> PhpResult<bool> {
        self.end(db, "rollback")
    }

    /// Runs one write statement outside a transaction, in turn, within
    /// `$waitSeconds` (default 5 s, taken as given; also the busy timeout for
    /// writers outside the queue). Reads, and statements inside an
    /// open transaction, run at once. Throws `WriterLock\BusyException` when
    /// the wait runs out (the statement was not run) and
    /// `WriterLock\Exception` when SQLite reports a failure.
    #[php(defaults(waitSeconds = DEFAULT_STATEMENT_WAIT, setting = EXEC_SETTING))]
    pub fn exec(
        &mut self,
        db: DbArg,
        sql: String,
        waitSeconds: Seconds,
        setting: String,
    ) -> PhpResult<()> {
        let (object, kind) = db.object("exec")?;
        let limit = waitSeconds.get("exec", 3, "waitSeconds")?;
        let session = PhpSqlite::new(object, kind);
        session.check_open().map_err(|failure| {
            to_php(&Error::Sqlite {
                statement: "the statement",
                failure,
            })
        })?;
        if self.mine() && (self.began_on.is_none() || self.began_on(object)) {
            // Inside this queue's own transaction, or under a turn taken with
            // acquire(): the turn is ours already (for this queue's database:
            // a connection to another file is refused, as at a turn's start).
            if self.began_on.is_none() {
                self.core
                    .check_connection(&session)
                    .map_err(|err| to_php(&err))?;
            }
            return session.exec(&sql).map_err(|failure| {
                to_php(&Error::Sqlite {
                    statement: "the statement",
                    failure,
                })
            });
        }
        let before = self.core.last_wait();
        let core = Arc::clone(&self.core);
        let outcome = interrupt::run(
            BusyKind::Statement,
            limit,
            &setting,
            Wait::statement,
            || holder_of(&core),
            |wait| core.execute(&session, &sql, wait),
        );
        let outcome = match outcome {
            Ok(()) => Ok(()),
            Err(Stopped::Core(err)) => Err(err),
            Err(Stopped::HandlerThrew) => return Err(handler_threw()),
        };
        match outcome {
            Ok(()) => {
                // The core notes a wait only when the statement queued; a
                // read, or a statement inside an open transaction, waited 0.
                let after = self.core.last_wait();
                self.last_wait = if after == before {
                    Duration::ZERO
                } else {
                    after
                };
                Ok(())
            }
            Err(err) => {
                if let Some(busy) = err.busy() {
                    self.last_wait = busy.waited;
                }
                Err(to_php(&err))
            }
        }
    }

    /// Takes the writer turn without starting a transaction, within
    /// `$waitSeconds` (default 25 s, below 1 s raised to 1 s), for code that
    /// runs its own `BEGIN IMMEDIATE` (or writes outside SQLite) in turn.
    /// Returns the seconds it waited. Give the turn back with `release()`;
    /// `exec()` through this queue runs at once meanwhile. Throws
    /// `WriterLock\BusyException` when the wait runs out.
    #[php(defaults(waitSeconds = DEFAULT_WAIT, setting = ACQUIRE_SETTING))]
    pub fn acquire(&mut self, waitSeconds: Seconds, setting: String) -> PhpResult<f64> {
        let limit = waitSeconds.get("acquire", 1, "waitSeconds")?;
        if self.mine() {
            return Err(exceptions::plain(
                Kind::Base,
                "WriterLock\\Queue::acquire(): this queue already holds the writer turn; give it \
                 back first (release() after acquire(), commit() or rollback() after begin())",
                0,
            ));
        }
        let core = Arc::clone(&self.core);
        let started = Instant::now();
        let outcome = interrupt::run(
            BusyKind::Transaction,
            limit.max(MIN_TRANSACTION_WAIT),
            &setting,
            Wait::transaction,
            || holder_of(&core),
            |wait| core.take(BusyKind::Transaction, wait),
        );
        match outcome {
            Ok(_) => {
                self.took = Some(current_pid());
                self.began_on = None;
                self.last_wait = started.elapsed();
                Ok(self.last_wait.as_secs_f64())
            }
            Err(Stopped::HandlerThrew) => Err(handler_threw()),
            Err(Stopped::Core(err)) => {
                if let Some(busy) = err.busy() {
                    self.last_wait = busy.waited;
                }
                Err(to_php(&err))
            }
        }
    }

    /// Gives back the turn `acquire()` took. Throws `WriterLock\Exception`
    /// when this queue holds no turn, or holds it for a transaction (end that
    /// with `commit()` or `rollback()`).
    pub fn release(&mut self) -> PhpResult<()> {
        if !self.mine() {
            self.settle();
            return Err(exceptions::plain(
                Kind::Base,
                "WriterLock\\Queue::release(): this queue does not hold the writer turn, so there \
                 is nothing to release; call acquire() first, and release() once for each \
                 acquire()",
                0,
            ));
        }
        if self.began_on.is_some() {
            return Err(exceptions::plain(
                Kind::Base,
                "WriterLock\\Queue::release(): this queue holds the writer turn for a transaction \
                 it began; end it with commit() or rollback(), which give the turn back (the \
                 transaction and the writer turn stay open)",
                0,
            ));
        }
        let result = self.core.release();
        self.settle();
        result.map(|_| ()).map_err(|err| to_php(&err))
    }

    /// Whether this queue holds the writer turn in this process.
    pub fn holding(&self) -> bool {
        self.mine()
    }

    /// Seconds the last `begin()`, `acquire()` or queued `exec()` waited for
    /// its turn.
    pub fn last_wait(&self) -> f64 {
        self.last_wait.as_secs_f64()
    }
}

impl Queue {
    fn end(&mut self, db: DbArg, method: &str) -> PhpResult<bool> {
        let (object, kind) = db.object(method)?;
        let session = PhpSqlite::new(object, kind);
        let statement = if method == "commit" {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        self.finish(object, &session, statement)
    }

    /// Takes the turn and begins on `object` (the shared part of `begin()`
    /// and `transaction()`).
    fn begin_on(
        &mut self,
        method: &str,
        object: &ZendObject,
        kind: ConnKind,
        limit: Duration,
        setting: String,
    ) -> PhpResult<()> {
        let session = PhpSqlite::new(object, kind);
        session
            .check_open()
            .map_err(|failure| to_php(&Error::NotStarted { failure }))?;
        if self.mine() && self.began_on.is_none() {
            return Err(exceptions::plain(
                Kind::Base,
                &format!(
                    "WriterLock\\Queue::{method}(): this queue holds the writer turn it took with \
                     acquire(); call release() before beginning a transaction through it"
                ),
                0,
            ));
        }
        if self.mine() {
            // PHP words for what the core says about a second begin.
            let on = if self.began_on(object) {
                "on this connection"
            } else {
                "on another connection"
            };
            return Err(exceptions::plain(
                Kind::Base,
                &format!(
                    "WriterLock\\Queue::{method}(): this queue already holds the writer turn for a \
                     transaction it began {on}; call commit() or rollback() on that connection \
                     before beginning another"
                ),
                0,
            ));
        }
        let core = Arc::clone(&self.core);
        let outcome = interrupt::run(
            BusyKind::Transaction,
            limit.max(MIN_TRANSACTION_WAIT),
            &setting,
            Wait::transaction,
            || holder_of(&core),
            |wait| core.begin(&session, wait),
        );
        let outcome = match outcome {
            Ok(()) => Ok(()),
            Err(Stopped::Core(err)) => Err(err),
            Err(Stopped::HandlerThrew) => return Err(handler_threw()),
        };
        match outcome {
            Ok(()) => {
                self.took = Some(current_pid());
                self.began_on = Some(object.get_id());
                self.last_wait = self.core.last_wait();
                count_transaction();
                Ok(())
            }
            Err(Error::InTransaction) => Err(exceptions::plain(
                Kind::Base,
                &format!(
                    "WriterLock\\Queue::{method}(): the connection is already inside a transaction \
                     this queue did not begin (a BEGIN run directly, PDO::beginTransaction(), or \
                     another queue's); end it with COMMIT or ROLLBACK first. Nothing was written by \
                     this call"
                ),
                0,
            )),
            Err(err) => {
                if let Some(busy) = err.busy() {
                    self.last_wait = busy.waited;
                }
                Err(to_php(&err))
            }
        }
    }

    /// COMMIT or ROLLBACK of this queue's transaction on `object`.
    fn finish(
        &mut self,
        object: &ZendObject,
        session: &PhpSqlite<'_>,
        statement: &'static str,
    ) -> PhpResult<bool> {
        let method = if statement == "COMMIT" {
            "commit"
        } else {
            "rollback"
        };
        if !self.mine() {
            // Closing the connection rolled the transaction back, and SQLite's
            // rollback hook gave the turn back then: say what happened to it.
            let closed_since = self.took == Some(current_pid()) && self.began_on(object);
            self.settle();
            if closed_since {
                if let Err(failure) = session.check_open() {
                    return Err(to_php(&Error::Sqlite { statement, failure }));
                }
            }
            return Err(to_php(&Error::NotHolding));
        }
        if self.began_on.is_none() {
            return Err(exceptions::plain(
                Kind::Base,
                &format!(
                    "WriterLock\\Queue::{method}(): this queue holds the writer turn it took with \
                     acquire() and began no transaction; call release() to give the turn back"
                ),
                0,
            ));
        }
        if !self.began_on(object) {
            // COMMIT on another connection would end nothing, and the turn
            // would be given back while the transaction stays open.
            return Err(exceptions::plain(
                Kind::Base,
                &format!(
                    "WriterLock\\Queue::{method}(): Argument #1 ($db) is not the connection the \
                     transaction began on; pass that one (the transaction and the writer turn stay \
                     open)"
                ),
                0,
            ));
        }
        if let Err(failure) = session.check_open() {
            // SQLite rolled the transaction back when the object was closed.
            let _ = self.core.release();
            self.settle();
            return Err(to_php(&Error::Sqlite { statement, failure }));
        }
        let result = if statement == "COMMIT" {
            self.core.commit(session)
        } else {
            self.core.rollback(session)
        };
        self.settle();
        match result {
            Ok(()) => Ok(true),
            // SQLite refused and the transaction is still open: so is the turn.
            Err(Error::Sqlite { .. }) if self.mine() => Ok(false),
            // ROLLBACK found no transaction: SQLite ended it already, which
            // is what a rollback asks for.
            Err(Error::Sqlite { failure, .. })
                if statement == "ROLLBACK" && transaction::is_no_transaction(&failure) =>
            {
                Ok(true)
            }
            Err(err) => Err(to_php(&err)),
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // A turn never outlives the object that took it.
        if self.mine() {
            let _ = self.core.release();
        }
    }
}
