"""The Postgres writer session of the shared ledger database, sqlite3-like.

Every connection carries the writer-session settings as startup options
(``lock_timeout=10s``, ``idle_in_transaction_session_timeout=15s``,
``statement_timeout=60s``, ``agentihooks.ledger_writer_version=1``, TCP keepalives) and
checks that they took effect. Writers take turns through one writer lock, taken as each
write's first statement with three waits of 10 seconds, and the database refuses writes from
code older than the stored writer floor::

    import sqlite3
    from writerlock import postgres

    conn = postgres.connect("postgresql://ledger@db:5432/ledger")
    try:
        with conn.write("main", existing_alerts=current_alerts) as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = ?", ("main",))
            for text in w.alerts:          # refused writers to name in a writer alert
                raise_alert("main", text)
    except postgres.Refused:           # a sqlite3.DatabaseError, code "LW001"
        ...
    except sqlite3.OperationalError:   # the writer lock was not granted in 3 waits of 10 seconds
        ...

As PEP 249, psycopg 3 and sqlite3 have it, nothing is kept until ``commit()``: the first
statement opens a transaction, ``rollback()`` and ``close()`` undo it; ``autocommit=True``
commits each statement on its own. ``write()`` is a transaction of its own, its writer lock
the first statement. Statements take ``?`` placeholders (translated to ``$1..$n`` outside
string literals and comments) or ``$1``; parameters carry their Python type and columns read
as psycopg 3 reads them.
Every error is a ``sqlite3.DatabaseError`` subclass (:class:`DatabaseError`) carrying its
SQLSTATE in ``sqlstate`` and ``code``. The interpreter is released during every call that
talks to the server.

A psycopg 3 or psycopg2 connection of your own (or a SQLAlchemy connection over one) gets the
same session: open it with ``**session_options()``, check it with :func:`check_session`, and
write with ``with write(conn, ledger) as w:``; the core's writer protocol decides every step
and this module only runs its statements on that connection.

The module follows DB-API 2.0 (PEP 249): ``apilevel``, ``threadsafety``, ``paramstyle =
"qmark"``, the exception classes (``Error`` is a ``sqlite3.Error``), type objects and
constructors. Addresses are completed from the ``PG*`` environment variables and the password
file as libpq does.
"""

from __future__ import annotations

import contextlib
import datetime
import time
import zoneinfo
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    Union,
    overload,
)

from . import _drivers, _native
from ._drivers import DriverWrite
from ._errors import (
    CommitOutcomeUnknown,
    ConnectError,
    ConnectionClosed,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Refused,
    SessionEnded,
    SettingNotInEffect,
    Warning,
    WriterLockNotGranted,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

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

#: The writer lock key: ``SELECT pg_advisory_xact_lock(1279607879)``.
WRITER_LOCK: int = _native.PG_WRITER_LOCK
#: One wait for the writer lock before the server cancels it (``lock_timeout``), seconds: 10.
LOCK_WAIT: float = _native.PG_LOCK_WAIT
#: Waits for the writer lock before a write gives up: 3.
LOCK_TRIES: int = _native.PG_LOCK_TRIES
#: Idle limit inside a transaction (``idle_in_transaction_session_timeout``), seconds: 15.
IDLE_IN_TRANSACTION: float = _native.PG_IDLE_IN_TRANSACTION
#: Statement limit (``statement_timeout``), seconds: 60.
STATEMENT_TIMEOUT: float = _native.PG_STATEMENT_TIMEOUT
#: The writer version this code writes as: 1.
VERSION: int = _native.PG_VERSION
#: The writer floor this code stores at schema setup: 1.
REQUIRED: int = _native.PG_REQUIRED
#: The startup settings every connection sends, name to value.
SESSION: Dict[str, str] = dict(_native.PG_SESSION)
#: The session setting that carries the writer version.
VERSION_SETTING: str = _native.PG_VERSION_SETTING
#: The SQLSTATE of a floor refusal: ``LW001``.
REFUSED_SQLSTATE: str = _native.PG_REFUSED_SQLSTATE
#: The refusal lock's class id (1280788050).
REFUSED_LOCK_CLASS: int = _native.PG_REFUSED_LOCK_CLASS
#: How many closed alerts a ledger's list keeps (200).
KEPT_CLOSED_ALERTS: int = _native.PG_KEPT_CLOSED_ALERTS
#: How a refused session without a client address is named.
UNSEEN_CLIENT: str = _native.PG_UNSEEN_CLIENT
#: The default number of idle connections a pool keeps.
DEFAULT_POOL_SIZE: int = _native.PG_DEFAULT_POOL_SIZE

Params = Union[Sequence[Any], None]
#: A row as the server sent it, before the cursor's ``row_factory``.
_Row = Tuple[Any, ...]
#: ``cursor.description``: each column's name and Postgres type name, then five ``None``.
_Description = Tuple[Tuple[str, str, None, None, None, None, None], ...]


class _Options(TypedDict, total=False):
    """The session settings every way of opening a session takes as keywords (seconds
    for durations)."""

    lock_wait: float
    lock_tries: int
    idle_in_transaction: float
    statement_timeout: float
    connect_timeout: float
    keepalives: bool
    keepalives_idle: float
    keepalives_interval: float
    keepalives_count: int
    tcp_user_timeout: float


class _SchemaOptions(TypedDict, total=False):
    """What :func:`setup_schema` takes with a driver's connection."""

    version: int
    required: int
    lock_wait: float
    lock_tries: int

# --------------------------------------------------------------------------------------------
# DB-API 2.0 (PEP 249)

#: PEP 249: this module follows DB-API 2.0.
apilevel: str = "2.0"
#: PEP 249: threads may share the module and connections (each connection runs one call at
#: a time; a transaction is the connection's, so threads sharing one share it).
threadsafety: int = 2
#: PEP 249: ``?`` placeholders (``WHERE id = ?``); ``$1``, ``$2``... work as well.
paramstyle: str = "qmark"

#: PEP 249 constructors: ``bytes`` goes to a ``bytea`` parameter.
Binary = bytes
Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def DateFromTicks(ticks: float) -> datetime.date:
    """The local date of ``ticks`` seconds since the epoch (PEP 249)."""
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:
    """The local time of day of ``ticks`` seconds since the epoch (PEP 249)."""
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:
    """The local date and time of ``ticks`` seconds since the epoch (PEP 249)."""
    return Timestamp(*time.localtime(ticks)[:6])


class DBAPITypeObject:
    """A PEP 249 type object: equal to the ``type_code`` (``cursor.description[i][1]``, the
    Postgres type name such as ``int4``) of every column type it stands for."""

    def __init__(self, name: str, *type_names: str) -> None:
        self.name = name
        self.type_names = frozenset(type_names)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DBAPITypeObject):
            return self.type_names == other.type_names
        if isinstance(other, str):
            return other in self.type_names
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash(self.type_names)

    def __repr__(self) -> str:
        return f"<writerlock.postgres type object {self.name}>"


