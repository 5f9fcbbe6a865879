"""writerlock: writers that take turns.

SQLite: a cross-process write queue for ``sqlite3`` connections. Before ``BEGIN IMMEDIATE``
a writer takes an exclusive ``flock()`` on ``<database>.writer-lock``, so writers from every
process (PHP-FPM workers, cronjobs, scripts) take turns instead of failing with "database is
locked"::

    import sqlite3, writerlock

    conn = sqlite3.connect("app.db", isolation_level=None)      # autocommit mode
    queue = writerlock.WriterQueue("app.db")
    with queue.transaction(conn):                 # waits up to 25 s for its turn
        conn.execute("INSERT INTO events VALUES (?)", ("x",))
    queue.execute(conn, "UPDATE jobs SET done = 1 WHERE id = ?", (7,))   # one queued write

A wait that runs out raises :class:`Busy`, a ``sqlite3.OperationalError``. The interpreter is
released while a writer waits, so other threads keep running.

Postgres: :mod:`writerlock.postgres`, the writer session of the shared ledger database.
"""

from __future__ import annotations

import sqlite3
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Optional, Type

from . import _native
from ._errors import Busy, NotAutocommit, NotStarted, WrongDatabase

if TYPE_CHECKING:
    # Imported on first use at run time (see __getattr__ below); typed as the submodule.
    from . import postgres as postgres

__version__: str = _native.__version__

__all__ = [
    "WriterQueue",
    "QueuedTransaction",
    "WriterTurn",
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
#: Exponential's driver's setting for a transaction's wait, as its busy messages name it. Pass
#: it as ``setting=`` to get the driver's exact text; by default a busy message names the
#: ``wait`` argument.
TRANSACTION_SETTING: str = _native.TRANSACTION_SETTING
#: The driver's setting for a transaction's wait on the command line (``setting=``).
CLI_TRANSACTION_SETTING: str = _native.CLI_TRANSACTION_SETTING
#: Exponential's driver's setting for a single statement's wait (``setting=``; by default a
#: busy message names the ``wait`` argument).
BUSY_SETTING: str = _native.BUSY_SETTING
#: The driver's setting for a single statement's wait on the command line (``setting=``).
CLI_BUSY_SETTING: str = _native.CLI_BUSY_SETTING
#: The lock file's suffix: ``<database>.writer-lock``.
LOCK_SUFFIX: str = _native.LOCK_SUFFIX
#: The queue file's suffix: ``<database>.writer-queue``.
QUEUE_SUFFIX: str = _native.QUEUE_SUFFIX


class WriterQueue(_native.WriterQueue):
    """A process's handle on one SQLite database's write queue.

    ``WriterQueue(path)`` opens nothing yet: the lock files ``<path>.writer-lock`` and
    ``<path>.writer-queue`` open at the first turn. A relative ``path`` is made absolute at
    once, so a later ``os.chdir()`` changes nothing; ``WriterQueue.for_connection(conn)``
    takes the path from the connection itself. It is fork-safe (a child process never
    touches its parent's turn) and can be pickled for ``multiprocessing`` (the child gets a
    fresh handle on the same database). ``:memory:`` needs no queue.

    Every method that takes ``conn`` needs a ``sqlite3.Connection`` in autocommit mode
    (``sqlite3.connect(path, isolation_level=None)``, or ``autocommit=True`` on Python 3.12
    and later); otherwise :class:`NotAutocommit`. Its main database must be this queue's
    file (compared by device and inode at each turn's start); otherwise
    :class:`WrongDatabase`. The connection's own busy timeout is put back when each turn
    ends.

    Every limit is ``wait=``, in seconds. A transaction's wait below 1 s is raised to 1 s;
    a single statement's is taken as given. A wait that runs out raises :class:`Busy`.
    Ctrl-C (or any signal whose Python handler raises) ends a wait within 10 ms: the turn
    is not taken, nothing was written, and the handler's exception (``KeyboardInterrupt``)
    is raised.
    """

    def transaction(
        self, conn: sqlite3.Connection, wait: float = TRANSACTION_WAIT, setting: Optional[str] = None
    ) -> "QueuedTransaction":
        """A queued transaction for ``with``: :meth:`begin` on entry (waiting up to ``wait``
        seconds for the turn, at least 1), :meth:`commit` when the block ends,
        :meth:`rollback` when it raises (the exception then propagates). A COMMIT that
        SQLite refuses is rolled back too, and its error raised, so the turn is never kept.

        If the block ends the transaction itself (``conn.commit()``, ``conn.rollback()``, or
        ``conn.executescript()``, which commits first), the block's end gives the turn back
        and commits or rolls back nothing: what the block did stands, and no error is
        raised for the COMMIT that had nothing left to commit."""
        return QueuedTransaction(self, conn, wait, setting)

    def turn(self, wait: float = TRANSACTION_WAIT, setting: Optional[str] = None) -> "WriterTurn":
        """The writer turn alone, for ``with``, for code that runs its own ``BEGIN
        IMMEDIATE`` (SQLAlchemy, apsw, peewee): :meth:`acquire` on entry (waiting up to
        ``wait`` seconds, at least 1), :meth:`release` when the block ends, however it
        ends. End the transaction inside the block."""
        return WriterTurn(self, wait, setting)


class QueuedTransaction:
    """What :meth:`WriterQueue.transaction` returns: ``with queue.transaction(conn) as
    conn:``. Entering begins (turn and ``BEGIN IMMEDIATE``); leaving commits, or rolls back
    when the block raised, and gives the turn back."""

    __slots__ = ("_queue", "_conn", "_wait", "_setting")

    def __init__(
        self, queue: WriterQueue, conn: sqlite3.Connection, wait: float, setting: Optional[str]
    ) -> None:
        self._queue = queue
        self._conn = conn
        self._wait = wait
        self._setting = setting

    def __enter__(self) -> sqlite3.Connection:
        self._queue.begin(self._conn, self._wait, self._setting)
        return self._conn

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        # The core decides (commit, roll back, or give back the turn of a transaction the
        # block ended itself) and says what is reported.
        note = self._queue._end_transaction(self._conn, exc is not None)
        if note is not None and exc is not None:
            _note(exc, note)
        return False


class WriterTurn:
    """What :meth:`WriterQueue.turn` returns: ``with queue.turn(wait=5.0) as turn:`` holds
    the writer turn for the block (``turn.waited``: the seconds it waited) and gives it back
    at the end."""

    __slots__ = ("_queue", "_wait", "_setting", "waited")

    waited: float

    def __init__(self, queue: WriterQueue, wait: float, setting: Optional[str]) -> None:
        self._queue = queue
        self._wait = wait
        self._setting = setting
        self.waited = 0.0

    def __enter__(self) -> "WriterTurn":
        self.waited = self._queue.acquire(self._wait, self._setting)
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        if self._queue.holding:
            self._queue.release()
        return False


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
