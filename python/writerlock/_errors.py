"""The exception classes of writerlock, defined in Python so that they subclass the
``sqlite3`` exceptions the ledger scripts already catch. The native module raises them.

SQLite queue (exported from ``writerlock``):

* :class:`Busy` (``sqlite3.OperationalError``): a wait for the writer turn ran out;
* :class:`NotStarted` (``sqlite3.OperationalError``): ``BEGIN IMMEDIATE`` failed for another
  reason;
* :class:`NotAutocommit` (``sqlite3.ProgrammingError`` and ``ValueError``): the connection is
  not in autocommit mode;
* :class:`WrongDatabase` (``sqlite3.ProgrammingError`` and ``ValueError``): the connection
  writes another database than the queue's.

Postgres writer session (exported from ``writerlock.postgres``): every error is a
:class:`DatabaseError` (``sqlite3.DatabaseError``) that carries the server's SQLSTATE in
``sqlstate`` (also ``code``), picked by SQLSTATE class into the matching ``sqlite3`` subclass.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Dict, Optional, Tuple, Type

SQLITE_BUSY = 5
SQLITE_MISUSE = 21


def _rebuild(cls: type, args: Tuple[Any, ...], state: Dict[str, Any]) -> BaseException:
    err: BaseException = cls.__new__(cls, *args)
    BaseException.__init__(err, *args)
    err.__dict__.update(state)
    return err


class _Picklable:
    """Keeps the attributes across pickling (multiprocessing sends exceptions back)."""

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# SQLite queue


class Busy(_Picklable, sqlite3.OperationalError):
    """A wait for the writer turn ran out; nothing was written.

    ``str(err)`` is one of the two fixed messages, for example ``database is busy: the
    transaction could not start within 25 s (waited 25.0 s, [DatabaseSettings]
    SQLiteTransactionWait), another write held the lock all that time; nothing was
    written``.
    """

    waited: float
    limit: float
    setting: str
    holder_pid: Optional[int]

    def __init__(
        self,
        message: str,
        waited: float = 0.0,
        limit: float = 0.0,
        setting: str = "",
        holder_pid: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.waited = waited
        self.limit = limit
        self.setting = setting
        self.holder_pid = holder_pid
        self.sqlite_errorcode = SQLITE_BUSY
        self.sqlite_errorname = "SQLITE_BUSY"


class NotStarted(_Picklable, sqlite3.OperationalError):
    """``BEGIN IMMEDIATE`` failed for a reason other than a busy database; the turn was given
    back and nothing was written: ``the transaction could not start: <SQLite's message>;
    nothing was written``. ``__cause__`` is the ``sqlite3`` error Python raised."""

    def __init__(self, message: str, sqlite_errorcode: int = 1, sqlite_errorname: str = "") -> None:
        super().__init__(message)
        self.sqlite_errorcode = sqlite_errorcode
        self.sqlite_errorname = sqlite_errorname or "SQLITE_ERROR"


class NotAutocommit(_Picklable, sqlite3.ProgrammingError, ValueError):
    """The ``sqlite3.Connection`` is not in autocommit mode, so Python would open deferred
    transactions of its own. Open it with ``sqlite3.connect(path, isolation_level=None)``."""


class WrongDatabase(_Picklable, sqlite3.ProgrammingError, ValueError):
    """The connection's main database is not the file the :class:`WriterQueue` serves, so its
    writers would not exclude the writers of that database; nothing was run.
    ``queue_database`` and ``connection_database`` are the two paths (the connection's is
    ``""`` for an in-memory or temporary database). Make the queue with
    ``WriterQueue.for_connection(conn)``."""

    queue_database: str
    connection_database: str

    def __init__(self, message: str, queue_database: str = "", connection_database: str = "") -> None:
        super().__init__(message)
        self.queue_database = queue_database
        self.connection_database = connection_database


# --------------------------------------------------------------------------------------------
# Postgres writer session


class Warning(_Picklable, sqlite3.Warning):  # noqa: A001 - PEP 249's name
    """PEP 249's ``Warning`` for the Postgres writer session (a ``sqlite3.Warning``). The
    session raises none today; it is here so that DB-API code that names it works."""


class Error(_Picklable, sqlite3.Error):
    """PEP 249's ``Error``: the base of every error of the Postgres writer session (a
    ``sqlite3.Error``, so handlers written for the SQLite ledger catch it too)."""


class DatabaseError(Error, sqlite3.DatabaseError):
    """An error of the Postgres writer session.

    ``sqlstate`` (also ``code``) is the five-character SQLSTATE where there is one (the
    server's for server errors, ``LW001`` for a floor refusal, ``55P03`` when the writer
    lock was not granted); ``detail`` and ``hint`` are the server's, if any.
    """

    sqlstate: Optional[str]
    detail: Optional[str]
    hint: Optional[str]

    def __init__(
        self,
        message: str,
        sqlstate: Optional[str] = None,
        detail: Optional[str] = None,
        hint: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.detail = detail
        self.hint = hint

    @property
    def code(self) -> Optional[str]:
        """The SQLSTATE (the same as ``sqlstate``)."""
        return self.sqlstate

    @property
    def pgcode(self) -> Optional[str]:
        """The SQLSTATE under psycopg2's name."""
        return self.sqlstate


