"""Cursors: what a client cursor reports after each kind of statement (as PEP 249 and psycopg
3 have it), and the server-side cursor (``conn.cursor(name=...)``) that streams a result of
any size in bounded memory.
"""

from __future__ import annotations

import tracemalloc

import psycopg
import pytest

from writerlock import postgres


def test_results_as_pep_249_has_them(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(pg_db.url)
    p = psycopg.connect(pg_db.url)
    cur = c.execute("CREATE TABLE t (x int)")
    assert cur.description is None and cur.rowcount == -1
    with pytest.raises(postgres.ProgrammingError, match="no result"):
        cur.fetchone()
    with pytest.raises(postgres.ProgrammingError, match="no result"):
        cur.fetchall()
    assert c.execute("SET statement_timeout = '50s'").rowcount == -1
    assert c.execute("INSERT INTO t SELECT generate_series(1, 3)").rowcount == 3
    # A SELECT without rows is still described, as psycopg describes it.
    empty = c.execute("SELECT x, x::text AS label FROM t WHERE false")
    theirs = p.execute("SELECT 1 AS x, 'a'::text AS label WHERE false")
    assert [d[0] for d in empty.description] == [d.name for d in theirs.description]
    assert empty.rowcount == 0 and empty.fetchall() == []
    assert empty.description[0][1] == postgres.NUMBER
    # fetchmany: a negative size takes every remaining row.
    cur = c.execute("SELECT x FROM t ORDER BY x")
    assert cur.fetchmany(-1) == [(1,), (2,), (3,)]
    cur = c.cursor()
    with pytest.raises(postgres.ProgrammingError, match="no result"):
        cur.fetchone()  # nothing ran yet
    cur.close()
    with pytest.raises(postgres.ProgrammingError, match="cursor is closed"):
        cur.execute("SELECT 1")
    with pytest.raises(postgres.ProgrammingError, match="cursor is closed"):
        cur.fetchall()
    c.close()
    p.close()


def test_a_server_side_cursor_streams_in_bounded_memory(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(pg_db.url)
    count = 100_000
    tracemalloc.start()
    try:
        cur = c.cursor("stream")
        assert isinstance(cur, postgres.ServerCursor)
        cur.execute("SELECT g, 'row ' || g FROM generate_series(1, ?) g", (count,))
        assert [d[0] for d in cur.description] == ["g", "?column?"]
        assert c.execute("SELECT name FROM pg_cursors WHERE name <> ''").fetchall() == [("stream",)]
        total = 0
        largest = 0
        for row in cur:
            total += row[0]
            largest = max(largest, len(cur._rows or []))
        assert total == count * (count + 1) // 2 and cur.rowcount == count
        assert largest <= cur.itersize
        streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        client = c.execute("SELECT g, 'row ' || g FROM generate_series(1, ?) g", (count,)).fetchall()
        loaded = tracemalloc.get_traced_memory()[1]
        assert len(client) == count
        del client
    finally:
        tracemalloc.stop()
    # The streamed result never held more than a batch; the client cursor held it all.
    assert streamed * 20 < loaded, (streamed, loaded)
    cur.close()
    assert c.execute("SELECT count(*) FROM pg_cursors WHERE name <> ''").fetchone() == (0,)
    c.close()


def test_server_side_cursor_lives_in_its_transaction(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(pg_db.url)
    cur = c.cursor("c1")
    cur.itersize = 2
    cur.execute("SELECT g FROM generate_series(1, 5) g")
    assert cur.fetchmany(3) == [(1,), (2,), (3,)]
    assert cur.fetchall() == [(4,), (5,)]
    cur.execute("SELECT 1 WHERE false")  # declaring again closes the first one
    assert cur.fetchone() is None and cur.description is not None
    c.commit()  # ends the cursor with its transaction; close() then sends nothing
    cur.close()
    c.execute("SELECT 1")
    assert c.in_transaction
    # WITH HOLD outlives the commit.
    held = c.cursor("held", withhold=True)
    held.execute("SELECT g FROM generate_series(1, 3) g")
    c.commit()
    assert held.fetchall() == [(1,), (2,), (3,)]
    held.close()
    assert c.execute("SELECT count(*) FROM pg_cursors WHERE name <> ''").fetchone() == (0,)
    c.rollback()
    # In autocommit mode a cursor without hold has no transaction to live in: the server
    # refuses, as it refuses psycopg's.
    c.autocommit = True
    with pytest.raises(postgres.OperationalError, match="transaction block"):
        c.cursor("nope").execute("SELECT 1")
    c.close()
