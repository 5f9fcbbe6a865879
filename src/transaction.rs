//! The closure-style transaction the hosts offer (PHP's `Queue::transaction($db, $fn)`,
//! Python's `with queue.transaction(conn):`), decided once for every host: once the
//! callback has returned or raised, whether the transaction is committed, rolled back, or
//! was already ended by the callback, and what is reported.
//!
//! The decisions are I/O-free. The host asks [`after_callback`], runs the [`Step`] with its
//! own `commit()`, `rollback()` and [`WriterQueue::release_ended`](crate::WriterQueue::release_ended)
//! (so its own checks of the connection still apply), and asks [`after_failed_commit`]
//! when the COMMIT failed. The messages come from here too: [`commit_failed_message`],
//! [`closed_message`], [`rollback_failed_note`].

use libsqlite3_sys as ffi;

use crate::error::SqliteFailure;

/// What the host knows of its connection once the callback is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Still inside a transaction (SQLite's autocommit off).
    InTransaction,
    /// Open and outside any transaction: the callback ran COMMIT or ROLLBACK itself (or a
    /// script that commits first).
    NoTransaction,
    /// Closed inside the callback: SQLite rolled back whatever the callback had not
    /// committed.
    Closed,
    /// The host cannot tell without running a statement (PHP's `SQLite3` and `PDO`): the
    /// COMMIT's answer tells (see [`after_failed_commit`]).
    Unknown,
}

impl Connection {
    /// From an open connection's transaction state as
    /// [`SqliteSession::in_transaction`](crate::SqliteSession::in_transaction) gives it:
    /// `Some(true)` inside a transaction, `Some(false)` outside, `None` unknown.
    pub fn from_in_transaction(open: Option<bool>) -> Connection {
        match open {
            Some(true) => Connection::InTransaction,
            Some(false) => Connection::NoTransaction,
            None => Connection::Unknown,
        }
    }
}

/// What the host does once the callback is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing: the callback ended the transaction through the queue (its `commit()` or
    /// `rollback()`, or closing a connection whose rollback gave the turn back), so the
    /// turn is back already. What the callback returned or raised stands.
    Done,
    /// COMMIT and give the turn back (the callback returned). When SQLite refuses, ask
    /// [`after_failed_commit`].
    Commit,
    /// ROLLBACK and give the turn back (the callback raised). A rollback that fails too
    /// never replaces the callback's error; a host that can attach a note to it says
    /// [`rollback_failed_note`].
    Rollback,
    /// Give the turn back without running a statement
    /// ([`WriterQueue::release_ended`](crate::WriterQueue::release_ended)): the callback
    /// ended the transaction itself, or raised and closed the connection. What it did
    /// stands; nothing more is reported.
    ReleaseEnded,
    /// Give the turn back without running a statement, then report [`closed_message`]: the
    /// callback returned after closing the connection, so what it had not committed was
    /// rolled back.
    ReleaseClosed,
}

/// What follows once the callback returned or raised: `raised` when it raised (threw),
/// `holding` whether the queue still holds the writer turn
/// ([`WriterQueue::holding`](crate::WriterQueue::holding)), `connection` what the host
/// knows of its connection now (read only when `holding`; pass [`Connection::Unknown`]
/// otherwise).
pub fn after_callback(raised: bool, holding: bool, connection: Connection) -> Step {
    if !holding {
        return Step::Done;
    }
    match connection {
        Connection::NoTransaction => Step::ReleaseEnded,
        Connection::Closed if raised => Step::ReleaseEnded,
        Connection::Closed => Step::ReleaseClosed,
        Connection::InTransaction | Connection::Unknown if raised => Step::Rollback,
        Connection::InTransaction | Connection::Unknown => Step::Commit,
    }
}

/// What follows a COMMIT of [`Step::Commit`] that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCommit {
    /// SQLite refused and the transaction, and the turn, are still there: roll back, give
    /// the turn back, and report the COMMIT's failure (in [`commit_failed_message`]'s
    /// words, or as the COMMIT's own error), so that the turn is never kept.
    RollBack,
    /// The callback had ended the transaction itself, which only the COMMIT could tell
    /// (SQLite: "no transaction is active"), and the turn is back: what the callback
    /// returned stands and nothing is reported.
    EndedByCallback,
    /// Anything else: the COMMIT's error is reported as it is.
    Fail,
}

/// What follows a COMMIT that failed. `before` is what [`after_callback`] was given;
/// `still_open` whether SQLite refused with the transaction and the turn still there;
/// `holding` whether the queue holds the turn now; `failure` SQLite's answer to the COMMIT,
/// where the host has it.
pub fn after_failed_commit(
    before: Connection,
    still_open: bool,
    holding: bool,
    failure: Option<&SqliteFailure>,
) -> AfterCommit {
    if still_open {
        AfterCommit::RollBack
    } else if !holding && before == Connection::Unknown && failure.is_some_and(is_no_transaction) {
        AfterCommit::EndedByCallback
    } else {
        AfterCommit::Fail
    }
}

/// Whether SQLite's answer to a COMMIT or ROLLBACK says there was no transaction to end:
/// "cannot commit - no transaction is active" (a misuse of a closed connection is not).
pub fn is_no_transaction(failure: &SqliteFailure) -> bool {
    failure.code != ffi::SQLITE_MISUSE && failure.message.contains("no transaction is active")
}

