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
use std::sync::Arc;
use std::time::Duration;

use ext_php_rs::convert::FromZvalMut;
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::{ClassFlags, DataType};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::{ce, ClassEntry};
use writerlock::lockfiles::{is_in_memory, lock_path};
use writerlock::wait::{BUSY_SETTING, TRANSACTION_SETTING};
use writerlock::{Error, SqliteFailure, SqliteSession, Wait, WriterQueue};

use crate::exceptions::{self, BusyDetails, Kind};
use crate::session::{PhpSqlite, SQLITE_MISUSE};

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

/// A `\SQLite3` argument. Declared with the class type in the argument
/// info (reflection and stubs show `SQLite3 $db`), checked at the call.
pub struct Sqlite3Arg<'a>(&'a mut Zval);

impl<'a> FromZvalMut<'a> for Sqlite3Arg<'a> {
    const TYPE: DataType = DataType::object("SQLite3");

    fn from_zval_mut(zval: &'a mut Zval) -> Option<Self> {
        Some(Sqlite3Arg(zval))
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

fn sqlite3_class() -> Option<&'static ClassEntry> {
    ClassEntry::try_find("SQLite3")
}

impl Sqlite3Arg<'_> {
    fn object(&self, method: &str) -> Result<&ZendObject, PhpException> {
        let zv = self.0.dereference();
        let Some(class) = sqlite3_class() else {
            return Err(PhpException::new(
                format!(
                    "WriterLock\\Queue::{method}(): Argument #1 ($db) must be of type SQLite3, \
                     but the sqlite3 extension is not loaded; install php-sqlite3 and enable it"
                ),
                0,
                ce::type_error(),
            ));
        };
        match zv.object() {
            Some(object) if object.instance_of(class) => Ok(object),
            _ => Err(PhpException::new(
                format!(
                    "WriterLock\\Queue::{method}(): Argument #1 ($db) must be of type SQLite3, {} given",
                    type_name(zv)
                ),
                0,
                ce::type_error(),
            )),
        }
    }
}

/// A number of seconds (`float`, an `int` accepted as PHP does).
pub struct Seconds<'a>(&'a mut Zval);

impl<'a> FromZvalMut<'a> for Seconds<'a> {
    const TYPE: DataType = DataType::Double;

    fn from_zval_mut(zval: &'a mut Zval) -> Option<Self> {
        Some(Seconds(zval))
    }
}