STRING = DBAPITypeObject("STRING", "text", "varchar", "bpchar", "char", "name", "citext", "unknown")
BINARY = DBAPITypeObject("BINARY", "bytea")
NUMBER = DBAPITypeObject("NUMBER", "int2", "int4", "int8", "float4", "float8", "numeric", "oid", "money")
DATETIME = DBAPITypeObject("DATETIME", "date", "time", "timetz", "timestamp", "timestamptz", "interval")
ROWID = DBAPITypeObject("ROWID", "oid", "tid")

_ZONED = frozenset(("timestamptz", "_timestamptz"))


class Json:
    """A value sent as ``json``, as psycopg's ``Json``: ``conn.execute("INSERT INTO t (doc)
    VALUES (?)", (postgres.Json([1, 2]),))``. A plain ``dict`` goes as JSON without a type
    (the server takes the column's); a ``list`` goes as an array, so wrap a JSON array."""

    __slots__ = ("obj",)
    _writerlock_json = 114

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.obj!r})"


class Jsonb(Json):
    """A value sent as ``jsonb``, as psycopg's ``Jsonb``."""

    __slots__ = ()
    _writerlock_json = 3802


def _localized(value: Any, zone: datetime.tzinfo) -> Any:
    if isinstance(value, datetime.datetime):
        return value.astimezone(zone)
    if isinstance(value, list):
        return [_localized(v, zone) for v in value]
    return value


def _settings(version: int, required: int, options: Mapping[str, Any]) -> _native.PgSettings:
    return _native.PgSettings(version=version, required=required, **options)


def _check_dsn(dsn: Any) -> str:
    if not isinstance(dsn, str):
        raise TypeError(
            "dsn must be a str such as postgresql://user@host:5432/dbname or libpq "
            f"key=value pairs, not {type(dsn).__name__}"
        )
    return dsn


@dataclass(frozen=True)
class RefusedWriter:
    """A refused writer still connected: its client address (or ``an unseen client``), its
    server process id, the version it sent and the floor it hit."""

    writer: str
    pid: int
    version: int
    floor: int

    @property
    def refusal(self) -> str:
        """The refusal it got: ``ledger writer version 0 is below version 1, ...``."""
        return _native.pg_refusal_message(self.version, self.floor)

    @property
    def alert_text(self) -> str:
        """Its alert: ``The ledger writer at 10.0.0.5 was refused: <refusal>``."""
        return _native.pg_alert_text(self.writer, self.version, self.floor)


@dataclass(frozen=True)
class Alert:
    """An alert already in a ledger's alert list."""

    text: str
    open: bool = True


class _AlertDict(TypedDict, total=False):
    """An existing alert as a dict: ``{"text": ..., "open": ...}``."""

    text: str
    open: bool


#: An existing alert: an :class:`Alert`, a str (an open alert's text), a ``(text, open)``
#: tuple or a dict with ``text`` and ``open``.
AlertLike = Union[Alert, str, Tuple[str, bool], _AlertDict]
#: ``existing_alerts``: the ledger's alerts, or a callable ``(conn, ledger)`` returning them.
_ExistingAlerts = Union[
    Iterable[AlertLike], Callable[["Connection", Optional[str]], Iterable[AlertLike]], None
]