class OperationalError(DatabaseError, sqlite3.OperationalError):
    """A server or connection failure: lock waits, timeouts, ended sessions, lost
    connections (SQLSTATE classes 08, 25, 40, 53, 54, 55, 57, 58, F0, HV)."""


class IntegrityError(DatabaseError, sqlite3.IntegrityError):
    """A constraint was violated (SQLSTATE class 23)."""


class DataError(DatabaseError, sqlite3.DataError):
    """A value was out of range or malformed (SQLSTATE class 22)."""


class ProgrammingError(DatabaseError, sqlite3.ProgrammingError):
    """The statement is wrong: syntax, unknown names, wrong parameter count (SQLSTATE class
    42 and the like)."""


class NotSupportedError(DatabaseError, sqlite3.NotSupportedError):
    """A feature or column type that is not supported (SQLSTATE class 0A)."""


class InternalError(DatabaseError, sqlite3.InternalError):
    """An internal error of the server or the driver (SQLSTATE classes XX, P0)."""


class WriterLockNotGranted(OperationalError):
    """Every wait for the writer lock was cancelled by ``lock_timeout``: ``the ledger writer
    lock was not granted in 3 waits of 10 seconds``. SQLSTATE ``55P03``; ``tries`` and
    ``wait`` (seconds) say what was waited."""

    tries: int
    wait: float


class Refused(DatabaseError):
    """This writer's version is below the floor the database stores (SQLSTATE ``LW001``):
    ``ledger writer version 0 is below version 1, the oldest the shared database allows;
    update its code and restart it``. The transaction rolled back; nothing was written."""

    version: int
    floor: int


class SessionEnded(OperationalError):
    """The server ended this session (``pg_terminate_backend``, the idle limit, a restart);
    its transaction rolled back and the connection cannot be used again."""


class ConnectionClosed(OperationalError):
    """The connection is closed or was lost (SQLSTATE ``08003``)."""


class CommitOutcomeUnknown(ConnectionClosed):
    """The connection was lost while ``COMMIT`` was in flight (SQLSTATE ``08007``): the
    transaction may or may not have been committed. Check whether the write is in the
    database before retrying it; a retry of a write that did commit makes it twice. A
    :class:`ConnectionClosed`, so handlers of lost connections catch it too: catch this one
    first."""


class ConnectError(OperationalError):
    """No connection could be opened (the server's SQLSTATE, or ``08001`` when it could not
    be reached)."""

    address: str


