import datetime
import sqlite3
from contextlib import AbstractContextManager
from typing import (
    Literal,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    Union,
    overload,
)

__all__ = [
    "apilevel",
    "threadsafety",
    "paramstyle",
    "Binary",
    "Json",
    "Jsonb",
    "Date",
    "Time",
    "Timestamp",
    "DateFromTicks",
    "TimeFromTicks",
    "TimestampFromTicks",
    "STRING",
    "BINARY",
    "NUMBER",
    "DATETIME",
    "ROWID",
    "Warning",
    "Error",
    "connect",
    "write",
    "DriverWrite",
    "session_options",
    "check_session",
    "Connection",
    "Cursor",
    "ServerCursor",
    "Write",
    "Pool",
    "Alert",
    "RefusedWriter",
    "setup_schema",
    "refused_writers",
    "new_alerts",
    "stored_floor",
    "alert_text",
    "refusal_message",
    "WRITER_LOCK",
    "LOCK_WAIT",
    "LOCK_TRIES",
    "IDLE_IN_TRANSACTION",
    "STATEMENT_TIMEOUT",
    "SESSION",
    "VERSION",
    "REQUIRED",
    "VERSION_SETTING",
    "REFUSED_SQLSTATE",
    "REFUSED_LOCK_CLASS",
    "KEPT_CLOSED_ALERTS",
    "UNSEEN_CLIENT",
    "DEFAULT_POOL_SIZE",
    "DatabaseError",
    "OperationalError",
    "IntegrityError",
    "DataError",
    "ProgrammingError",
    "NotSupportedError",
    "InternalError",
    "InterfaceError",
    "WriterLockNotGranted",
    "Refused",
    "SessionEnded",
    "ConnectionClosed",
    "CommitOutcomeUnknown",
    "ConnectError",
    "SettingNotInEffect",
]

WRITER_LOCK: int
LOCK_WAIT: float
LOCK_TRIES: int
IDLE_IN_TRANSACTION: float
STATEMENT_TIMEOUT: float
VERSION: int
REQUIRED: int
SESSION: Dict[str, str]
VERSION_SETTING: str
REFUSED_SQLSTATE: str
REFUSED_LOCK_CLASS: int
KEPT_CLOSED_ALERTS: int
UNSEEN_CLIENT: str
DEFAULT_POOL_SIZE: int

apilevel: str
threadsafety: int
paramstyle: str

Binary = bytes
Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime

class Json:
    """A value sent as ``json`` (a plain ``dict`` goes as JSON too; a ``list`` is an
    array)."""

    obj: Any
    def __init__(self, obj: Any) -> None: ...

class Jsonb(Json):
    """A value sent as ``jsonb``."""

def DateFromTicks(ticks: float) -> datetime.date: ...
def TimeFromTicks(ticks: float) -> datetime.time: ...
def TimestampFromTicks(ticks: float) -> datetime.datetime: ...

class DBAPITypeObject:
    """Equal to the ``type_code`` of every column type it stands for."""

    name: str
    type_names: frozenset[str]
    def __init__(self, name: str, *type_names: str) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __ne__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

STRING: DBAPITypeObject
BINARY: DBAPITypeObject
NUMBER: DBAPITypeObject
DATETIME: DBAPITypeObject
ROWID: DBAPITypeObject

_Params = Optional[Sequence[Any]]
_Row = Tuple[Any, ...]
_Description = Tuple[Tuple[str, str, None, None, None, None, None], ...]

class Warning(sqlite3.Warning):
    """PEP 249's ``Warning``."""

class Error(sqlite3.Error):
    """PEP 249's ``Error``: the base of every error of the Postgres writer session."""

class DatabaseError(Error, sqlite3.DatabaseError):
    """An error of the Postgres writer session, carrying its SQLSTATE."""

    sqlstate: Optional[str]
    detail: Optional[str]
    hint: Optional[str]
    def __init__(
        self,
        message: str,
        sqlstate: Optional[str] = ...,
        detail: Optional[str] = ...,
        hint: Optional[str] = ...,
    ) -> None: ...
    @property
    def code(self) -> Optional[str]: ...
    @property
    def pgcode(self) -> Optional[str]: ...