def _alert_pair(alert: Any) -> Tuple[str, bool]:
    if isinstance(alert, str):
        return (alert, True)
    if isinstance(alert, dict):
        return (str(alert["text"]), bool(alert.get("open", True)))
    if isinstance(alert, tuple) and len(alert) == 2:
        return (str(alert[0]), bool(alert[1]))
    if hasattr(alert, "text"):
        return (str(alert.text), bool(getattr(alert, "open", True)))
    raise TypeError(
        "an existing alert must be an Alert, a str (an open alert's text), a (text, open) "
        f"tuple or a dict with 'text' and 'open', not {type(alert).__name__}"
    )


def _refused_tuple(writer: Any) -> Tuple[str, int, int, int]:
    if isinstance(writer, tuple) and len(writer) == 4:
        return (str(writer[0]), int(writer[1]), int(writer[2]), int(writer[3]))
    try:
        return (str(writer.writer), int(writer.pid), int(writer.version), int(writer.floor))
    except AttributeError:
        raise TypeError(
            "a refused writer must be a RefusedWriter or a (writer, pid, version, floor) "
            f"tuple, not {type(writer).__name__}"
        ) from None


def new_alerts(
    refused: Iterable[Union[RefusedWriter, Tuple[str, int, int, int]]],
    existing: Iterable[AlertLike] = (),
) -> List[str]:
    """The alert texts to raise on a ledger: one per refused writer, none whose text is an
    open alert already, none whose text is a closed alert still in the list (the newest
    200 closed alerts count). ``existing`` lists the ledger's alerts oldest first, as
    :class:`Alert` objects, ``(text, open)`` tuples, dicts or plain strings (open)."""
    return _native.pg_new_alerts(
        [_refused_tuple(r) for r in refused], [_alert_pair(a) for a in existing]
    )


def alert_text(writer: str, version: int, floor: int) -> str:
    """The alert text for a refused writer at ``writer``."""
    return _native.pg_alert_text(writer, version, floor)


def refusal_message(version: int, floor: int) -> str:
    """The refusal text for a writer ``version`` below ``floor``."""
    return _native.pg_refusal_message(version, floor)


class Cursor:
    """The result of one statement, sqlite3-like: ``fetchone``, ``fetchmany``,
    ``fetchall``, iteration, ``rowcount``, ``description``. Rows are tuples (or what the
    connection's ``row_factory`` makes of them). ``description[i][1]`` is the column's
    Postgres type name, equal to one of the type objects :data:`STRING`, :data:`NUMBER`...
    ``lastrowid`` is the id an ``INSERT ... RETURNING id`` of one row returned (Postgres has
    no implicit row id), else ``None``."""

    arraysize: int = 1
    lastrowid: Optional[int] = None

    def __init__(self, connection: "Connection") -> None:
        self.connection = connection
        self.description: Optional[_Description] = None
        self.rowcount: int = -1
        self.row_factory: Optional[Callable[[Cursor, _Row], Any]] = connection.row_factory
        self._rows: Optional[List[Tuple[Any, ...]]] = None
        self._pos = 0
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ProgrammingError("the cursor is closed (cursor.close() was called); use a new one")

    def execute(self, sql: str, params: Params = (), *, _within: Optional[int] = None) -> "Cursor":
        """Runs one statement with ``?`` or ``$n`` placeholders. Unless the connection is in
        autocommit mode, a transaction is opened first when none is open."""
        if self._closed:
            self._check_open()
        return self._take(*self._run(sql, params, _within))

    def _take(
        self,
        description: Any,
        rows: List[Tuple[Any, ...]],
        rowcount: int,
        lastrowid: Optional[int],
    ) -> "Cursor":
        """Holds a statement's result (``PgSession.execute``'s, here or in a write)."""
        self._rows = None if description is None else self._localized(description, rows)
        self.description = description
        self.rowcount = rowcount
        self.lastrowid = lastrowid
        self._pos = 0
        return self

    def _run(
        self, sql: str, params: Params, within: Optional[int]
    ) -> Tuple[Any, List[Tuple[Any, ...]], int, Optional[int]]:
        """Runs one statement (opening the implicit transaction unless in autocommit mode or
        inside a write); returns ``(description, rows, rowcount, lastrowid)``."""
        if not isinstance(sql, str):
            raise TypeError(f"sql must be a str, not {type(sql).__name__}")
        conn = self.connection
        return conn._session.execute(sql, params, within, within is None and not conn._autocommit)

    def _localized(self, description: Any, rows: List[Tuple[Any, ...]]) -> List[Tuple[Any, ...]]:
        """``rows`` with their timestamptz values in the session's TimeZone."""
        if rows:
            zoned = [i for i, d in enumerate(description) if d[1] in _ZONED]
            if zoned:
                zone = self.connection._session_zone()
                rows = [
                    tuple(_localized(v, zone) if i in zoned else v for i, v in enumerate(row))
                    for row in rows
                ]
        return rows

    def executemany(
        self, sql: str, seq_of_params: Iterable[Params], *, _within: Optional[int] = None
    ) -> "Cursor":
        """Runs one statement once per parameter sequence; ``rowcount`` is the sum (-1 when
        the statement counts no rows). Inside a transaction (the default mode, or a write)
        the statements go many to a message, each with its parameters written as literals of
        the types they declare, one round trip per thousand rows; in autocommit mode each
        runs, and commits, on its own. Rows the statement returns are not kept."""
        self._check_open()
        conn = self.connection
        if _within is not None or not conn._autocommit:
            if not isinstance(sql, str):
                raise TypeError(f"sql must be a str, not {type(sql).__name__}")
            self.rowcount = conn._session.execute_many(
                sql, seq_of_params, _within, _within is None
            )
            self.description = None
            self._rows = None
            self._pos = 0
            self.lastrowid = None
            return self
        total = 0
        for params in seq_of_params:
            self.execute(sql, params, _within=_within)
            total = -1 if self.rowcount < 0 or total < 0 else total + self.rowcount
        self.rowcount = total
        return self

    def _make(self, row: Tuple[Any, ...]) -> Any:
        return row if self.row_factory is None else self.row_factory(self, row)

    def _result(self) -> List[Tuple[Any, ...]]:
        self._check_open()
        if self._rows is None:
            raise ProgrammingError(
                "there is no result to fetch: the last statement returned no rows (only a "
                "statement that returns rows, such as SELECT or ... RETURNING, has a result), "
                "or none ran on this cursor yet"
            )
        return self._rows

    def _need(self) -> List[Tuple[Any, ...]]:
        """The rows to read the next one from (a server-side cursor fetches more here)."""
        return self._result()

    def fetchone(self) -> Any:
        """The next row, or ``None`` when there are no more."""
        rows = self._need()
        if self._pos >= len(rows):
            return None
        row = rows[self._pos]
        self._pos += 1
        return self._make(row)

    def fetchmany(self, size: Optional[int] = None) -> List[Any]:
        """Up to ``size`` (default ``arraysize``) more rows; a negative ``size`` takes all
        the remaining rows."""
        rows = self._result()
        n = self.arraysize if size is None else size
        end = len(rows) if n < 0 else self._pos + n
        taken = rows[self._pos : end]
        self._pos += len(taken)
        return [self._make(r) for r in taken]

    def fetchall(self) -> List[Any]:
        """The remaining rows."""
        rows = self._result()
        taken = rows[self._pos :]
        self._pos = len(rows)
        return [self._make(r) for r in taken]

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        rows = self._need()  # a server-side cursor may fetch here, resetting the position
        if self._pos >= len(rows):
            raise StopIteration
        return self.fetchone()

    def close(self) -> None:
        """Drops the remaining rows; the cursor cannot be used afterwards."""
        self._rows = None
        self._pos = 0
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def setinputsizes(self, sizes: Any) -> None:  # DB-API; nothing to do
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:  # DB-API; nothing to do
        pass