class SettingNotInEffect(OperationalError):
    """A writer-session setting sent at startup did not take effect (a pooler in between
    dropped the startup options). ``setting``, ``expected`` and ``actual`` name it."""

    setting: str
    expected: str
    actual: str


class InterfaceError(Error, sqlite3.InterfaceError):
    """A database address that cannot be read, or a failure of the driver itself."""


_BY_CLASS: Dict[str, Type[DatabaseError]] = {
    "08": OperationalError,
    "25": OperationalError,
    "40": OperationalError,
    "53": OperationalError,
    "54": OperationalError,
    "55": OperationalError,
    "57": OperationalError,
    "58": OperationalError,
    "F0": OperationalError,
    "HV": OperationalError,
    "23": IntegrityError,
    "22": DataError,
    "42": ProgrammingError,
    "26": ProgrammingError,
    "2F": ProgrammingError,
    "34": ProgrammingError,
    "3D": ProgrammingError,
    "3F": ProgrammingError,
    "44": ProgrammingError,
    "0A": NotSupportedError,
    "XX": InternalError,
    "P0": InternalError,
}

# The one table of the Postgres errors' classes, by the core's kind name (every name in
# ``_native.PG_ERROR_KINDS``, no other: the tests check it). ``None``: a server error, whose
# class follows its SQLSTATE.
_BY_KIND: Dict[str, Optional[Type[BaseException]]] = {
    "invalid_url": InterfaceError,
    "connect": ConnectError,
    "connect_timed_out": ConnectError,
    "startup_options_rejected": ConnectError,
    "setting": SettingNotInEffect,
    "lock_not_granted": WriterLockNotGranted,
    "refused": Refused,
    "already_in_transaction": OperationalError,
    "database": None,
    "session_ended": SessionEnded,
    "closed": ConnectionClosed,
    "outcome_unknown": CommitOutcomeUnknown,
    "rolled_back": OperationalError,
    "unsendable": ProgrammingError,
    "forked": ProgrammingError,
    "write_ended": ProgrammingError,
    "foreign": ProgrammingError,
    "parameter_count": ProgrammingError,
    "parameter": ProgrammingError,
    "unsupported_type": NotSupportedError,
    "required_above_version": ValueError,
    "version_out_of_range": ValueError,
    "limit_out_of_range": ValueError,
    "driver": InterfaceError,
}


def class_for_sqlstate(sqlstate: Optional[str]) -> Type[DatabaseError]:
    """The ``DatabaseError`` subclass for a server error with this SQLSTATE."""
    if not sqlstate:
        return DatabaseError
    return _BY_CLASS.get(sqlstate[:2], DatabaseError)


def pg_error(kind: str, message: str, sqlstate: Optional[str], attrs: Dict[str, Any]) -> BaseException:
    """Builds the exception for a Postgres error of ``kind``, the core's name of its kind
    (called by the native module). A kind missing from ``_BY_KIND`` raises ``KeyError``
    rather than becoming a generic error."""
    cls = _BY_KIND[kind] or class_for_sqlstate(sqlstate)
    if not issubclass(cls, DatabaseError):
        err = cls(message)
    else:
        err = cls(message, sqlstate, attrs.pop("detail", None), attrs.pop("hint", None))
    for name, value in attrs.items():
        setattr(err, name, value)
    return err


for _sqlite_cls in (Busy, NotStarted, NotAutocommit, WrongDatabase):
    _sqlite_cls.__module__ = "writerlock"
del _sqlite_cls
for _cls in (
    Warning,
    Error,
    DatabaseError,
    OperationalError,
    IntegrityError,
    DataError,
    ProgrammingError,
    NotSupportedError,
    InternalError,
    WriterLockNotGranted,
    Refused,
    SessionEnded,
    ConnectionClosed,
    CommitOutcomeUnknown,
    ConnectError,
    SettingNotInEffect,
    InterfaceError,
):
    _cls.__module__ = "writerlock.postgres"
del _cls
