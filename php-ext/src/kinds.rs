//! The one table from the core's error kinds to the extension's exception classes.
//!
//! Kept free of the PHP engine's types so that `php-ext/tests/kinds.rs` checks it without a
//! PHP process.

use writerlock::ErrorKind;

/// The three classes this module registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `WriterLock\Exception`: any other failure (bad input, a lock file that
    /// cannot be opened, a COMMIT that ended the transaction, ...).
    Base,
    /// `WriterLock\BusyException`: the wait ran out; nothing was written.
    Busy,
    /// `WriterLock\StartException`: the transaction could not start.
    Start,
}

/// The class of each kind of queue error. The match is exhaustive, so a kind the core adds is
/// a compile error here until it is given its class.
pub fn class_of(kind: ErrorKind) -> Kind {
    use ErrorKind as K;
    match kind {
        K::Busy => Kind::Busy,
        K::NotStarted => Kind::Start,
        K::Interrupted
        | K::Sqlite
        | K::LockFile
        | K::LockFileAccess
        | K::UnsafeLockFile
        | K::Flock
        | K::AlreadyHolding
        | K::HeldThroughAnotherHandle
        | K::NotHolding
        | K::InTransaction
        | K::WrongDatabase
        | K::DatabaseReplaced
        | K::InvalidArgument => Kind::Base,
    }
}