class ServerCursor(Cursor):
    """A server-side cursor, psycopg 3's ``cursor(name=...)``: ``conn.cursor("big")`` declares
    the statement as a cursor on the server (``DECLARE big CURSOR FOR ...``) and fetches its
    rows ``itersize`` (2000) at a time as you read them, so a result of any size streams in
    bounded memory. It lives in the transaction that declared it (the implicit one unless in
    autocommit mode; ``withhold=True`` declares it ``WITH HOLD``, to outlive the commit);
    :meth:`close` closes it on the server. ``description`` is known once ``execute()``
    returns; ``rowcount`` counts the rows fetched so far."""

    itersize: int = 2000

    def __init__(
        self,
        connection: "Connection",
        name: str,
        *,
        scrollable: Optional[bool] = None,
        withhold: bool = False,
    ) -> None:
        super().__init__(connection)
        if not isinstance(name, str) or not name:
            raise TypeError("a server-side cursor's name must be a non-empty str")
        self.name = name
        self.scrollable = scrollable
        self.withhold = withhold
        self._ident = '"' + name.replace('"', '""') + '"'
        self._serial: Optional[int] = None
        self._within: Optional[int] = None
        self._done = True

    def execute(self, sql: str, params: Params = (), *, _within: Optional[int] = None) -> "Cursor":
        """Declares ``sql`` as the cursor (closing the one this object declared before) and
        fetches its first rows."""
        self._check_open()
        self._close_on_server()
        scroll = {None: "", True: "SCROLL ", False: "NO SCROLL "}[self.scrollable]
        hold = "WITH HOLD" if self.withhold else "WITHOUT HOLD"
        self._run(f"DECLARE {self._ident} {scroll}CURSOR {hold} FOR {sql}", params, _within)
        self._serial = self.connection._session.transaction_serial
        self._within = _within
        self._done = False
        self._rows = []
        self._pos = 0
        self.rowcount = 0
        self.lastrowid = None
        self._fetch(self.itersize)
        return self

    def executemany(self, sql: str, seq_of_params: Iterable[Params], **_: Any) -> "Cursor":
        raise NotSupportedError("executemany() is not available on a server-side cursor")

    def _fetch(self, count: Optional[int]) -> None:
        """Replaces the buffer with the next ``count`` rows (all the rest for ``None``)."""
        how = "ALL" if count is None else str(max(count, 1))
        description, rows, _, _ = self._run(
            f"FETCH FORWARD {how} FROM {self._ident}", None, self._within
        )
        self.description = description
        self._rows = self._localized(description, rows)
        self._pos = 0
        self.rowcount += len(rows)
        if count is None or len(rows) < count:
            self._done = True

    def _need(self) -> List[Tuple[Any, ...]]:
        rows = self._result()
        if self._pos >= len(rows) and not self._done:
            self._fetch(self.itersize)
            rows = self._result()
        return rows

    def fetchmany(self, size: Optional[int] = None) -> List[Any]:
        """Up to ``size`` (default ``arraysize``) more rows; a negative ``size`` takes all
        the remaining rows."""
        n = self.arraysize if size is None else size
        if n < 0:
            return self.fetchall()
        out: List[Any] = []
        while len(out) < n:
            rows = self._need()
            if self._pos >= len(rows):
                break
            taken = rows[self._pos : self._pos + n - len(out)]
            self._pos += len(taken)
            out.extend(self._make(r) for r in taken)
        return out

    def fetchall(self) -> List[Any]:
        """The remaining rows."""
        rows = self._result()
        out = [self._make(r) for r in rows[self._pos :]]
        self._pos = len(rows)
        if not self._done:
            self._fetch(None)
            out.extend(self._make(r) for r in self._rows or [])
            self._pos = len(self._rows or [])
        return out

    def _close_on_server(self) -> None:
        serial, self._serial = self._serial, None
        if serial is None:
            return
        session = self.connection._session
        if session.closed:
            return
        alive = self.withhold or (session.in_transaction and session.transaction_serial == serial)
        if alive:
            session.execute(f"CLOSE {self._ident}", None, None, False)

    def close(self) -> None:
        """Closes the cursor on the server (if its transaction is still open, or it was
        declared ``WITH HOLD``) and here."""
        if not self._closed:
            try:
                self._close_on_server()
            finally:
                super().close()


