"""The writer session on a connection of your own: psycopg 3 or psycopg2.

The core's writer protocol (``_native.PgProtocol``) says which statement to run next and
what each result means; this module only runs the statements on the driver's connection and
feeds back the rows, the server's error (SQLSTATE, message, severity) or a lost connection.
Transaction control goes through the driver's own calls where it manages transactions
itself (outside autocommit): its next statement opens the transaction, and ``rollback()``
and ``commit()`` end it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Type

from . import _native
from ._errors import InterfaceError, ProgrammingError, SettingNotInEffect

if TYPE_CHECKING:
    from .postgres import RefusedWriter


class Driver:
    """One driver connection, seen through what the protocol needs."""

    name = "a driver"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    # Driver specifics -------------------------------------------------------------------

    def status(self) -> str:
        """``idle``, ``intrans``, ``inerror``, ``active`` or ``unknown``."""
        raise NotImplementedError

    def autocommit(self) -> bool:
        raise NotImplementedError

    def closed(self) -> bool:
        raise NotImplementedError

    def errors(self) -> Tuple[Type[BaseException], ...]:
        """The driver's exception classes."""
        raise NotImplementedError

    def sqlstate(self, err: BaseException) -> Optional[str]:
        raise NotImplementedError

    def address(self) -> str:
        raise NotImplementedError

    def dialled(self) -> Dict[str, Any]:
        """How the connection dialled the server, from libpq's connection info (no round
        trip): ``{"port": 5432}`` over TCP, ``{"unix": True}`` over a Unix socket, ``{}``
        when it cannot tell. A refused writer takes its session lock only where the server
        sees it come in that way, never through a pooler."""
        try:
            info = self.conn.info
            host = str(info.host or "")
            if host.startswith("/"):
                return {"unix": True}
            port = int(info.port)
        except Exception:  # an old driver without .info: take the lock as before
            return {}
        return {"port": port} if 0 < port < 65536 else {}

    # Shared -----------------------------------------------------------------------------

    def tx_state(self) -> Literal["idle", "open_unused", "open_used"]:
        """The connection's transaction state as the protocol names it."""
        status = self.status()
        if status == "idle":
            return "idle"
        if status in ("intrans", "inerror"):
            # A driver opens its transaction together with the first statement, so an open
            # one has run a statement: the writer lock can no longer be its first.
            return "open_used"
        if status == "active":
            raise ProgrammingError(
                f"the {self.name} connection is running another statement (another thread or "
                "an unfinished result); a write needs the connection to itself"
            )
        raise InterfaceError(
            f"the {self.name} connection is closed or broken; open a new one with "
            "writerlock.postgres.session_options()"
        )

    def in_error(self) -> bool:
        """Whether a statement of the open transaction failed."""
        return self.status() == "inerror"

    def run(self, kind: str, sql: str) -> List[Sequence[Any]]:
        """Runs one protocol statement; returns its rows."""
        if not self.autocommit():
            if kind == "begin":
                return []  # the driver opens the transaction with the next statement
            if kind == "rollback":
                self.conn.rollback()
                return []
            if kind == "commit":
                self.conn.commit()
                return []
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
            return self.last_rows(cur)
        finally:
            cur.close()

    def last_rows(self, cur: Any) -> List[Sequence[Any]]:
        """The rows of the last statement a cursor ran (several in one message)."""
        return list(cur.fetchall()) if cur.description is not None else []

    def feed_error(self, protocol: _native.PgProtocol, err: BaseException) -> Optional[Tuple[Any, ...]]:
        """Feeds a driver exception to ``protocol``; ``None`` when it is not a database
        error (then it is raised as it is)."""
        sqlstate = self.sqlstate(err)
        diag = getattr(err, "diag", None)
        primary = getattr(diag, "message_primary", None) if diag is not None else None
        severity = getattr(diag, "severity_nonlocalized", None) if diag is not None else None
        message = primary or str(err).strip() or type(err).__name__
        if sqlstate:
            fatal = severity in ("FATAL", "PANIC") or self.closed()
            return protocol.feed_error(
                sqlstate,
                message,
                getattr(diag, "message_detail", None) if diag is not None else None,
                getattr(diag, "message_hint", None) if diag is not None else None,
                fatal,
            )
        if self.closed():
            return protocol.feed_lost(message)
        return None


