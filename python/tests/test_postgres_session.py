"""The Postgres writer session through Python, against a real server: the seed's settings
check, values both ways, the sqlite3-like connection and cursor, the pool, the writer lock
(the idle holder ended, three cancelled waits), and the interpreter left free while waiting."""

from __future__ import annotations

import datetime
import decimal
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from conftest import admin_url, backend_alive, generation, scenario_result
from writerlock import postgres


def test_seed_check_prints_the_session_settings() -> None:
    url = admin_url()
    code = textwrap.dedent(
        """
        import os
        import writerlock
        c = writerlock.postgres.connect(os.environ["TEST_DATABASE_URL"])
        for name in ("lock_timeout", "idle_in_transaction_session_timeout", "statement_timeout"):
            print(name, c.execute(f"SHOW {name}").fetchone()[0])
        c.close()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "TEST_DATABASE_URL": url},
    ).stdout
    assert out == (
        "lock_timeout 10s\n"
        "idle_in_transaction_session_timeout 15s\n"
        "statement_timeout 1min\n"
    )


def test_connection_class_works_like_the_seeds(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = postgres.Connection(pg_db.url)
    assert c.execute("SHOW agentihooks.ledger_writer_version").fetchone() == ("1",)
    assert c.show("lock_timeout") == "10s"
    assert all(status != "not in effect" for _, _, _, status in c.check_settings())
    c.close()
    assert c.closed


def test_values_round_trip(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.executescript(
        """
        CREATE TABLE v (
            id serial PRIMARY KEY, n int8, b bool, f float8, t text, raw bytea,
            ts timestamp, tstz timestamptz, j jsonb, js json, num numeric, d date, tm time,
            u uuid
        )
        """
    )
    aware = datetime.datetime(2024, 5, 1, 14, 0, 0, 250000, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    naive = datetime.datetime(1999, 12, 31, 23, 59, 59, 999999)
    doc = {"a": [1, 2.5, None, True], "b": {"c": "ü"}}
    values = (
        2**62,
        True,
        1.25,
        "text with 'quotes' and ?",
        b"\x00\x01\xff",
        naive,
        aware,
        doc,
        postgres.Json([1, "two"]),  # a bare list is an array
        decimal.Decimal("-12.340"),
        datetime.date(2020, 2, 29),
        datetime.time(12, 30, 15, 5),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
    )
    cur = c.execute(
        "INSERT INTO v (n, b, f, t, raw, ts, tstz, j, js, num, d, tm, u) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        values,
    )
    assert cur.rowcount == 1 and cur.description is None
    c.execute("INSERT INTO v (n) VALUES (NULL)")
    row = c.execute(
        "SELECT n, b, f, t, raw, ts, tstz, j, js, num, d, tm, u FROM v ORDER BY id"
    ).fetchone()
    assert row == (
        2**62,
        True,
        1.25,
        "text with 'quotes' and ?",
        b"\x00\x01\xff",
        naive,
        aware.astimezone(datetime.timezone.utc),
        doc,
        [1, "two"],
        decimal.Decimal("-12.340"),
        datetime.date(2020, 2, 29),
        datetime.time(12, 30, 15, 5),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
    )
    assert row[6].tzinfo is not None and row[5].tzinfo is None
    assert isinstance(row[9], decimal.Decimal)
    nulls = c.execute("SELECT b, t, raw, ts, j, num FROM v WHERE n IS NULL").fetchone()
    assert nulls == (None,) * 6
    big = c.execute("SELECT ?::numeric + 1", (10**30,)).fetchone()[0]
    assert big == decimal.Decimal(10**30 + 1)
    # Python's datetime has no infinity: a DataError names the column and the value (as
    # psycopg 3 refuses it), never a finite date that would be written back.
    with pytest.raises(postgres.DataError, match="column far: timestamp too large .*'infinity'"):
        c.execute("SELECT 'infinity'::timestamptz AS far")
    with pytest.raises(postgres.DataError, match="column early: timestamp too small .*'-infinity'"):
        c.execute("SELECT '-infinity'::timestamp AS early")


def test_placeholders_and_cursor(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.execute("CREATE TABLE t (x int, label text)")
    c.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"n{i}") for i in range(5)])
    # ? inside a literal stays; $n works as well.
    assert c.execute("SELECT '?' || ?, $$?$$", ("x",)).fetchone() == ("?x", "?")
    assert c.execute("SELECT $2::int - $1::int", (1, 10)).fetchone() == (9,)
    cur = c.execute("SELECT x, label FROM t WHERE x >= ? ORDER BY x", (1,))
    assert [d[0] for d in cur.description] == ["x", "label"]
    assert cur.description[0][1] == "int4"
    assert cur.rowcount == 4
    assert cur.fetchone() == (1, "n1")
    assert cur.fetchmany(2) == [(2, "n2"), (3, "n3")]
    assert list(cur) == [(4, "n4")]
    assert cur.fetchone() is None and cur.fetchall() == []
    assert c.execute("UPDATE t SET label = 'z' WHERE x < ?", (3,)).rowcount == 3
    assert c.execute("DELETE FROM t WHERE label = ?", ("z",)).rowcount == 3
    c.row_factory = lambda cursor, row: {d[0]: v for d, v in zip(cursor.description, row)}
    assert c.execute("SELECT x FROM t ORDER BY x LIMIT 1").fetchone() == {"x": 3}
    cur = c.cursor()
    assert cur.execute("SELECT count(*) FROM t").fetchall() == [{"count": 2}]


def test_transactions_and_context_manager(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.execute("CREATE TABLE t (x int)")
    c.begin()
    assert c.in_transaction
    c.execute("INSERT INTO t VALUES (1)")
    c.rollback()
    assert not c.in_transaction
    c.execute("BEGIN")
    c.execute("INSERT INTO t VALUES (2)")
    c.commit()
    with c:
        assert c.in_transaction
        c.execute("INSERT INTO t VALUES (3)")
    with pytest.raises(ZeroDivisionError):
        with c:
            c.execute("INSERT INTO t VALUES (4)")
            1 / 0
    assert not c.closed
    assert c.execute("SELECT string_agg(x::text, ',' ORDER BY x) FROM t").fetchone() == ("2,3",)
    # A failed statement aborts the transaction; commit can only roll back.
    c.begin()
    c.execute("INSERT INTO t VALUES (5)")
    with pytest.raises(sqlite3.DatabaseError):
        c.execute("SELECT 1/0")
    with pytest.raises(sqlite3.OperationalError, match="rolled back") as info:
        c.commit()
    assert info.value.sqlstate == "40000"
    assert c.execute("SELECT count(*) FROM t WHERE x = 5").fetchone() == (0,)


def test_write_commits_and_rolls_back(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(c)
    c.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    with c.write("main") as w:
        assert w.waits == 1 and w.floor == 1 and w.alerts == [] and w.refused == []
        assert w.ledger == "main"
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = ?", ("main",))
    assert generation(c) == 1 and not c.in_transaction
    with pytest.raises(RuntimeError):
        with c.write("main") as w:
            c.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
            raise RuntimeError("the caller failed")
    assert generation(c) == 1 and not c.in_transaction
    # The writer lock is the transaction's first statement.
    c.begin()
    c.execute("SELECT 1")
    with pytest.raises(sqlite3.OperationalError, match="cannot start a transaction within a transaction"):
        with c.write("main"):
            pass
    c.rollback()


def test_writers_in_threads_take_turns(pg_db) -> None:  # type: ignore[no-untyped-def]
    setup = pg_db.connect()
    postgres.setup_schema(setup)
    setup.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    errors = []

    def run() -> None:
        conn = pg_db.connect()
        try:
            for _ in range(10):
                with conn.write("main") as w:
                    g = w.execute("SELECT generation FROM ledgers WHERE slug = 'main'").fetchone()[0]
                    time.sleep(0.001)
                    w.execute("UPDATE ledgers SET generation = ? WHERE slug = 'main'", (g + 1,))
        except BaseException as err:
            errors.append(err)
        finally:
            conn.close()

    threads = [threading.Thread(target=run) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert generation(setup) == 50


def test_pool_take_and_give(pg_db) -> None:  # type: ignore[no-untyped-def]
    pool = postgres.Pool(pg_db.url, size=2)
    a = pool.take()
    pid = a.pid
    a.begin()
    a.execute("CREATE TABLE t (x int)")
    pool.give(a)  # rolls back and keeps it
    assert a.closed and pool.idle_count == 1
    with pytest.raises(postgres.ConnectionClosed):
        a.execute("SELECT 1")
    b = pool.take()
    assert b.pid == pid and not b.in_transaction
    assert b.execute("SELECT to_regclass('t')").fetchone() == (None,)
    with pool.connection() as c:
        assert c.pid != pid
        assert c.show("statement_timeout") == "1min"
    pool.give(b)
    assert pool.idle_count == 2 and pool.size == 2


def test_idle_holder_is_ended_and_the_next_writer_commits_within_30_s() -> None:
    # Runs at the real defaults in a background process (scenarios/idle_holder.py).
    r = scenario_result("idle_holder")
    assert 14.0 <= r["elapsed"] < 30.0, r
    assert r["waits"] == 2, r  # the first wait of 10 s was cancelled, the second granted
    assert r["holder_alive"] == 0, r
    assert r["generation"] == 2, r  # the holder's update rolled back, both writers' landed
    assert r["holder_error"]["type"] == "SessionEnded", r
    assert "idle-in-transaction timeout" in r["holder_error"]["message"], r
    assert r["holder_closed"] is True
    # A psycopg 3 writer through write(conn) waited at the same time and committed too.
    assert r["driver"]["waits"] == 2 and 14.0 <= r["driver"]["elapsed"] < 30.0, r


def test_three_cancelled_waits_of_10_seconds_at_the_defaults() -> None:
    # Runs at the real defaults in a background process (scenarios/default_lock_waits.py).
    r = scenario_result("default_lock_waits")
    caught = r["caught"]
    assert caught is not None, r
    assert caught["type"] == "WriterLockNotGranted"
    assert caught["message"] == "the ledger writer lock was not granted in 3 waits of 10 seconds"
    assert caught["sqlstate"] == "55P03" and caught["tries"] == 3 and caught["wait"] == 10.0
    assert caught["in_transaction"] is False
    assert 29.0 <= r["elapsed"] < 45.0, r
    assert r["generation"] == 0
    # A psycopg 3 writer through write(conn) waited at the same time, with the same result.
    driver = r["driver"]
    assert driver["caught"] == {
        "type": "WriterLockNotGranted",
        "message": "the ledger writer lock was not granted in 3 waits of 10 seconds",
        "sqlstate": "55P03",
        "idle": True,
    }, r
    assert 29.0 <= driver["elapsed"] < 45.0, r


def test_three_cancelled_waits_raise_writer_lock_not_granted(pg_db) -> None:  # type: ignore[no-untyped-def]
    holder = pg_db.connect()
    postgres.setup_schema(holder)
    holder.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    holder.begin()
    holder.lock_writer()
    writer = pg_db.connect(lock_wait=1.0)
    start = time.monotonic()
    try:
        with writer.write("main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
        pytest.fail("the write was granted while another session held the writer lock")
    except sqlite3.OperationalError as err:  # what the ledger's handlers catch
        caught = err
    elapsed = time.monotonic() - start
    assert isinstance(caught, postgres.WriterLockNotGranted)
    assert str(caught) == "the ledger writer lock was not granted in 3 waits of 1 seconds"
    assert caught.sqlstate == "55P03" and caught.code == "55P03"
    assert 2.9 <= elapsed < 10.0
    assert not writer.in_transaction
    holder.rollback()
    with writer.write("main") as w:  # granted once the holder is gone
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert generation(writer) == 1


def test_interpreter_is_free_while_waiting_for_the_writer_lock(pg_db) -> None:  # type: ignore[no-untyped-def]
    holder = pg_db.connect()
    postgres.setup_schema(holder)
    holder.begin()
    holder.lock_writer()
    writer = pg_db.connect(lock_wait=1.5, lock_tries=1)
    ticks = 0
    stop = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        before = ticks
        with pytest.raises(postgres.WriterLockNotGranted):
            with writer.write():
                pass
        during = ticks - before
    finally:
        stop.set()
        t.join()
    holder.rollback()
    assert during >= 300, during


def test_statement_timeout_is_an_operational_error(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect(statement_timeout=0.3)
    with pytest.raises(sqlite3.OperationalError) as info:
        c.execute("SELECT pg_sleep(3)")
    assert info.value.sqlstate == "57014"
    assert "statement timeout" in str(info.value)
    assert c.execute("SELECT 1").fetchone() == (1,)


def test_server_errors_keep_their_sqlstate(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.execute("CREATE TABLE u (x int PRIMARY KEY, CHECK (x > 0))")
    c.execute("INSERT INTO u VALUES (1)")
    cases = [
        ("INSERT INTO u VALUES (1)", postgres.IntegrityError, sqlite3.IntegrityError, "23505"),
        ("INSERT INTO u VALUES (-1)", postgres.IntegrityError, sqlite3.IntegrityError, "23514"),
        ("SELECT 1/0", postgres.DataError, sqlite3.DataError, "22012"),
        ("SELECT nosuch FROM u", postgres.ProgrammingError, sqlite3.ProgrammingError, "42703"),
        ("SELEC 1", postgres.ProgrammingError, sqlite3.ProgrammingError, "42601"),
    ]
    for sql, cls, sqlite_cls, code in cases:
        with pytest.raises(sqlite3.DatabaseError) as info:
            c.execute(sql)
        assert isinstance(info.value, cls) and isinstance(info.value, sqlite_cls), sql
        assert info.value.sqlstate == code and info.value.code == code, sql
    with pytest.raises(postgres.DatabaseError) as info:
        c.execute("SELECT 1 FROM nosuch")
    assert info.value.sqlstate == "42P01"
    assert 'relation "nosuch" does not exist' in str(info.value)
    with pytest.raises(postgres.DatabaseError) as info:
        c.execute("DO $$ BEGIN RAISE EXCEPTION 'mine' USING ERRCODE = 'P0001', HINT = 'do x'; END $$")
    assert info.value.sqlstate == "P0001" and info.value.hint == "do x"