class Write(_native.PgWrite):
    """A write transaction: ``with conn.write(ledger) as w:``.

    On entry it sets up the schema once per address per process, takes the writer lock as
    the transaction's first statement (up to ``LOCK_TRIES`` waits of ``LOCK_WAIT`` seconds,
    else :class:`WriterLockNotGranted`), reads the stored floor under the lock (below it:
    :class:`Refused`, nothing written) and lists the refused writers still connected. Then the
    block runs its statements (``w.execute`` or ``conn.execute``); the write commits when
    the block ends and rolls back when it raises.

    ``w.alerts`` holds the writer alert texts to raise on ``ledger``: one per refused writer,
    minus those ``existing_alerts`` already has (see :func:`new_alerts`). ``existing_alerts``
    is the ledger's current alert list (oldest first) or a callable
    ``existing_alerts(conn, ledger)`` returning it, called under the writer lock so it reads
    the list the write will change, and only when a refused writer is connected (otherwise
    there is nothing to raise and ``w.alerts`` is empty).
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the native base class runs these

        @property
        def connection(self) -> "Connection": ...
        @property
        def refused(self) -> List[RefusedWriter]: ...
        def __enter__(self) -> "Write": ...
        def execute(self, sql: str, params: Params = None) -> Cursor:
            """Runs one statement inside the write. Once the write's transaction ended (its
            block is over, or ``conn.commit()`` ran inside it) this raises
            :class:`ProgrammingError` and runs nothing: a write never runs outside its
            lock."""
            ...

    def _report(
        self, refused: List[Tuple[str, int, int, int]], existing: _ExistingAlerts
    ) -> Tuple[List[RefusedWriter], List[str]]:
        """The refused writers and the alerts to raise for them (called on entry, under the
        writer lock, only when a refused writer is connected)."""
        writers = [RefusedWriter(*r) for r in refused]
        if callable(existing):
            existing = existing(self.connection, self.ledger)
        return writers, new_alerts(writers, existing or ())

    def executemany(self, sql: str, seq_of_params: Iterable[Params]) -> Cursor:
        """Runs one statement per parameter sequence inside the write."""
        return Cursor(self.connection).executemany(sql, seq_of_params, _within=self._within())


class Connection:
    """A session with the ledger database that carries the writer-session settings.

    ``Connection(dsn, *, version=VERSION, required=REQUIRED, **options)`` (or
    :func:`connect`) opens it and checks that every startup setting took effect. ``options``
    (seconds for durations): ``lock_wait``, ``lock_tries``, ``idle_in_transaction``,
    ``statement_timeout``, ``connect_timeout``, ``keepalives``, ``keepalives_idle``,
    ``keepalives_interval``, ``keepalives_count``, ``tcp_user_timeout``.

    The first statement opens a transaction that lasts until :meth:`commit` or
    :meth:`rollback`; :meth:`close` rolls it back (PEP 249). With ``autocommit=True`` each
    statement commits on its own. :meth:`write` opens a write transaction: plain reads before
    it are no obstacle (their transaction, which wrote nothing, is rolled back first), while
    uncommitted changes make it raise :class:`ProgrammingError`. As a context manager it
    behaves like ``sqlite3``: the block is one transaction (opened on entry unless one is
    open), committed when the block ends and rolled back when it raises; the connection stays
    open. A ``conn.write()`` inside it must come first, since the writer lock is a
    transaction's first statement.

    A connection belongs to the process that opened it: in a child after ``fork()`` its
    first use raises :class:`ProgrammingError`, and the parent's session is left alone.
    """

    row_factory: Optional[Callable[[Cursor, _Row], Any]] = None

    # PEP 249's optional extension: the exception classes on the connection.
    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(
        self,
        dsn: str,
        *,
        version: int = VERSION,
        required: int = REQUIRED,
        autocommit: bool = False,
        **options: Unpack[_Options],
    ) -> None:
        settings = _settings(version, required, options)
        self._autocommit = bool(autocommit)
        self._zone: Optional[datetime.tzinfo] = None
        self._zone_epoch = -1
        self._session = _native.PgSession.connect(_check_dsn(dsn), settings)

    @classmethod
    def _from_session(cls, session: Any, autocommit: bool = False) -> "Connection":
        conn = cls.__new__(cls)
        conn._session = session
        conn._autocommit = bool(autocommit)
        conn._zone = None
        conn._zone_epoch = -1
        return conn

    @property
    def autocommit(self) -> bool:
        """Whether each statement commits on its own (``False`` by default, as PEP 249,
        psycopg 3 and sqlite3 have it: the first statement opens a transaction that lasts
        until :meth:`commit` or :meth:`rollback`, and :meth:`close` rolls it back). Changing
        it inside a transaction raises :class:`ProgrammingError`."""
        return self._autocommit

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        if bool(value) != self._autocommit and self._session.in_transaction:
            raise ProgrammingError(
                "autocommit cannot change while a transaction is open: call commit() or "
                "rollback() first"
            )
        self._autocommit = bool(value)

    def _make_way_for_write(self) -> None:
        """Rolls back the implicit transaction if it wrote nothing (plain reads), so a write
        can take the writer lock as its first statement; raises when it has uncommitted
        changes."""
        if not self._session.release_for_write():
            raise ProgrammingError(_native.PG_UNCOMMITTED_BEFORE_WRITE, "25001")

    def _session_zone(self) -> datetime.tzinfo:
        """The session's ``TimeZone``, read once, and again after a statement that may have
        changed it or after the transaction such a statement ran in ended; UTC when Python
        does not know its name."""
        epoch = self._session.zone_epoch
        zone = self._zone
        if zone is None or epoch != self._zone_epoch:
            name = self._session.show("TimeZone") or "UTC"
            try:
                zone = zoneinfo.ZoneInfo(name)
            except Exception:
                zone = datetime.timezone.utc
            self._zone = zone
            self._zone_epoch = epoch
        return zone

    # statements

    def cursor(
        self,
        name: Optional[str] = None,
        *,
        scrollable: Optional[bool] = None,
        withhold: bool = False,
    ) -> Cursor:
        """A cursor to run statements on; with ``name``, a :class:`ServerCursor` that streams
        its rows from a cursor declared on the server."""
        if name is None:
            return Cursor(self)
        return ServerCursor(self, name, scrollable=scrollable, withhold=withhold)

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        """Runs one statement with ``?`` or ``$n`` placeholders; returns its cursor."""
        return Cursor(self).execute(sql, params)

    def executemany(self, sql: str, seq_of_params: Iterable[Params]) -> Cursor:
        """Runs one statement once per parameter sequence."""
        return Cursor(self).executemany(sql, seq_of_params)

    def executescript(self, sql: str) -> Cursor:
        """Runs a script of statements without parameters (DDL, for example)."""
        if not isinstance(sql, str):
            raise TypeError(f"sql must be a str, not {type(sql).__name__}")
        self._session.execute_batch(sql, None, not self._autocommit)
        return Cursor(self)

    # transactions

    def begin(self) -> None:
        """Opens a transaction (``cannot start a transaction within a transaction`` inside
        one). The implicit transaction the connection's statements opened counts as this
        one: ``begin()`` then leaves it open and returns."""
        if self._session.in_implicit_transaction:
            return
        self._session.begin()

    def commit(self) -> None:
        """Commits the open transaction; nothing when none is open. If a statement in it
        failed, the transaction rolls back and this raises :class:`OperationalError`."""
        self._session.commit()

    def rollback(self) -> None:
        """Rolls back the open transaction; nothing when none is open."""
        self._session.rollback()

    def write(
        self,
        ledger: Optional[str] = None,
        *,
        existing_alerts: _ExistingAlerts = None,
    ) -> Write:
        """A write transaction for ``ledger``; see :class:`Write`."""
        return Write(self, ledger, existing_alerts)

    def lock_writer(self) -> int:
        """Takes the writer lock as the first statement of a transaction (opening one if
        needed; plain reads before it are rolled back first, as for :meth:`write`); returns
        the waits it took."""
        self._make_way_for_write()
        return self._session.lock_writer()

    # session

    def show(self, name: str) -> Optional[str]:
        """What ``SHOW name`` prints on this session."""
        return self._session.show(name)

    def check_settings(self) -> List[Tuple[str, str, Optional[str], str]]:
        """Each startup setting as ``(name, sent, shown, status)``."""
        return self._session.check_settings()

    def close(self) -> None:
        """Closes the session; an open transaction rolls back on the server. Closing twice,
        or closing a connection the server or the network already ended, does nothing."""
        self._session.close()

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open."""
        return self._session.in_transaction

    @property
    def closed(self) -> bool:
        """Whether the session is closed, given back to its pool, or was lost."""
        return self._session.closed

    @property
    def pid(self) -> int:
        """The server process id of the session."""
        return self._session.pid

    @property
    def address(self) -> str:
        """The address, without its password."""
        return self._session.address

    def __enter__(self) -> "Connection":
        if not self._session.in_transaction:
            self._session.begin()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc_type is None:
            self.commit()
        elif not self.closed:
            try:
                self.rollback()
            except Exception as rollback_error:
                add_note = getattr(exc, "add_note", None)
                if add_note is not None:
                    add_note(f"writerlock: the rollback failed too: {rollback_error}")
        return False

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"pid {self.pid}"
        return f"<writerlock.postgres.Connection {self.address} {state}>"


