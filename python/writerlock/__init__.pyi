import sqlite3
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Mapping, Optional, Sequence, Type, Union

from typing_extensions import Self

from . import postgres as postgres

__version__: str

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

TRANSACTION_WAIT: float
CLI_TRANSACTION_WAIT: float
BUSY_TIMEOUT: float
CLI_BUSY_TIMEOUT: float
TRANSACTION_SETTING: str
CLI_TRANSACTION_SETTING: str
BUSY_SETTING: str
CLI_BUSY_SETTING: str
LOCK_SUFFIX: str
QUEUE_SUFFIX: str

_Params = Union[Sequence[Any], Mapping[str, Any]]

class Busy(sqlite3.OperationalError):
    """A wait for the writer turn ran out; nothing was written."""

    waited: float
    limit: float
    setting: str
    holder_pid: Optional[int]
    sqlite_errorcode: int
    sqlite_errorname: str
    def __init__(
        self,
        message: str,
        waited: float = ...,
        limit: float = ...,
        setting: str = ...,
        holder_pid: Optional[int] = ...,
    ) -> None: ...

class NotStarted(sqlite3.OperationalError):
    """BEGIN IMMEDIATE failed for a reason other than a busy database."""

    sqlite_errorcode: int
    sqlite_errorname: str
    def __init__(self, message: str, sqlite_errorcode: int = ..., sqlite_errorname: str = ...) -> None: ...

class NotAutocommit(sqlite3.ProgrammingError, ValueError):
    """The connection is not in autocommit mode; open it with isolation_level=None."""

class WrongDatabase(sqlite3.ProgrammingError, ValueError):
    """The connection writes another database than the queue's; nothing was run."""

    queue_database: str
    connection_database: str
    def __init__(self, message: str, queue_database: str = ..., connection_database: str = ...) -> None: ...

class WriterQueue:
    """A process's handle on one SQLite database's write queue (fork-safe, picklable)."""

    def __new__(
        cls, path: Union[str, PathLike[str]], *, strategy: Literal["handoff", "poll"] = "handoff"
    ) -> Self: ...
    @classmethod
    def for_connection(
        cls, conn: sqlite3.Connection, *, strategy: Literal["handoff", "poll"] = "handoff"
    ) -> Self:
        """A queue for the connection's own main database file."""
    def begin(self, conn: sqlite3.Connection, wait: float = 25.0, setting: Optional[str] = None) -> None:
        """Waits up to ``wait`` seconds (at least 1) for the turn, then BEGIN IMMEDIATE. Raises
        Busy, NotStarted, NotAutocommit, WrongDatabase."""
    def commit(self, conn: sqlite3.Connection) -> None:
        """Commits and gives the turn back."""
    def rollback(self, conn: sqlite3.Connection) -> None:
        """Rolls back and gives the turn back."""
    def transaction(
        self, conn: sqlite3.Connection, wait: float = 25.0, setting: Optional[str] = None
    ) -> QueuedTransaction:
        """begin(); commit when the block ends, roll back when it raises."""
    def execute(
        self,
        conn: sqlite3.Connection,
        sql: str,
        params: Optional[_Params] = None,
        wait: Optional[float] = None,
        setting: Optional[str] = None,
        *,
        busy_timeout: Optional[float] = None,
    ) -> sqlite3.Cursor:
        """One write statement in turn (reads and statements inside a transaction run at
        once); returns its cursor. ``busy_timeout`` is the deprecated name of ``wait``."""
    def acquire(self, wait: float = 25.0, setting: Optional[str] = None) -> float:
        """Takes the writer turn alone (for code that runs its own BEGIN IMMEDIATE); returns
        the seconds it waited."""
    def release(self) -> None:
        """Gives back the turn acquire() took."""
    def turn(self, wait: float = 25.0, setting: Optional[str] = None) -> WriterTurn:
        """acquire() for a with block, release() when it ends."""
    def _release_ended(self, conn: sqlite3.Connection) -> bool: ...
    @property
    def holding(self) -> bool: ...
    @property
    def last_wait(self) -> float: ...
    @property
    def database(self) -> Path: ...
    @property
    def strategy(self) -> Literal["handoff", "poll"]: ...

class QueuedTransaction:
    """What WriterQueue.transaction() returns."""

    def __init__(
        self, queue: WriterQueue, conn: sqlite3.Connection, wait: float, setting: Optional[str]
    ) -> None: ...
    def __enter__(self) -> sqlite3.Connection: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]: ...

class WriterTurn:
    """What WriterQueue.turn() returns; ``waited`` is the seconds the turn waited."""

    waited: float
    def __init__(self, queue: WriterQueue, wait: float, setting: Optional[str]) -> None: ...
    def __enter__(self) -> WriterTurn: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]: ...