/// The error of a COMMIT SQLite refused, after the rollback ([`AfterCommit::RollBack`]):
/// `COMMIT failed: <SQLite's message>; the transaction was rolled back, nothing was
/// written`.
pub fn commit_failed_message(failure: &SqliteFailure) -> String {
    format!(
        "COMMIT failed: {}; the transaction was rolled back, nothing was written",
        failure.message
    )
}

/// The error of [`Step::ReleaseClosed`], in the host's words: `call` is the host's call
/// (`queue.transaction()`), `callback` what ran inside it (`the block`), `after` where the
/// connection is closed instead (`after the with block`).
pub fn closed_message(call: &str, callback: &str, after: &str) -> String {
    format!(
        "the connection was closed inside {call}, so its open transaction was rolled back \
         unless {callback} committed it; the writer turn was given back. Close the \
         connection {after}"
    )
}

/// The note a host attaches to the callback's error when the rollback of
/// [`Step::Rollback`] failed too: `writerlock: the rollback failed too: <its error>`.
pub fn rollback_failed_note(error: &str) -> String {
    format!("writerlock: the rollback failed too: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Connection; 4] = [
        Connection::InTransaction,
        Connection::NoTransaction,
        Connection::Closed,
        Connection::Unknown,
    ];

    #[test]
    fn a_callback_that_ended_it_through_the_queue_leaves_nothing_to_do() {
        for connection in ALL {
            for raised in [false, true] {
                assert_eq!(after_callback(raised, false, connection), Step::Done);
            }
        }
    }

    #[test]
    fn an_open_transaction_is_committed_or_rolled_back() {
        for connection in [Connection::InTransaction, Connection::Unknown] {
            assert_eq!(after_callback(false, true, connection), Step::Commit);
            assert_eq!(after_callback(true, true, connection), Step::Rollback);
        }
    }

    #[test]
    fn a_transaction_the_callback_ended_gives_the_turn_back_and_reports_nothing() {
        for raised in [false, true] {
            assert_eq!(
                after_callback(raised, true, Connection::NoTransaction),
                Step::ReleaseEnded
            );
        }
    }

    #[test]
    fn a_connection_closed_inside_is_reported_unless_the_callback_raised() {
        assert_eq!(
            after_callback(false, true, Connection::Closed),
            Step::ReleaseClosed
        );
        assert_eq!(
            after_callback(true, true, Connection::Closed),
            Step::ReleaseEnded
        );
    }

    #[test]
    fn connection_states_from_autocommit() {
        assert_eq!(
            Connection::from_in_transaction(Some(true)),
            Connection::InTransaction
        );
        assert_eq!(
            Connection::from_in_transaction(Some(false)),
            Connection::NoTransaction
        );
        assert_eq!(Connection::from_in_transaction(None), Connection::Unknown);
    }

    #[test]
    fn a_refused_commit_is_rolled_back_whatever_was_known_before() {
        let constraint = SqliteFailure::new(787, "FOREIGN KEY constraint failed");
        for before in ALL {
            assert_eq!(
                after_failed_commit(before, true, true, Some(&constraint)),
                AfterCommit::RollBack
            );
        }
    }

    #[test]
    fn no_transaction_at_commit_means_the_callback_ended_it_only_when_unknown_before() {
        let none = SqliteFailure::new(1, "cannot commit - no transaction is active");
        assert_eq!(
            after_failed_commit(Connection::Unknown, false, false, Some(&none)),
            AfterCommit::EndedByCallback
        );
        // Known to be open before the COMMIT: the answer is the COMMIT's own error.
        assert_eq!(
            after_failed_commit(Connection::InTransaction, false, false, Some(&none)),
            AfterCommit::Fail
        );
        // The turn still held: not a transaction the callback ended.
        assert_eq!(
            after_failed_commit(Connection::Unknown, false, true, Some(&none)),
            AfterCommit::Fail
        );
        // Another failure, or none known.
        let closed = SqliteFailure::new(ffi::SQLITE_MISUSE, "no transaction is active");
        assert_eq!(
            after_failed_commit(Connection::Unknown, false, false, Some(&closed)),
            AfterCommit::Fail
        );
        let io = SqliteFailure::new(10, "disk I/O error");
        assert_eq!(
            after_failed_commit(Connection::Unknown, false, false, Some(&io)),
            AfterCommit::Fail
        );
        assert_eq!(
            after_failed_commit(Connection::Unknown, false, false, None),
            AfterCommit::Fail
        );
    }

    #[test]
    fn messages_are_the_hosts_exact_texts() {
        assert_eq!(
            commit_failed_message(&SqliteFailure::new(787, "FOREIGN KEY constraint failed")),
            "COMMIT failed: FOREIGN KEY constraint failed; the transaction was rolled back, \
             nothing was written"
        );
        assert_eq!(
            closed_message("queue.transaction()", "the block", "after the with block"),
            "the connection was closed inside queue.transaction(), so its open transaction \
             was rolled back unless the block committed it; the writer turn was given back. \
             Close the connection after the with block"
        );
        assert_eq!(
            rollback_failed_note("disk I/O error"),
            "writerlock: the rollback failed too: disk I/O error"
        );
    }
}