def connect(
    dsn: str,
    *,
    version: int = VERSION,
    required: int = REQUIRED,
    autocommit: bool = False,
    **options: Unpack[_Options],
) -> Connection:
    """Opens a :class:`Connection` at ``dsn`` with the writer-session settings; with
    ``autocommit=True`` each statement commits on its own."""
    return Connection(dsn, version=version, required=required, autocommit=autocommit, **options)


class Pool:
    """A bounded pool of connections to one address: ``take()`` reuses an idle connection
    or opens one, ``give(conn)`` rolls back its transaction and keeps it (a connection the
    server ended, or whose rollback fails, is closed instead). After ``give`` the
    ``Connection`` object is closed; take another."""

    def __init__(
        self,
        dsn: str,
        size: int = DEFAULT_POOL_SIZE,
        *,
        version: int = VERSION,
        required: int = REQUIRED,
        autocommit: bool = False,
        **options: Unpack[_Options],
    ) -> None:
        settings = _settings(version, required, options)
        self._autocommit = bool(autocommit)
        self._pool = _native.PgPool(_check_dsn(dsn), settings, size)

    def take(self) -> Connection:
        """An idle connection that is still open, or a new one (in autocommit mode when the
        pool was made with ``autocommit=True``)."""
        return Connection._from_session(self._pool.take(), self._autocommit)

    def give(self, conn: Connection) -> None:
        """Takes ``conn`` back. A connection to another address or with other settings (such
        as another writer version) raises :class:`ProgrammingError` and is closed: the pool
        hands out only its own."""
        if not isinstance(conn, Connection):
            raise TypeError(f"give() takes a writerlock.postgres.Connection, not {type(conn).__name__}")
        self._pool.give(conn._session)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        """``with pool.connection() as conn:`` takes a connection and gives it back."""
        conn = self.take()
        try:
            yield conn
        finally:
            self.give(conn)

    @property
    def idle_count(self) -> int:
        """How many idle connections the pool keeps now."""
        return self._pool.idle_count

    @property
    def size(self) -> int:
        """The most idle connections it keeps."""
        return self._pool.size