impl Seconds<'_> {
    fn get(
        &self,
        method: &str,
        position: u8,
        name: &'static str,
    ) -> Result<Duration, PhpException> {
        let zv = self.0.dereference();
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

/// Turns a core error into the PHP exception that reports it.
fn to_php(err: &Error) -> PhpException {
    let message = err.to_string();
    match err {
        Error::Busy(busy) => exceptions::busy(&BusyDetails {
            message: &message,
            waited: busy.waited,
            limit: busy.limit,
            setting: &busy.setting,
            holder_pid: busy.holder_pid,
        }),
        Error::NotStarted { failure } => {
            exceptions::plain(Kind::Start, &message, i64::from(failure.code))
        }
        other => exceptions::plain(
            Kind::Base,
            &message,
            other.sqlite_error_code().map(i64::from).unwrap_or(0),
        ),
    }
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

    /// Takes the turn within `$waitSeconds` (below 1 s raised to 1 s), sets
    /// the connection's busy timeout to the time left and runs `BEGIN
    /// IMMEDIATE`. Throws `WriterLock\BusyException` when the wait runs out,
    /// `WriterLock\StartException` when the transaction could not start;
    /// nothing was written in either case.
    #[php(defaults(setting = TRANSACTION_SETTING))]
    pub fn begin(
        &mut self,
        db: Sqlite3Arg,
        waitSeconds: Seconds,
        setting: String,
    ) -> PhpResult<()> {
        let object = db.object("begin")?;
        let limit = waitSeconds.get("begin", 2, "waitSeconds")?;
        let session = PhpSqlite::new(object);
        session
            .check_open()
            .map_err(|failure| to_php(&Error::NotStarted { failure }))?;
        let wait = Wait::transaction(limit).with_setting(setting);
        match self.core.begin(&session, &wait) {
            Ok(()) => {
                self.took = Some(current_pid());
                self.began_on = Some(object.get_id());
                self.last_wait = self.core.last_wait();
                count_transaction();
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

    /// Commits and gives the turn back. Returns false when SQLite refused the
    /// COMMIT: the transaction, and the turn, stay open (retry, or roll
    /// back). Throws `WriterLock\Exception` when this queue holds no
    /// transaction, or when the COMMIT failed and SQLite ended the
    /// transaction.
    pub fn commit(&mut self, db: Sqlite3Arg) -> PhpResult<bool> {
        self.end(db, "commit")
    }

    /// Rolls back and gives the turn back. Returns false when SQLite refused
    /// the ROLLBACK (the transaction and the turn stay).
    pub fn rollback(&mut self, db: Sqlite3Arg) -> PhpResult<bool> {
        self.end(db, "rollback")
    }

    /// Runs one write statement outside a transaction, in turn, within
    /// `$busySeconds` (the busy timeout). Reads, and statements inside an
    /// open transaction, run at once. Throws `WriterLock\BusyException` when
    /// the wait runs out (the statement was not run) and
    /// `WriterLock\Exception` when SQLite reports a failure.
    #[php(defaults(setting = BUSY_SETTING))]
    pub fn exec(
        &mut self,
        db: Sqlite3Arg,
        sql: String,
        busySeconds: Seconds,
        setting: String,
    ) -> PhpResult<()> {
        let object = db.object("exec")?;
        let limit = busySeconds.get("exec", 3, "busySeconds")?;
        let session = PhpSqlite::new(object);
        session.check_open().map_err(|failure| {
            to_php(&Error::Sqlite {
                statement: "the statement",
                failure,
            })
        })?;
        if self.mine() && self.began_on(object) {
            // Inside this queue's own transaction: the turn is ours already.
            return session.exec(&sql).map_err(|failure| {
                to_php(&Error::Sqlite {
                    statement: "the statement",
                    failure,
                })
            });
        }
        let wait = Wait::statement(limit).with_setting(setting);
        let before = self.core.last_wait();
        match self.core.execute(&session, &sql, &wait) {
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

    /// Whether this queue holds the writer turn in this process.
    pub fn holding(&self) -> bool {
        self.mine()
    }

    /// Seconds the last `begin()` or queued `exec()` waited for its turn.
    pub fn last_wait(&self) -> f64 {
        self.last_wait.as_secs_f64()
    }
}

impl Queue {
    fn end(&mut self, db: Sqlite3Arg, method: &str) -> PhpResult<bool> {
        let object = db.object(method)?;
        let session = PhpSqlite::new(object);
        let statement = if method == "commit" {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        if !self.mine() {
            self.settle();
            return Err(to_php(&Error::NotHolding));
        }
        if !self.began_on(object) {
            // COMMIT on another connection would end nothing, and the turn
            // would be given back while the transaction stays open.
            return Err(to_php(&Error::InvalidArgument {
                name: "db",
                reason: format!(
                    "{method}() needs the SQLite3 object the transaction began on; this is another one"
                ),
            }));
        }
        if let Err(failure) = session.check_open() {
            // SQLite rolled the transaction back when the object was closed.
            let _ = self.core.release();
            self.settle();
            return Err(to_php(&Error::Sqlite { statement, failure }));
        }
        let result = if statement == "COMMIT" {
            self.core.commit(&session)
        } else {
            self.core.rollback(&session)
        };
        self.settle();
        match result {
            Ok(()) => Ok(true),
            // SQLite refused and the transaction is still open: so is the turn.
            Err(Error::Sqlite { .. }) if self.mine() => Ok(false),
            // ROLLBACK found no transaction: SQLite ended it already, which
            // is what a rollback asks for.
            Err(Error::Sqlite { failure, .. })
                if statement == "ROLLBACK" && is_no_transaction(&failure) =>
            {
                Ok(true)
            }
            Err(err) => Err(to_php(&err)),
        }
    }
}

fn is_no_transaction(failure: &SqliteFailure) -> bool {
    failure.code != SQLITE_MISUSE && failure.message.contains("no transaction is active")
}

impl Drop for Queue {
    fn drop(&mut self) {
        // A turn never outlives the object that took it.
        if self.mine() {
            let _ = self.core.release();
        }
    }
}
