//! writerlock: writers that take turns.
//!
//! Two mechanisms share this crate:
//!
//! * The **SQLite write queue** ([`WriterQueue`]): before `BEGIN IMMEDIATE`, a
//!   writer takes an exclusive `flock()` on `<db>.writer-lock`, holding a
//!   shared `flock()` on `<db>.writer-queue` while it waits, so writers from
//!   every process take turns instead of failing with "database is locked".
//!   Its modules: [`queue`] (the turn and the transaction), [`wait`] (limits,
//!   polling and yielding), [`slice`] (how long a writer granted its turn
//!   in arrival order keeps it), [`handoff`] (the futex wake-up page), `polling`
//!   (the driver's polling protocol, below both),
//!   [`lockfiles`] (fork-safe descriptors), [`paths`] (the lock files'
//!   names, in-memory databases), [`process`] (the cached pid and the
//!   fork handler), [`sqlite`] (the connection the
//!   queue drives), [`holders`] (who holds a lock, from `/proc/locks`),
//!   [`filesystem`] (whether `flock()` excludes every writer where the
//!   database is), [`status`] (who holds and who waits now, for the status
//!   commands), [`transaction`] (how the hosts' closure-style transaction
//!   ends once its callback is done).
//! * The **Postgres writer session** ([`pg`]): connections that carry time
//!   limits, a writer lock taken as each write's first statement, and a
//!   writer floor that refuses writes from old code.

pub mod calendar;
pub mod error;
pub mod filesystem;
pub mod handoff;
pub mod holders;
pub mod lockfiles;
pub mod paths;
pub mod pg;
mod polling;
pub mod process;
pub mod queue;
pub mod slice;
pub mod sqlite;
pub mod status;
pub mod transaction;
pub mod wait;

pub use error::{
    wrong_database_message, Busy, BusyKind, Error, ErrorKind, LockFileProblem, Result,
    SqliteFailure,
};
pub use queue::WriterQueue;
pub use sqlite::{RawSqlite, SqliteHandle, SqliteSession};
pub use wait::{Interrupt, Strategy, Wait};
