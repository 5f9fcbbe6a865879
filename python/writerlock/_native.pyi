"""The native extension module of writerlock (pyo3, built from ``python/src/``).

Users import ``writerlock`` and ``writerlock.postgres``, which wrap it; this stub types every
class, function and constant it exports, so those modules type-check against it and
``stubtest`` compares it with the built module.
"""

import sqlite3
from os import PathLike
from pathlib import Path
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, TypedDict, Union, final

from typing_extensions import Self, disjoint_base

__all__ = [
    "__version__",
    "WriterQueue",
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
    "lock_status",
    "PgSettings",
    "PgSession",
    "PgWrite",
    "PgPool",
    "pg_new_alerts",
    "pg_alert_text",
    "pg_refusal_message",
    "pg_translate",
    "PG_WRITER_LOCK",
    "PG_LOCK_WAIT",
    "PG_LOCK_TRIES",
    "PG_IDLE_IN_TRANSACTION",
    "PG_STATEMENT_TIMEOUT",
    "PG_CONNECT_TIMEOUT",
    "PG_KEEPALIVES",
    "PG_KEEPALIVES_IDLE",
    "PG_KEEPALIVES_INTERVAL",
    "PG_KEEPALIVES_COUNT",
    "PG_TCP_USER_TIMEOUT",
    "PG_VERSION",
    "PG_REQUIRED",
    "PG_SESSION",
    "PG_VERSION_SETTING",
    "PG_REFUSED_SQLSTATE",
    "PG_REFUSED_LOCK_CLASS",
    "PG_REFUSED_LOCK_SUBID",
    "PG_FLOOR_NAME",
    "PG_KEPT_CLOSED_ALERTS",
    "PG_UNCOMMITTED_BEFORE_WRITE",
    "PG_UNSEEN_CLIENT",
    "PG_DEFAULT_POOL_SIZE",
    "PgProtocol",
    "pg_libpq_keywords",
    "pg_check_sql",
    "pg_read_checks",
    "pg_verify_checks",
    "pg_schema_is_set_up",
    "pg_mark_schema_set_up",
    "pg_read_refused_writers",
    "PG_REFUSED_WRITERS_SQL",
    "PG_FLOOR_TABLE_SQL",
    "PG_STORED_FLOOR_SQL",
    "pg_write_ended_message",
    "queue_error_classes",
    "PG_ERROR_KINDS",
]

__version__: str

# --------------------------------------------------------------------------------------------
# SQLite write queue (python/src/sqlite.rs)

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

_Strategy = Literal["handoff", "poll"]
_SqliteParams = Union[Sequence[Any], Mapping[str, Any]]

@disjoint_base
class WriterQueue:
    """A process's handle on one SQLite database's write queue (fork-safe, picklable)."""

    def __new__(cls, path: Union[str, PathLike[str]], *, strategy: _Strategy = "handoff") -> Self: ...
    @classmethod
    def for_connection(cls, conn: sqlite3.Connection, *, strategy: _Strategy = "handoff") -> Self:
        """A queue for the connection's own main database file."""
    def begin(self, conn: sqlite3.Connection, wait: float = ..., setting: Optional[str] = None) -> None:
        """Waits up to ``wait`` seconds (at least 1; by default TRANSACTION_WAIT, 25) for the
        turn, then BEGIN IMMEDIATE. Raises
        Busy, NotStarted, NotAutocommit, WrongDatabase."""
    def commit(self, conn: sqlite3.Connection) -> None:
        """Commits and gives the turn back."""
    def rollback(self, conn: sqlite3.Connection) -> None:
        """Rolls back and gives the turn back."""
    def _release_ended(self, conn: sqlite3.Connection) -> bool: ...
    def _end_transaction(self, conn: sqlite3.Connection, raised: bool) -> Optional[str]: ...
    def execute(
        self,
        conn: sqlite3.Connection,
        sql: str,
        params: Optional[_SqliteParams] = None,
        wait: Optional[float] = None,
        setting: Optional[str] = None,
        *,
        busy_timeout: Optional[float] = None,
    ) -> sqlite3.Cursor:
        """One write statement in turn (reads and statements inside a transaction run at
        once); returns its cursor. ``busy_timeout`` is the deprecated name of ``wait``."""
    def acquire(self, wait: float = ..., setting: Optional[str] = None) -> float:
        """Takes the writer turn alone (for code that runs its own BEGIN IMMEDIATE), waiting
        up to ``wait`` seconds (by default TRANSACTION_WAIT, 25); returns the seconds it
        waited."""
    def release(self) -> None:
        """Gives back the turn acquire() took."""
    @property
    def holding(self) -> bool: ...
    @property
    def last_wait(self) -> float: ...
    @property
    def database(self) -> Path: ...
    @property
    def strategy(self) -> _Strategy: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Path]]: ...

# --------------------------------------------------------------------------------------------
# Who holds and who waits (python/src/status.rs)