class OperationalError(DatabaseError, sqlite3.OperationalError): ...
class IntegrityError(DatabaseError, sqlite3.IntegrityError): ...
class DataError(DatabaseError, sqlite3.DataError): ...
class ProgrammingError(DatabaseError, sqlite3.ProgrammingError): ...
class NotSupportedError(DatabaseError, sqlite3.NotSupportedError): ...
class InternalError(DatabaseError, sqlite3.InternalError): ...

class WriterLockNotGranted(OperationalError):
    """``the ledger writer lock was not granted in 3 waits of 10 seconds`` (55P03)."""

    tries: int
    wait: float

class Refused(DatabaseError):
    """The writer is below the stored floor (LW001)."""

    version: int
    floor: int

class SessionEnded(OperationalError): ...
class ConnectionClosed(OperationalError): ...
class CommitOutcomeUnknown(ConnectionClosed): ...

class ConnectError(OperationalError):
    address: str

class SettingNotInEffect(OperationalError):
    setting: str
    expected: str
    actual: str

class InterfaceError(Error, sqlite3.InterfaceError): ...

class RefusedWriter:
    __match_args__ = ("writer", "pid", "version", "floor")
    writer: str
    pid: int
    version: int
    floor: int
    def __init__(self, writer: str, pid: int, version: int, floor: int) -> None: ...
    @property
    def refusal(self) -> str: ...
    @property
    def alert_text(self) -> str: ...

class Alert:
    __match_args__ = ("text", "open")
    text: str
    open: bool
    def __init__(self, text: str, open: bool = True) -> None: ...

class _AlertDict(TypedDict, total=False):
    text: str
    open: bool

_AlertLike = Union[Alert, str, Tuple[str, bool], _AlertDict]
_ExistingAlerts = Union[
    Iterable[_AlertLike], Callable[["Connection", Optional[str]], Iterable[_AlertLike]], None
]

class Cursor:
    connection: Connection
    description: Optional[_Description]
    rowcount: int
    arraysize: int
    lastrowid: Optional[int]
    row_factory: Optional[Callable[[Cursor, _Row], Any]]
    def __init__(self, connection: Connection) -> None: ...
    def execute(self, sql: str, params: _Params = ...) -> Cursor: ...
    def executemany(self, sql: str, seq_of_params: Iterable[_Params]) -> Cursor: ...
    def fetchone(self) -> Any: ...
    def fetchmany(self, size: Optional[int] = ...) -> List[Any]: ...
    def fetchall(self) -> List[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __next__(self) -> Any: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def setinputsizes(self, sizes: Any) -> None: ...
    def setoutputsize(self, size: Any, column: Any = ...) -> None: ...

class ServerCursor(Cursor):
    """``conn.cursor(name)``: a cursor declared on the server, its rows fetched ``itersize``
    at a time."""

    itersize: int
    name: str
    scrollable: Optional[bool]
    withhold: bool
    def __init__(
        self,
        connection: Connection,
        name: str,
        *,
        scrollable: Optional[bool] = ...,
        withhold: bool = ...,
    ) -> None: ...

class Write:
    """``with conn.write(ledger, existing_alerts=...) as w:`` — writer lock, floor check,
    the caller's statements; commit on success, rollback on exception."""

    connection: Connection
    ledger: Optional[str]
    waits: int
    floor: Optional[int]
    refused: List[RefusedWriter]
    alerts: List[str]
    def __init__(
        self, connection: Connection, ledger: Optional[str] = ..., existing_alerts: _ExistingAlerts = ...
    ) -> None: ...
    def __enter__(self) -> Write: ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]: ...
    def execute(self, sql: str, params: _Params = ...) -> Cursor: ...
    def executemany(self, sql: str, seq_of_params: Iterable[_Params]) -> Cursor: ...

