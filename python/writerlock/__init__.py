"""writerlock: writers that take turns.

SQLite: a cross-process write queue for ``sqlite3`` connections. Before ``BEGIN IMMEDIATE``
a writer takes an exclusive ``flock()`` on ``<database>.writer-lock``, so writers from every
process (PHP-FPM workers, cronjobs, scripts) take turns instead of failing with "database is
locked"::

    import sqlite3, writerlock

    conn = sqlite3.connect("ledger.db", isolation_level=None)   # autocommit mode
    queue = writerlock.WriterQueue("ledger.db")
    with queue.transaction(conn):                 # waits up to 25 s for its turn
        conn.execute("INSERT INTO events VALUES (?)", ("x",))
    queue.execute(conn, "UPDATE jobs SET done = 1 WHERE id = ?", (7,))   # one queued write

A wait that runs out raises :class:`Busy`, a ``sqlite3.OperationalError``. The interpreter is
released while a writer waits, so other threads keep running.

Postgres: :mod:`writerlock.postgres`, the writer session of the shared ledger database.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any, Iterator, Optional

from . import _native
from ._errors import Busy, NotAutocommit, NotStarted, WrongDatabase

__all__ = [
    "WriterQueue",
    "Busy",
    "NotStarted",
    "NotAutocommit",
    "WrongDatabase",
    "TRANSACTION_WAIT",
    "CLI_TRANSACTION_WAIT",
    "BUSY_TIMEOUT",
    "CLI_BUSY_TIMEOUT",
    "TRANSACTION_SETTING",
    "CLI_TRANSACTION_SETTING",
    "BUSY_SETTING",
    "CLI_BUSY_SETTING",
    "LOCK_SUFFIX",
    "QUEUE_SUFFIX",
]

#: Default wait for a transaction's turn, seconds (``[DatabaseSettings] SQLiteTransactionWait``).
TRANSACTION_WAIT: float = _native.TRANSACTION_WAIT
#: The command line's wait for a transaction's turn, seconds.
CLI_TRANSACTION_WAIT: float = _native.CLI_TRANSACTION_WAIT
#: Default wait of a single write statement, seconds (``[DatabaseSettings] SQLiteBusyTimeout``).
BUSY_TIMEOUT: float = _native.BUSY_TIMEOUT
#: The command line's wait of a single write statement, seconds.
CLI_BUSY_TIMEOUT: float = _native.CLI_BUSY_TIMEOUT
#: The setting a transaction's busy message names by default.
TRANSACTION_SETTING: str = _native.TRANSACTION_SETTING
#: The setting named on the command line for a transaction.
CLI_TRANSACTION_SETTING: str = _native.CLI_TRANSACTION_SETTING
#: The setting a statement's busy message names by default.
BUSY_SETTING: str = _native.BUSY_SETTING
#: The setting named on the command line for a statement.
CLI_BUSY_SETTING: str = _native.CLI_BUSY_SETTING
#: The lock file's suffix: ``<database>.writer-lock``.
LOCK_SUFFIX: str = _native.LOCK_SUFFIX
#: The queue file's suffix: ``<database>.writer-queue``.
QUEUE_SUFFIX: str = _native.QUEUE_SUFFIX


class WriterQueue(_native.WriterQueue):
    """A process's handle on one SQLite database's write queue.

    ``WriterQueue(path)`` opens nothing yet: the lock files ``<path>.writer-lock`` and
    ``<path>.writer-queue`` open at the first turn. It is fork-safe (a child process never
    touches its parent's turn) and can be pickled for ``multiprocessing`` (the child gets a
    fresh handle on the same database). ``:memory:`` needs no queue.

    Every method that takes ``conn`` needs a ``sqlite3.Connection`` in autocommit mode
    (``sqlite3.connect(path, isolation_level=None)``); otherwise :class:`NotAutocommit`.
    """

    @contextlib.contextmanager
    def transaction(
        self, conn: sqlite3.Connection, wait: float = TRANSACTION_WAIT, setting: Optional[str] = None
    ) -> Iterator[sqlite3.Connection]:
        """A queued transaction: :meth:`begin` on entry, :meth:`commit` when the block ends,
        :meth:`rollback` when it raises (the exception then propagates). A COMMIT that SQLite
        refuses is rolled back too, and its error raised, so the turn is never kept."""
        self.begin(conn, wait, setting)
        try:
            yield conn
        except BaseException as err:
            if self.holding:
                try:
                    self.rollback(conn)
                except Exception as rollback_error:  # keep the block's own error
                    _note(err, f"writerlock: the rollback failed too: {rollback_error}")
            raise
        else:
            if not self.holding:  # the block ended the transaction itself
                return
            try:
                self.commit(conn)
            except BaseException:
                if self.holding:
                    with contextlib.suppress(Exception):
                        self.rollback(conn)
                raise


def _note(err: BaseException, text: str) -> None:
    add_note = getattr(err, "add_note", None)
    if add_note is not None:
        add_note(text)


def __getattr__(name: str) -> Any:
    # `writerlock.postgres` imports lazily, so `import writerlock` stays light.
    if name == "postgres":
        import importlib

        return importlib.import_module(".postgres", __name__)
    raise AttributeError(f"module 'writerlock' has no attribute {name!r}")