class _FileStatus(TypedDict):
    path: str
    exists: bool

class _HolderStatus(TypedDict):
    pid: int
    alive: bool
    command: Optional[str]
    held_for_s: Optional[float]
    held_for_source: str
    process_age_s: Optional[float]
    descriptor_open_in: List[int]

class _WaiterStatus(TypedDict):
    pid: int
    command: Optional[str]
    waited_s: Optional[float]
    ticket: Optional[int]
    process_age_s: Optional[float]

class _ProcessStatus(TypedDict):
    pid: int
    command: Optional[str]

class _FilesystemStatus(TypedDict):
    name: str
    magic: str
    kind: str
    warning: Optional[str]

class _LockStatus(TypedDict):
    lock_file: _FileStatus
    queue_file: _FileStatus
    holder: Optional[_HolderStatus]
    waiting: int
    queue: List[_WaiterStatus]
    blocked: List[int]
    outside: List[_ProcessStatus]
    filesystem: _FilesystemStatus

def lock_status(path: Union[str, PathLike[str]]) -> _LockStatus:
    """Who holds the writer lock of the database at ``path`` and who waits, after the
    ``writerlock`` command's check of the path: ``ValueError`` for an in-memory database or
    a file that is not a SQLite database, ``FileNotFoundError`` when neither it nor its lock
    file exists, ``OSError`` when the files cannot be read."""

# --------------------------------------------------------------------------------------------
# Postgres writer session (python/src/pg.rs)

PG_WRITER_LOCK: int
PG_LOCK_WAIT: float
PG_LOCK_TRIES: int
PG_IDLE_IN_TRANSACTION: float
PG_STATEMENT_TIMEOUT: float
PG_CONNECT_TIMEOUT: float
PG_KEEPALIVES: bool
PG_KEEPALIVES_IDLE: float
PG_KEEPALIVES_INTERVAL: float
PG_KEEPALIVES_COUNT: int
PG_TCP_USER_TIMEOUT: float
PG_VERSION: int
PG_REQUIRED: int
PG_SESSION: List[Tuple[str, str]]
PG_VERSION_SETTING: str
PG_REFUSED_SQLSTATE: str
PG_REFUSED_LOCK_CLASS: int
PG_REFUSED_LOCK_SUBID: int
PG_FLOOR_NAME: str
PG_KEPT_CLOSED_ALERTS: int
PG_UNCOMMITTED_BEFORE_WRITE: str
PG_UNSEEN_CLIENT: str
PG_DEFAULT_POOL_SIZE: int

# ``(writer, pid, version, floor)``
_RefusedTuple = Tuple[str, int, int, int]
# ``(name, sent, shown, status)``, status ``in effect``, ``not in effect`` or ``not applicable``
_CheckTuple = Tuple[str, str, Optional[str], str]
# ``cursor.description``: name and type name of each column, then five ``None``
_Description = Tuple[Tuple[str, str, None, None, None, None, None], ...]
_PgParams = Optional[Sequence[Any]]

