"""What the Postgres writer session promises, checked from the server's side, through the
native connection and through the user's own psycopg connection:

* only a wait the server cancelled through ``lock_timeout`` (SQLSTATE 55P03) is asked again;
  a cancel from another session or the statement limit (57014) surfaces at once with its own
  SQLSTATE, and the server saw one wait for the writer lock;
* a write left by an exception rolls back: its rows are not on the server and the writer
  lock is free at once;
* the stored floor never goes down, whichever setup stores it.

A plain psycopg session watches the server (``pg_stat_activity``, ``pg_try_advisory_xact_lock``,
``SELECT`` from the tables), never the API under test."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import psycopg
import pytest

from conftest import DRIVERS, backend_pid, in_transaction
from writerlock import postgres

WRITER_LOCK = 1279607879


def _plain(pg_db) -> psycopg.Connection:  # type: ignore[no-untyped-def]
    return psycopg.connect(pg_db.url, autocommit=True)


class LockWaitWatcher:
    """Samples ``pg_stat_activity`` for the waits of backend ``pid`` for an advisory lock
    (each attempt is a message of its own, so a distinct ``query_start``); with ``cancel``
    it cancels the first wait it sees with ``pg_cancel_backend``."""

    def __init__(self, url: str, pid: int, cancel: bool) -> None:
        self.url, self.pid, self.cancel = url, pid, cancel
        self.waits: Set[str] = set()
        self.cancelled_at: Optional[float] = None
        self.error: Optional[BaseException] = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "LockWaitWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the watcher did not stop"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as watcher:
                deadline = time.monotonic() + 30
                while not self._done.is_set() and time.monotonic() < deadline:
                    rows = watcher.execute(
                        "SELECT query_start::text FROM pg_stat_activity WHERE pid = %s "
                        "AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
                        (self.pid,),
                    ).fetchall()
                    self.waits.update(r[0] for r in rows)
                    if self.cancel and self.cancelled_at is None and self.waits:
                        sent = watcher.execute("SELECT pg_cancel_backend(%s)", (self.pid,)).fetchone()
                        assert sent == (True,), f"pg_cancel_backend({self.pid}) found no backend"
                        self.cancelled_at = time.monotonic()
                    time.sleep(0.005)
        except BaseException as err:  # reported by __exit__
            self.error = err


def _hold_the_writer_lock(pg_db) -> postgres.Connection:  # type: ignore[no-untyped-def]
    setup = pg_db.connect()
    postgres.setup_schema(setup)
    setup.execute("INSERT INTO ledgers (slug) VALUES ('main')")
    setup.close()
    holder = pg_db.connect()
    holder.begin()
    holder.lock_writer()
    return holder


def _native(url: str, **settings: Any) -> Any:
    return postgres.connect(url, **settings)


CONNECTIONS: Dict[str, Callable[..., Any]] = {"native": _native, **DRIVERS}


def _write(conn: Any, **settings: Any) -> Any:
    """The write guard for ``conn``: the native one, or the driver one with ``settings``."""
    if isinstance(conn, postgres.Connection):
        return conn.write("main")
    return postgres.write(conn, "main", **settings)


@pytest.fixture(params=sorted(CONNECTIONS))
def open_conn(request, pg_db):  # type: ignore[no-untyped-def]
    """Opens writer connections of one kind (native or a driver's) to the test's database."""
    opened: List[Any] = []

    def make(**settings: Any) -> Any:
        conn = CONNECTIONS[request.param](pg_db.url, **settings)
        opened.append(conn)
        return conn

    yield make
    for conn in opened:
        conn.close()


def _attempt_write(conn: Any, url: str, cancel: bool, **settings: Any) -> Tuple[BaseException, float, int, Optional[float]]:
    """Tries a write while a watcher samples its lock waits; returns the error, when it came,
    the waits the server showed and when the watcher cancelled."""
    caught: Optional[BaseException] = None
    with LockWaitWatcher(url, backend_pid(conn), cancel) as watcher:
        try:
            with _write(conn, **settings) as w:
                w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
        except sqlite3.Error as err:
            caught = err
        ended = time.monotonic()
    assert caught is not None, "the write was granted while another session held the writer lock"
    return caught, ended, len(watcher.waits), watcher.cancelled_at


def _sqlstate(err: BaseException) -> Optional[str]:
    return getattr(err, "sqlstate", None) or getattr(err, "pgcode", None)


def test_a_cancelled_lock_wait_is_reported_not_retried(open_conn, pg_db) -> None:  # type: ignore[no-untyped-def]
    holder = _hold_the_writer_lock(pg_db)
    conn = open_conn(lock_wait=3.0)
    err, ended, waits, cancelled_at = _attempt_write(conn, pg_db.url, True, lock_wait=3.0)
    assert cancelled_at is not None, "the watcher never saw the writer wait"
    assert waits == 1, f"the server saw {waits} waits for the writer lock: {err!r}"
    assert isinstance(err, postgres.OperationalError), repr(err)
    assert not isinstance(err, postgres.WriterLockNotGranted), repr(err)
    assert _sqlstate(err) == "57014", repr(err)
    assert str(err) == "canceling statement due to user request"
    # Asked again, the writer would wait another lock_timeout (3 s) before any answer.
    assert ended - cancelled_at < 3.0
    assert not in_transaction(conn)
    holder.rollback()
    with _write(conn, lock_wait=3.0) as w:  # granted at once now
        assert w.waits == 1


def test_a_statement_timeout_during_the_lock_wait_is_reported_not_retried(open_conn, pg_db) -> None:  # type: ignore[no-untyped-def]
    _holder = _hold_the_writer_lock(pg_db)
    conn = open_conn(lock_wait=3.0, statement_timeout=0.8)
    started = time.monotonic()
    err, ended, waits, _ = _attempt_write(conn, pg_db.url, False, lock_wait=3.0, statement_timeout=0.8)
    took = ended - started
    assert waits == 1, f"the server saw {waits} waits for the writer lock: {err!r}"
    assert isinstance(err, postgres.OperationalError), repr(err)
    assert not isinstance(err, postgres.WriterLockNotGranted), repr(err)
    assert _sqlstate(err) == "57014", repr(err)
    assert str(err) == "canceling statement due to statement timeout"
    # One statement limit (0.8 s), well before the first lock_timeout (3 s).
    assert 0.8 <= took < 3.0, took
    assert not in_transaction(conn)


def _try_writer_lock(plain: psycopg.Connection) -> bool:
    with plain.transaction():
        row = plain.execute("SELECT pg_try_advisory_xact_lock(%s)", (WRITER_LOCK,)).fetchone()
    return bool(row and row[0])


def test_a_write_left_by_an_exception_rolls_back_on_the_server(open_conn, pg_db) -> None:  # type: ignore[no-untyped-def]
    setup = pg_db.connect()
    postgres.setup_schema(setup)
    setup.executescript("INSERT INTO ledgers (slug) VALUES ('main'); CREATE TABLE rows (tag text)")
    setup.close()
    conn = open_conn()
    plain = _plain(pg_db)

    class Oops(Exception):
        pass

    with pytest.raises(Oops):
        with _write(conn) as w:
            w.execute("INSERT INTO rows (tag) VALUES ('dropped')")
            w.execute("INSERT INTO row_changes (slug, generation, row_key) VALUES ('main', 1, 'dropped')")
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
            raise Oops()
    state = plain.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (backend_pid(conn),)).fetchone()
    assert state == ("idle",), state
    assert _try_writer_lock(plain), "the writer lock is still held after the failed write"
    assert not in_transaction(conn)
    assert plain.execute("SELECT count(*) FROM rows").fetchone() == (0,)
    assert plain.execute("SELECT generation FROM ledgers").fetchone() == (0,)

    # The next write on the same session commits only its own rows.
    with _write(conn) as w:
        assert w.waits == 1
        w.execute("INSERT INTO rows (tag) VALUES ('kept')")
        w.execute("INSERT INTO row_changes (slug, generation, row_key) VALUES ('main', 1, 'kept')")
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert plain.execute("SELECT array_agg(tag) FROM rows").fetchone() == (["kept"],)
    assert plain.execute("SELECT generation FROM ledgers").fetchone() == (1,)
    plain.close()


def _floor_on_server(plain: psycopg.Connection) -> int:
    rows = plain.execute("SELECT name, version FROM writer_floor").fetchall()
    assert len(rows) == 1 and rows[0][0] == "ledger", rows
    return int(rows[0][1])


def test_the_stored_floor_never_goes_down(open_conn, pg_db) -> None:  # type: ignore[no-untyped-def]
    plain = _plain(pg_db)
    high = open_conn(version=5, required=5)
    postgres.setup_schema(high, **({} if isinstance(high, postgres.Connection) else {"version": 5, "required": 5}))
    assert _floor_on_server(plain) == 5
    for version, required in [(1, 1), (3, 0), (2, 2)]:
        low = open_conn(version=version, required=required)
        options = {} if isinstance(low, postgres.Connection) else {"version": version, "required": required}
        postgres.setup_schema(low, **options)
        assert _floor_on_server(plain) == 5, f"lowered by a setup from code requiring {required}"
    # Raising still works.
    higher = open_conn(version=6, required=6)
    postgres.setup_schema(higher, **({} if isinstance(higher, postgres.Connection) else {"version": 6, "required": 6}))
    assert _floor_on_server(plain) == 6
    plain.close()