class Psycopg3(Driver):
    name = "psycopg"

    def status(self) -> str:
        from psycopg import pq

        s = self.conn.info.transaction_status
        return {
            pq.TransactionStatus.IDLE: "idle",
            pq.TransactionStatus.INTRANS: "intrans",
            pq.TransactionStatus.INERROR: "inerror",
            pq.TransactionStatus.ACTIVE: "active",
        }.get(s, "unknown")

    def autocommit(self) -> bool:
        return bool(self.conn.autocommit)

    def closed(self) -> bool:
        return bool(self.conn.closed or getattr(self.conn, "broken", False))

    def last_rows(self, cur: Any) -> List[Sequence[Any]]:
        # psycopg 3 keeps every result of a message; the protocol wants the last one's.
        rows: List[Sequence[Any]] = []
        while True:
            rows = list(cur.fetchall()) if cur.description is not None else []
            if not cur.nextset():
                return rows

    def errors(self) -> Tuple[Type[BaseException], ...]:
        import psycopg

        return (psycopg.Error,)

    def sqlstate(self, err: BaseException) -> Optional[str]:
        return getattr(err, "sqlstate", None)

    def address(self) -> str:
        return address_of(self.conn.info)


class Psycopg2(Driver):
    name = "psycopg2"

    def status(self) -> str:
        import psycopg2.extensions as ext

        if self.conn.closed:
            return "unknown"
        s = self.conn.get_transaction_status()
        return {
            ext.TRANSACTION_STATUS_IDLE: "idle",
            ext.TRANSACTION_STATUS_INTRANS: "intrans",
            ext.TRANSACTION_STATUS_INERROR: "inerror",
            ext.TRANSACTION_STATUS_ACTIVE: "active",
        }.get(s, "unknown")

    def autocommit(self) -> bool:
        return bool(self.conn.autocommit)

    def closed(self) -> bool:
        return bool(self.conn.closed)

    def errors(self) -> Tuple[Type[BaseException], ...]:
        import psycopg2

        return (psycopg2.Error,)

    def sqlstate(self, err: BaseException) -> Optional[str]:
        return getattr(err, "pgcode", None)

    def address(self) -> str:
        return address_of(self.conn.info)


def address_of(info: Any) -> str:
    """A driver connection's address as the native connection names it (no password)."""
    host = str(info.host)
    if ":" in host and not host.startswith("/"):
        host = f"[{host}]"
    return f"postgresql://{info.user}@{host}:{info.port}/{info.dbname}"


def _unwrap(conn: Any) -> Any:
    """The driver's connection inside a SQLAlchemy ``Connection`` (``engine.connect()``) or
    pooled connection (``engine.raw_connection()``); anything else as it is."""
    if (type(conn).__module__ or "").split(".", 1)[0] != "sqlalchemy":
        return conn
    inner = getattr(conn, "driver_connection", None)
    if inner is None:
        inner = getattr(getattr(conn, "connection", None), "driver_connection", None)
    return conn if inner is None else inner


def driver_for(conn: Any) -> Driver:
    """The driver adapter of ``conn``, or a ``TypeError`` that says what is accepted."""
    conn = _unwrap(conn)
    module = type(conn).__module__ or ""
    top = module.split(".", 1)[0]
    if top == "psycopg" and hasattr(conn, "info") and hasattr(conn, "pgconn"):
        if hasattr(conn, "__aenter__") and not hasattr(conn, "__enter__"):
            raise TypeError(
                "an async psycopg connection cannot run a synchronous write; use psycopg.Connection"
            )
        return Psycopg3(conn)
    if top == "psycopg2" and hasattr(conn, "get_transaction_status"):
        return Psycopg2(conn)
    raise TypeError(
        "conn must be a writerlock.postgres.Connection, a psycopg 3 connection or a psycopg2 "
        "connection (or a SQLAlchemy connection over one of them) opened with "
        f"**writerlock.postgres.session_options(), not {module}.{type(conn).__name__}"
    )