@final
class PgSettings:
    """The settings every connection sends: time limits, writer version and floor, keepalives.
    Durations are in seconds."""

    def __new__(
        cls,
        *,
        version: int = ...,
        required: int = ...,
        lock_wait: float = ...,
        lock_tries: int = ...,
        idle_in_transaction: float = ...,
        statement_timeout: float = ...,
        connect_timeout: float = ...,
        keepalives: bool = ...,
        keepalives_idle: float = ...,
        keepalives_interval: float = ...,
        keepalives_count: int = ...,
        tcp_user_timeout: float = ...,
    ) -> Self: ...
    @property
    def startup_options(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def required(self) -> int: ...
    @property
    def lock_wait(self) -> float: ...
    @property
    def lock_tries(self) -> int: ...
    @property
    def idle_in_transaction(self) -> float: ...
    @property
    def statement_timeout(self) -> float: ...

@final
class PgSession:
    """One session with the ledger database (the native half of
    ``writerlock.postgres.Connection``)."""

    @staticmethod
    def connect(dsn: str, settings: PgSettings) -> PgSession: ...
    def execute(
        self, sql: str, params: _PgParams = None, within: Optional[int] = None, begin: bool = False
    ) -> Tuple[Optional[_Description], List[Tuple[Any, ...]], int, Optional[int]]: ...
    def execute_batch(self, sql: str, within: Optional[int] = None, begin: bool = False) -> None: ...
    def execute_many(
        self,
        sql: str,
        seq_of_params: Iterable[_PgParams],
        within: Optional[int] = None,
        begin: bool = False,
    ) -> int: ...
    def release_for_write(self) -> bool: ...
    def open_write(self) -> Optional[Tuple[int, int, Optional[int], List[_RefusedTuple]]]: ...
    @property
    def in_implicit_transaction(self) -> bool: ...
    @property
    def transaction_serial(self) -> int: ...
    @property
    def zone_epoch(self) -> int: ...
    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def lock_writer(self) -> int: ...
    def setup_schema(self, extra_sql: Optional[str] = None) -> None: ...
    def refused_writers(self) -> List[_RefusedTuple]: ...
    def stored_floor(self) -> Optional[int]: ...
    def show(self, name: str) -> Optional[str]: ...
    def check_settings(self) -> List[_CheckTuple]: ...
    def verify_settings(self) -> None: ...
    def close(self) -> None: ...
    @property
    def in_transaction(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def pid(self) -> int: ...
    @property
    def address(self) -> str: ...

@disjoint_base
class PgWrite:
    """A write transaction on a ``writerlock.postgres.Connection`` (the native half of
    ``writerlock.postgres.Write``)."""

    def __new__(
        cls, connection: Any, ledger: Optional[str] = None, existing_alerts: Any = None
    ) -> Self: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]: ...
    def execute(self, sql: str, params: _PgParams = None) -> Any: ...
    def _within(self) -> int: ...
    @property
    def connection(self) -> Any: ...
    @property
    def ledger(self) -> Optional[str]: ...
    @property
    def waits(self) -> int: ...
    @property
    def floor(self) -> Optional[int]: ...
    @property
    def refused(self) -> List[Any]: ...
    @property
    def alerts(self) -> List[str]: ...

@final
class PgPool:
    """A bounded pool of sessions to one address."""

    def __new__(cls, dsn: str, settings: PgSettings, size: int = ...) -> Self: ...
    def take(self) -> PgSession: ...
    def give(self, session: PgSession) -> None: ...
    @property
    def idle_count(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def address(self) -> str: ...

def pg_new_alerts(refused: Sequence[_RefusedTuple], existing: Sequence[Tuple[str, bool]]) -> List[str]: ...
def pg_alert_text(writer: str, version: int, floor: int) -> str: ...
def pg_refusal_message(version: int, floor: int) -> str: ...
def pg_translate(sql: str) -> str: ...

# --------------------------------------------------------------------------------------------
# The writer protocol without I/O, for a driver's own connection (python/src/protocol.rs)

PG_REFUSED_WRITERS_SQL: str
PG_FLOOR_TABLE_SQL: str
PG_STORED_FLOOR_SQL: str

_TxState = Literal["idle", "open_unused", "open_used"]
# A step of the protocol: ``("run", kind, sql)``, ``("granted", waits, floor, refused, clean)``
# (``clean``: the refusal count at which the write found no refused writer, or None),
# ``("done",)`` or ``("failed", exception)``.
_Step = Tuple[Any, ...]

@final
class PgProtocol:
    """The core's writer protocol: which statement to run next, and what each reply means."""

    @staticmethod
    def write(
        settings: PgSettings,
        state: _TxState,
        port: Optional[int] = None,
        unix: bool = False,
        known_clean: Optional[int] = None,
    ) -> PgProtocol: ...
    @staticmethod
    def write_in_one_message(
        settings: PgSettings,
        state: _TxState,
        port: Optional[int] = None,
        unix: bool = False,
        known_clean: Optional[int] = None,
    ) -> PgProtocol: ...
    @staticmethod
    def setup(settings: PgSettings, extra_sql: Optional[str], state: _TxState) -> PgProtocol: ...
    @staticmethod
    def ensure(settings: PgSettings, state: _TxState) -> PgProtocol: ...
    @staticmethod
    def end(commit: bool, statement_failed: bool) -> PgProtocol: ...
    def start(self) -> _Step: ...
    def feed_rows(self, rows: Iterable[Iterable[Any]]) -> _Step: ...
    def feed_error(
        self,
        sqlstate: str,
        message: str,
        detail: Optional[str] = None,
        hint: Optional[str] = None,
        fatal: bool = False,
    ) -> _Step: ...
    def feed_lost(self, reason: str) -> _Step: ...
    @property
    def set_up(self) -> bool: ...
    @property
    def finished(self) -> bool: ...

def pg_libpq_keywords(settings: PgSettings) -> List[Tuple[str, str]]: ...
def pg_check_sql(settings: PgSettings) -> str: ...
def pg_read_checks(settings: PgSettings, rows: Iterable[Iterable[Any]]) -> List[_CheckTuple]: ...
def pg_verify_checks(settings: PgSettings, rows: Iterable[Iterable[Any]]) -> None: ...
def pg_schema_is_set_up(address: str) -> bool: ...
def pg_mark_schema_set_up(address: str) -> None: ...
def pg_read_refused_writers(rows: Iterable[Iterable[Any]]) -> List[_RefusedTuple]: ...

# --------------------------------------------------------------------------------------------
# DB-API placeholders (python/src/dbapi.rs) and errors (python/src/errors.rs)

def pg_write_ended_message(how_it_ends: str, start_new: str) -> str: ...
def queue_error_classes() -> Dict[str, str]: ...

PG_ERROR_KINDS: Tuple[str, ...]