class Connection:
    row_factory: Optional[Callable[[Cursor, _Row], Any]]
    Warning: type[Warning]
    Error: type[Error]
    InterfaceError: type[InterfaceError]
    DatabaseError: type[DatabaseError]
    DataError: type[DataError]
    OperationalError: type[OperationalError]
    IntegrityError: type[IntegrityError]
    InternalError: type[InternalError]
    ProgrammingError: type[ProgrammingError]
    NotSupportedError: type[NotSupportedError]
    def __init__(
        self,
        dsn: str,
        *,
        version: int = ...,
        required: int = ...,
        autocommit: bool = ...,
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
    ) -> None: ...
    def cursor(
        self, name: Optional[str] = None, *, scrollable: Optional[bool] = None, withhold: bool = False
    ) -> Cursor: ...
    def execute(self, sql: str, params: _Params = ...) -> Cursor: ...
    def executemany(self, sql: str, seq_of_params: Iterable[_Params]) -> Cursor: ...
    def executescript(self, sql: str) -> Cursor: ...
    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def write(self, ledger: Optional[str] = None, *, existing_alerts: _ExistingAlerts = None) -> Write: ...
    def lock_writer(self) -> int: ...
    def show(self, name: str) -> Optional[str]: ...
    def check_settings(self) -> List[Tuple[str, str, Optional[str], str]]: ...
    def close(self) -> None: ...
    @property
    def autocommit(self) -> bool: ...
    @autocommit.setter
    def autocommit(self, value: bool) -> None: ...
    @property
    def in_transaction(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def pid(self) -> int: ...
    @property
    def address(self) -> str: ...
    def __enter__(self) -> Connection: ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]: ...

def connect(
    dsn: str,
    *,
    version: int = ...,
    required: int = ...,
    autocommit: bool = ...,
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
) -> Connection: ...

class Pool:
    def __init__(
        self,
        dsn: str,
        size: int = ...,
        *,
        version: int = ...,
        required: int = ...,
        autocommit: bool = ...,
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
    ) -> None: ...
    def take(self) -> Connection: ...
    def give(self, conn: Connection) -> None: ...
    def connection(self) -> AbstractContextManager[Connection]: ...
    @property
    def idle_count(self) -> int: ...
    @property
    def size(self) -> int: ...

def setup_schema(
    conn: Any,
    extra_sql: Optional[str] = None,
    *,
    version: int = ...,
    required: int = ...,
    lock_wait: float = ...,
    lock_tries: int = ...,
) -> None: ...
def refused_writers(conn: Any) -> List[RefusedWriter]: ...
def stored_floor(conn: Any) -> Optional[int]: ...
def new_alerts(
    refused: Iterable[Union[RefusedWriter, Tuple[str, int, int, int]]],
    existing: Iterable[_AlertLike] = ...,
) -> List[str]: ...
def alert_text(writer: str, version: int, floor: int) -> str: ...
def refusal_message(version: int, floor: int) -> str: ...

# Bring your own connection (psycopg 3, psycopg2)

_CheckTuple = Tuple[str, str, Optional[str], str]

def session_options(
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
) -> Dict[str, str]:
    """The libpq keywords that carry the writer-session settings:
    ``psycopg.connect(url, **session_options())``."""

def check_session(
    conn: Any,
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
) -> List[_CheckTuple]:
    """Raises :class:`SettingNotInEffect` unless the settings took effect on ``conn``."""

class DriverWrite:
    """``with write(conn, ledger) as w:`` on a psycopg 3 or psycopg2 connection."""

    connection: Any
    ledger: Optional[str]
    waits: int
    floor: Optional[int]
    refused: List[RefusedWriter]
    alerts: List[str]
    def __init__(
        self,
        conn: Any,
        driver: Any,
        settings: Any,
        ledger: Optional[str],
        existing_alerts: Any,
        new_alerts: Callable[..., List[str]],
        refused_writer: Callable[..., Any],
    ) -> None: ...
    def __enter__(self) -> DriverWrite: ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]: ...
    def execute(self, sql: Any, params: Any = None) -> Any: ...
    def executemany(self, sql: Any, seq_of_params: Any) -> Any: ...

@overload
def write(
    conn: Connection,
    ledger: Optional[str] = None,
    *,
    existing_alerts: _ExistingAlerts = None,
) -> Write: ...
@overload
def write(
    conn: Any,
    ledger: Optional[str] = None,
    *,
    existing_alerts: Union[
        Iterable[_AlertLike], Callable[[Any, Optional[str]], Iterable[_AlertLike]], None
    ] = None,
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
) -> DriverWrite: ...