def setup_schema(
    conn: Any, extra_sql: Optional[str] = None, **options: Unpack[_SchemaOptions]
) -> None:
    """Sets up the writer floor (table, trigger, stored floor) under the writer lock, running
    the host's ``extra_sql`` script first; raises the stored floor to the connection's
    ``required``, never lowers it. ``conn`` is a :class:`Connection` or a psycopg 3 /
    psycopg2 connection (then ``version``, ``required`` and the lock settings come from
    ``options``, as for :func:`session_options`)."""
    if isinstance(conn, Connection):
        if options:
            raise TypeError(
                "setup_schema() takes settings only with a psycopg connection; a "
                "writerlock.postgres.Connection carries its own"
            )
        conn._make_way_for_write()
        conn._session.setup_schema(extra_sql)
        return
    driver = _drivers.driver_for(conn)
    _drivers.setup_schema(driver, _byo_settings(dict(options)), extra_sql)


def refused_writers(conn: Any) -> List[RefusedWriter]:
    """The refused writers still connected to the connection's database. ``conn`` is a
    :class:`Connection` or a psycopg 3 / psycopg2 connection (its transaction is left as it
    was)."""
    if isinstance(conn, Connection):
        return [RefusedWriter(*r) for r in conn._session.refused_writers()]
    return [RefusedWriter(*r) for r in _drivers.refused_writers(_drivers.driver_for(conn))]


def stored_floor(conn: Any) -> Optional[int]:
    """The stored writer floor, or ``None`` when the database stores none. ``conn`` is a
    :class:`Connection` or a psycopg 3 / psycopg2 connection."""
    if isinstance(conn, Connection):
        return conn._session.stored_floor()
    return _drivers.stored_floor(_drivers.driver_for(conn))


# --------------------------------------------------------------------------------------------
# Bring your own connection: psycopg 3 or psycopg2