def drive(driver: Driver, protocol: _native.PgProtocol) -> Tuple[Any, ...]:
    """Runs ``protocol`` on ``driver`` to its end; returns the last step, or raises the
    protocol's exception with the driver's last error as its cause."""
    step = protocol.start()
    cause: Optional[BaseException] = None
    driver_errors = driver.errors()
    while step[0] == "run":
        _, kind, sql = step
        try:
            rows = driver.run(kind, sql)
        except driver_errors as err:
            fed = driver.feed_error(protocol, err)
            if fed is None:
                _abandon(driver)
                raise
            cause = err
            step = fed
            continue
        except BaseException:
            # Not the database: an interrupt or a bug. Leave no transaction open holding the
            # writer lock.
            _abandon(driver)
            raise
        step = protocol.feed_rows(rows)
    if step[0] == "failed":
        raise step[1] from cause
    return step


def _abandon(driver: Driver) -> None:
    with contextlib.suppress(Exception):
        if driver.autocommit():
            if driver.status() in ("intrans", "inerror"):
                cur = driver.conn.cursor()
                cur.execute("ROLLBACK")
                cur.close()
        else:
            driver.conn.rollback()


# By database address (as the schema set-up names it): the refusal count at which a write
# there last found no refused writer's lock held. A count is the database's, so writes on
# any connection to it share it.
_refusals_clean: Dict[str, int] = {}


def ensure_schema(driver: Driver, settings: _native.PgSettings) -> None:
    """The schema setup once per address per process (shared with the native connections,
    which name an address the same way)."""
    key = driver.address()
    if _native.pg_schema_is_set_up(key):
        return
    # A catalog read first: no DDL when the schema is current, so a writer role with data
    # grants only passes; on a read-only server nothing is stored nor recorded.
    protocol = _native.PgProtocol.ensure(settings, driver.tx_state())
    drive(driver, protocol)
    if protocol.set_up:
        _native.pg_mark_schema_set_up(key)


def setup_schema(driver: Driver, settings: _native.PgSettings, extra_sql: Optional[str]) -> None:
    """The schema setup on the driver's connection (the owner's step: it runs the DDL)."""
    protocol = _native.PgProtocol.setup(settings, extra_sql, driver.tx_state())
    drive(driver, protocol)
    if protocol.set_up:
        _native.pg_mark_schema_set_up(driver.address())


def query(driver: Driver, sql: str) -> List[Sequence[Any]]:
    """Runs one read-only statement of the core on the driver's connection and returns its
    rows; leaves the connection's transaction as it found it (a driver outside autocommit
    opens one for the statement, which is rolled back)."""
    was_idle = driver.status() == "idle"
    cur = driver.conn.cursor()
    try:
        cur.execute(sql)
        return list(cur.fetchall()) if cur.description is not None else []
    finally:
        cur.close()
        if was_idle and not driver.autocommit():
            driver.conn.rollback()


def check_session(
    driver: Driver, settings: _native.PgSettings
) -> List[Tuple[str, str, Optional[str], str]]:
    """Checks that ``settings``' startup settings took effect on the driver's session; leaves
    the connection's transaction state as it found it."""
    rows = query(driver, _native.pg_check_sql(settings))
    checks = _native.pg_read_checks(settings, rows)
    _native.pg_verify_checks(settings, rows)
    return checks


def refused_writers(driver: Driver) -> List[Tuple[str, int, int, int]]:
    """The refused writers still connected, as ``(writer, pid, version, floor)``."""
    return _native.pg_read_refused_writers(query(driver, _native.PG_REFUSED_WRITERS_SQL))


def stored_floor(driver: Driver) -> Optional[int]:
    """The stored floor, or ``None`` when the database stores none."""
    exists = query(driver, _native.PG_FLOOR_TABLE_SQL)
    if not exists or exists[0][0] is not True:
        return None
    rows = query(driver, _native.PG_STORED_FLOOR_SQL)
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def add_session_note(err: BaseException) -> None:
    """Tells how to open a driver's connection with the settings (Python 3.11+ notes)."""
    add_note = getattr(err, "add_note", None)
    if add_note is not None:
        add_note(
            "open the connection with **writerlock.postgres.session_options(), for example "
            "psycopg.connect(url, **writerlock.postgres.session_options())"
        )


