"""Bad input gives clear Python exceptions, never a crash: wrong types, bad numbers, closed
connections, a DSN that cannot connect, a session the server ends in mid-transaction."""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import writerlock
from conftest import admin_url, wait_until
from test_sqlite_queue import lock_is_held
from writerlock import postgres


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "bad.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    return path


# ---------------------------------------------------------------------------------------------
# SQLite queue


def test_queue_wrong_types(db: str) -> None:
    with pytest.raises(TypeError):
        writerlock.WriterQueue(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        writerlock.WriterQueue()  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="strategy"):
        writerlock.WriterQueue(db, strategy="fast")
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None)
    for bad in (None, "conn", object(), 3):
        with pytest.raises(TypeError, match="sqlite3.Connection"):
            q.begin(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="sqlite3.Connection"):
            q.execute(bad, "INSERT INTO t VALUES (1)")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="sqlite3.Connection"):
            q.commit(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        q.begin(conn, wait="long")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        q.execute(conn, b"INSERT INTO t VALUES (1)")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        q.begin(conn, setting=5)  # type: ignore[arg-type]
    assert not q.holding


@pytest.mark.parametrize("wait", [-1.0, math.nan, math.inf, 1e12])
def test_queue_bad_numbers(db: str, wait: float) -> None:
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(ValueError, match="wait"):
        q.begin(conn, wait=wait)
    with pytest.raises(ValueError, match="invalid argument wait: "):
        q.execute(conn, "INSERT INTO t VALUES (1)", wait=wait)
    with pytest.raises(ValueError, match="invalid argument busy_timeout: "), pytest.warns(
        DeprecationWarning
    ):
        q.execute(conn, "INSERT INTO t VALUES (1)", busy_timeout=wait)
    with pytest.raises(ValueError, match="invalid argument wait: "):
        q.acquire(wait=wait)
    assert not q.holding


def test_queue_bad_params_and_sql(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None)
    with pytest.raises(sqlite3.ProgrammingError):
        q.execute(conn, "INSERT INTO t VALUES (?)", ({1},))  # unsupported type
    with pytest.raises(sqlite3.ProgrammingError):
        q.execute(conn, "INSERT INTO t VALUES (?)", (1, 2))  # wrong count
    with pytest.raises(sqlite3.OperationalError, match="syntax error"):
        q.execute(conn, "INSERT INTO nowhere VALUE")
    with pytest.raises(sqlite3.ProgrammingError):
        q.execute(conn, "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
    assert not q.holding
    q.execute(conn, "INSERT INTO t VALUES (1)")  # still usable
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_queue_closed_connection(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        q.begin(conn)
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        q.execute(conn, "INSERT INTO t VALUES (1)")
    assert not q.holding


def test_queue_connection_closed_inside_the_transaction(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None)
    q.begin(conn)
    conn.execute("INSERT INTO t VALUES (1)")
    conn.close()  # SQLite rolls back
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        q.commit(conn)
    # The turn was given back: the lock file is free (`holding` alone is this handle's flag).
    assert not q.holding and not lock_is_held(db)
    other = sqlite3.connect(db, isolation_level=None)
    with q.transaction(other, wait=2.0):
        other.execute("INSERT INTO t VALUES (2)")
    assert other.execute("SELECT x FROM t").fetchall() == [(2,)]


def test_queue_connection_from_another_thread(db: str) -> None:
    import threading

    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None)  # check_same_thread=True
    caught = []

    def run() -> None:
        try:
            q.begin(conn)
        except BaseException as err:
            caught.append(err)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(caught) == 1 and type(caught[0]) is sqlite3.ProgrammingError, caught
    assert "same thread" in str(caught[0])
    assert not q.holding and not lock_is_held(db)
    with q.transaction(conn, wait=2.0):  # the turn was given back
        conn.execute("INSERT INTO t VALUES (1)")


def test_queue_directory_that_does_not_exist(tmp_path: Path) -> None:
    path = str(tmp_path / "missing" / "x.db")
    q = writerlock.WriterQueue(path)
    with pytest.raises(sqlite3.OperationalError, match="could not open the writer lock file") as info:
        q.acquire(wait=1.0)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert not q.holding


def test_lock_file_that_cannot_be_opened(tmp_path: Path) -> None:
    path = str(tmp_path / "x.db")
    conn = sqlite3.connect(path, isolation_level=None)
    os.mkdir(path + writerlock.LOCK_SUFFIX)  # a directory where the lock file belongs
    q = writerlock.WriterQueue(path)
    with pytest.raises(sqlite3.OperationalError, match="is a directory, not a regular file"):
        q.begin(conn, wait=1.0)
    assert not q.holding and not conn.in_transaction


def test_an_execute_override_that_raises_never_sees_the_queues_statements(db: str) -> None:
    class Exploding(sqlite3.Connection):
        def execute(self, sql, *args):  # type: ignore[no-untyped-def, override]
            if sql.startswith("BEGIN"):
                raise KeyboardInterrupt("stop")
            return super().execute(sql, *args)

    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None, factory=Exploding)
    q.begin(conn)  # BEGIN IMMEDIATE goes to SQLite directly, not through execute()
    assert q.holding and conn.in_transaction
    q.commit(conn)
    assert not q.holding and not lock_is_held(db)
    with pytest.raises(KeyboardInterrupt, match="stop"):  # the caller's own BEGIN still does
        conn.execute("BEGIN")


# ---------------------------------------------------------------------------------------------
# Postgres session


def test_pg_wrong_types(pg_db) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="dsn must be a str"):
        postgres.connect(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        postgres.connect(pg_db.url, lock_wait="10s")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        postgres.connect(pg_db.url, no_such_option=1)
    with pytest.raises((OverflowError, ValueError)):
        postgres.connect(pg_db.url, version=-1)
    with pytest.raises(ValueError, match="out of range"):
        postgres.connect(pg_db.url, version=40000, required=1)
    with pytest.raises(ValueError, match="would refuse its own writes"):
        postgres.connect(pg_db.url, version=1, required=2)
    with pytest.raises(ValueError, match="lock_wait"):
        postgres.connect(pg_db.url, lock_wait=-1)
    c = pg_db.connect()
    with pytest.raises(TypeError, match="sql must be a str"):
        c.execute(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parameter 1 has type set"):
        c.execute("SELECT ?", ({1},))
    with pytest.raises(TypeError, match="params must be a sequence"):
        c.execute("SELECT ?", "x")
    with pytest.raises(TypeError, match="params must be a sequence"):
        c.execute("SELECT ?", {"a": 1})
    with pytest.raises(TypeError, match="params must be a sequence"):
        c.execute("SELECT ?", 5)
    with pytest.raises(ValueError, match="JSON"):
        c.execute("SELECT ?::jsonb", ({"x": float("nan")},))
    with pytest.raises(sqlite3.ProgrammingError, match="placeholders"):
        c.execute("SELECT ?, ?", (1,))
    # Bytes always go as a bytea value: the server refuses them where no bytea fits, and
    # converts them to text the way SQL converts a bytea (its \\x hex form), as psycopg's do.
    c.execute("CREATE TEMP TABLE only_int (n int)")
    with pytest.raises(sqlite3.ProgrammingError, match="bytea"):
        c.execute("INSERT INTO only_int VALUES (?)", (b"raw",))
    assert c.execute("SELECT ?::text", (b"raw",)).fetchone() == ("\\x726177",)
    with pytest.raises(sqlite3.NotSupportedError, match="cast it in the query"):
        c.execute("SELECT 'a & b'::tsquery AS words")
    # NULL of any type is None, even of a type without a Python value.
    assert c.execute("SELECT NULL::tsquery AS words").fetchone() == (None,)
    with pytest.raises(TypeError):
        postgres.setup_schema("not a connection")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        postgres.Pool(pg_db.url).give("not a connection")  # type: ignore[arg-type]
    assert c.execute("SELECT 1").fetchone() == (1,)  # still usable after all that


def test_pg_closed_connection(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.close()
    c.close()  # twice is fine
    assert c.closed
    for call in (
        lambda: c.execute("SELECT 1"),
        lambda: c.begin(),
        lambda: c.write().__enter__(),
        lambda: postgres.refused_writers(c),
    ):
        with pytest.raises(sqlite3.OperationalError) as info:
            call()
        assert isinstance(info.value, postgres.ConnectionClosed)
        assert info.value.sqlstate == "08003"
        assert "close() was called" in str(info.value)


def test_pg_dsn_that_cannot_connect() -> None:
    with pytest.raises(sqlite3.OperationalError) as info:
        postgres.connect("postgresql://nobody:secret-pw@127.0.0.1:1/ledger", connect_timeout=3)
    err = info.value
    assert isinstance(err, postgres.ConnectError)
    assert "could not connect to the database at postgresql://nobody@127.0.0.1:1/ledger" in str(err)
    assert "secret-pw" not in str(err)
    assert err.sqlstate == "08001"

    url = admin_url().rsplit("/", 1)[0] + "/no_such_database_here"
    with pytest.raises(postgres.ConnectError) as info:
        postgres.connect(url)
    assert info.value.sqlstate == "3D000"
    assert "does not exist" in str(info.value)

    with pytest.raises(sqlite3.InterfaceError) as info2:
        postgres.connect("this is :: not a dsn")
    assert "not valid" in str(info2.value)
    with pytest.raises(sqlite3.InterfaceError):
        postgres.connect("")
    with pytest.raises(sqlite3.Error):
        postgres.Pool("postgresql://nobody@127.0.0.1:1/x", connect_timeout=2).take()


def test_pg_session_ended_in_mid_transaction(pg_db) -> None:  # type: ignore[no-untyped-def]
    pool = postgres.Pool(pg_db.url, size=2, autocommit=True)
    c = pool.take()
    postgres.setup_schema(c)
    c.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    admin = pg_db.connect()
    w = c.write("main")
    w.__enter__()
    w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    pid = c.pid
    # The server ends the session while its transaction is open.
    assert admin.execute("SELECT pg_terminate_backend(?)", (pid,)).fetchone() == (True,)
    assert wait_until(
        lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ?", (pid,)).fetchone()[0] == 0
    )
    with pytest.raises(sqlite3.OperationalError) as info:
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    err = info.value
    assert isinstance(err, (postgres.SessionEnded, postgres.ConnectionClosed)), repr(err)
    assert err.sqlstate in ("57P01", "08003"), err.sqlstate
    assert c.closed
    # Leaving the write block with the error does not crash either.
    w.__exit__(type(err), err, None)
    with pytest.raises(postgres.ConnectionClosed):
        c.execute("SELECT 1")
    # The pool drops it and the next take opens a fresh session.
    pool.give(c)
    assert pool.idle_count == 0
    fresh = pool.take()
    assert fresh.pid != pid
    with fresh.write("main") as w2:
        w2.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert fresh.execute("SELECT generation FROM ledgers").fetchone() == (1,)


def test_pg_connection_dropped_by_the_garbage_collector_in_a_thread(pg_db) -> None:  # type: ignore[no-untyped-def]
    # A connection never closed, dropped with an open transaction, in a fresh interpreter
    # that then exits: no crash, no hang.
    code = textwrap.dedent(
        f"""
        import threading
        from writerlock import postgres
        def run():
            c = postgres.connect({pg_db.url!r})
            c.begin()
            c.execute("SELECT 1")
        t = threading.Thread(target=run)
        t.start(); t.join()
        c = postgres.connect({pg_db.url!r})
        c.begin()
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