def _byo_settings(options: Dict[str, Any]) -> _native.PgSettings:
    version = options.pop("version", VERSION)
    required = options.pop("required", REQUIRED)
    return _settings(version, required, options)


def session_options(
    *, version: int = VERSION, required: int = REQUIRED, **options: Unpack[_Options]
) -> Dict[str, str]:
    """The libpq connection keywords that give a connection of your own driver the
    writer-session settings: ``options`` (the startup settings ``-c lock_timeout=10s -c
    idle_in_transaction_session_timeout=15s -c statement_timeout=60s -c
    agentihooks.ledger_writer_version=1`` and the server's TCP keepalives), ``keepalives``,
    ``keepalives_idle``, ``keepalives_interval``, ``keepalives_count``,
    ``tcp_user_timeout`` (milliseconds), ``connect_timeout`` and ``application_name`` (the
    program, or the interpreter and its script, as the native connections carry)::

        conn = psycopg.connect(url, **postgres.session_options())
        pool = psycopg_pool.ConnectionPool(url, kwargs=postgres.session_options(),
                                           configure=postgres.check_session)

    ``options`` takes the same settings as :func:`connect` (``lock_wait``, ``lock_tries``,
    ``idle_in_transaction``, ``statement_timeout``, ``connect_timeout``, ``keepalives``,
    ``keepalives_idle``, ``keepalives_interval``, ``keepalives_count``,
    ``tcp_user_timeout``); pass the same ones to :func:`write` and :func:`check_session`.
    An ``options`` keyword in your own address is replaced by this one.
    """
    settings = _settings(version, required, options)
    return dict(_native.pg_libpq_keywords(settings))


def check_session(
    conn: Any, *, version: int = VERSION, required: int = REQUIRED, **options: Unpack[_Options]
) -> List[Tuple[str, str, Optional[str], str]]:
    """Checks that the writer-session settings took effect on ``conn`` (the check
    :func:`connect` makes): raises :class:`SettingNotInEffect` naming the first one the server
    does not report, for example when a pooler dropped the startup options or the connection
    was opened without :func:`session_options`. Returns every setting as ``(name, sent,
    shown, status)``. Leaves the connection's transaction as it found it, so it fits
    ``psycopg_pool.ConnectionPool(configure=check_session)``."""
    if isinstance(conn, Connection):
        conn._session.verify_settings()
        return conn.check_settings()
    settings = _settings(version, required, options)
    driver = _drivers.driver_for(conn)
    try:
        return _drivers.check_session(driver, settings)
    except SettingNotInEffect as err:
        _drivers.add_session_note(err)
        raise


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
        Iterable[AlertLike], Callable[[Any, Optional[str]], Iterable[AlertLike]], None
    ] = None,
    version: int = VERSION,
    required: int = REQUIRED,
    **options: Unpack[_Options],
) -> DriverWrite: ...
def write(
    conn: Any,
    ledger: Optional[str] = None,
    *,
    existing_alerts: Union[
        Iterable[AlertLike], Callable[[Any, Optional[str]], Iterable[AlertLike]], None
    ] = None,
    version: int = VERSION,
    required: int = REQUIRED,
    **options: Any,
) -> Union[Write, DriverWrite]:
    """A write transaction on ``conn``: ``with postgres.write(conn, "main") as w:``.

    ``conn`` is a :class:`Connection` (the same as ``conn.write(ledger)``) or a psycopg 3 or
    psycopg2 connection opened with ``**session_options()``. On a driver's connection the
    core's writer protocol runs its statements there: the schema setup once per address per
    process, the writer lock as the transaction's first statement with its waits
    (:class:`WriterLockNotGranted`: ``the ledger writer lock was not granted in 3 waits of 10
    seconds``), the floor check (:class:`Refused`, SQLSTATE ``LW001``, nothing written, the
    refusal lock kept until the connection closes), and the refused writers still connected,
    whose alert texts land in ``w.alerts``. The block's statements run on the same
    connection (``w.execute(sql, params)`` uses the driver's own placeholders, ``%s`` for
    psycopg); the write commits when the block ends and rolls back when it raises. A
    statement that failed inside the block makes the commit roll back and raise
    :class:`OperationalError` (nothing was committed).

    The settings (``version``, ``required``, ``lock_wait``, ``lock_tries``...) are the ones
    passed to :func:`session_options`; a session that does not carry this writer's version
    is not written to (:class:`SettingNotInEffect`). In autocommit mode the write sends
    ``BEGIN``, ``COMMIT`` and ``ROLLBACK`` itself; otherwise it uses the driver's
    ``commit()`` and ``rollback()``. The connection must not be inside a transaction that
    already ran a statement (``cannot start a transaction within a transaction``).
    """
    if isinstance(conn, Connection):
        if options or version != VERSION or required != REQUIRED:
            raise TypeError(
                "write() takes settings only with a psycopg connection; a "
                "writerlock.postgres.Connection carries its own (connect(url, ...))"
            )
        return conn.write(ledger, existing_alerts=existing_alerts)
    driver = _drivers.driver_for(conn)
    settings = _settings(version, required, options)
    return DriverWrite(
        conn, driver, settings, ledger, existing_alerts, new_alerts, RefusedWriter
    )