class DriverWrite:
    """``with writerlock.postgres.write(conn, ledger) as w:`` on a psycopg connection; see
    :func:`writerlock.postgres.write`."""

    def __init__(
        self,
        conn: Any,
        driver: Driver,
        settings: _native.PgSettings,
        ledger: Optional[str],
        existing_alerts: Any,
        new_alerts: Callable[..., List[str]],
        refused_writer: Callable[..., RefusedWriter],
    ) -> None:
        self.connection: Any = conn
        self.ledger: Optional[str] = ledger
        self.waits: int = 0
        self.floor: Optional[int] = None
        self.refused: List[RefusedWriter] = []
        self.alerts: List[str] = []
        self._driver = driver
        self._settings = settings
        self._existing = existing_alerts
        self._new_alerts = new_alerts
        self._refused_writer = refused_writer
        self._open = False

    def __enter__(self) -> "DriverWrite":
        if self._open:
            raise ProgrammingError("this write is already open; use a new write()")
        driver = self._driver
        ensure_schema(driver, self._settings)
        # In autocommit mode BEGIN, the writer lock and the floor check go as one message,
        # so every writer in line waits for fewer round trips under the lock; a driver that
        # opens transactions itself takes them statement by statement.
        start = (
            _native.PgProtocol.write_in_one_message
            if driver.autocommit()
            else _native.PgProtocol.write
        )
        # The refusal count at which a write on this database last found no refused writer:
        # while it stays, the core skips the scan of pg_locks.
        key = driver.address()
        try:
            step = drive(
                driver,
                start(
                    self._settings,
                    driver.tx_state(),
                    known_clean=_refusals_clean.get(key),
                    **driver.dialled(),
                ),
            )
        except SettingNotInEffect as err:
            add_session_note(err)
            raise
        _, waits, floor, refused, clean = step
        if clean is None:
            _refusals_clean.pop(key, None)
        else:
            _refusals_clean[key] = clean
        self._open = True
        try:
            self.waits = waits
            self.floor = floor
            self.refused = [self._refused_writer(*r) for r in refused]
            existing = self._existing
            if callable(existing):
                existing = existing(self.connection, self.ledger)
            self.alerts = self._new_alerts(self.refused, existing or ())
        except BaseException:
            self._open = False
            drive(driver, _native.PgProtocol.end(False, True))
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if not self._open:
            return False
        self._open = False
        driver = self._driver
        if exc_type is None:
            drive(driver, _native.PgProtocol.end(True, driver.in_error()))
        else:
            try:
                drive(driver, _native.PgProtocol.end(False, True))
            except Exception as rollback_error:
                add_note = getattr(exc, "add_note", None)
                if add_note is not None:
                    add_note(f"writerlock: the rollback failed too: {rollback_error}")
        return False

    def _check_open(self) -> None:
        if not self._open or self._driver.status() not in ("intrans", "inerror"):
            raise ProgrammingError(
                _native.pg_write_ended_message(
                    "its with block is over, or its transaction was committed or rolled back",
                    "start a new one with write()",
                ),
                "25000",
            )

    def execute(self, sql: Any, params: Any = None) -> Any:
        """Runs one statement inside the write on the driver's cursor, in the driver's own
        placeholder style; returns the cursor. Once the write's transaction ended (its block
        is over, or ``conn.commit()`` ran inside it) this raises ``ProgrammingError`` and
        runs nothing: a write never runs outside its lock."""
        self._check_open()
        cur = self._driver.conn.cursor()
        cur.execute(sql, params)
        return cur

    def executemany(self, sql: Any, seq_of_params: Any) -> Any:
        """Runs one statement per parameter sequence inside the write; returns the cursor."""
        self._check_open()
        cur = self._driver.conn.cursor()
        cur.executemany(sql, seq_of_params)
        return cur
