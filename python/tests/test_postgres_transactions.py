"""Transactions as PEP 249 has them, side by side with psycopg 3 on the same server: nothing
is kept without ``commit()``, ``with conn:`` commits or rolls back what its block did, and
``autocommit=True`` gives one transaction per statement. ``write()`` keeps working after plain
reads on the same connection, its writer lock still the first statement of its transaction.
"""

from __future__ import annotations

from typing import Any, List

import psycopg
import pytest

from writerlock import postgres


def _rows(pg_db: Any) -> List[int]:
    """The rows of ``t`` as another session sees them (only what was committed)."""
    other = pg_db.connect()
    try:
        return [r[0] for r in other.execute("SELECT x FROM t ORDER BY x").fetchall()]
    finally:
        other.close()


@pytest.fixture
def table(pg_db):  # type: ignore[no-untyped-def]
    setup = pg_db.connect()
    setup.execute("CREATE TABLE t (x int)")
    setup.close()
    return pg_db


def test_rollback_and_close_undo_what_was_not_committed(table) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(table.url)
    assert c.autocommit is False
    c.execute("INSERT INTO t VALUES (1)")
    assert c.in_transaction
    assert _rows(table) == []  # not visible elsewhere before commit()
    c.rollback()
    assert c.execute("SELECT count(*) FROM t").fetchone() == (0,)
    c.execute("INSERT INTO t VALUES (2)")
    c.commit()
    assert _rows(table) == [2]
    c.execute("INSERT INTO t VALUES (3)")
    c.close()  # without commit(): rolled back
    assert _rows(table) == [2]

    # psycopg 3 on the same server does the same.
    p = psycopg.connect(table.url)
    p.execute("INSERT INTO t VALUES (4)")
    p.rollback()
    p.execute("INSERT INTO t VALUES (5)")
    p.close()
    assert _rows(table) == [2]


def test_with_block_commits_or_rolls_back_exactly_what_it_did(table) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(table.url)
    with pytest.raises(RuntimeError):
        with c:
            c.execute("INSERT INTO t VALUES (1)")
            c.commit()
            c.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("the block fails")
    assert _rows(table) == [1]
    assert not c.closed and not c.in_transaction
    with c:
        c.execute("INSERT INTO t VALUES (3)")
    assert _rows(table) == [1, 3]
    # In autocommit mode the block is one transaction too.
    c.autocommit = True
    with pytest.raises(RuntimeError):
        with c:
            c.execute("INSERT INTO t VALUES (4)")
            raise RuntimeError("the block fails")
    assert _rows(table) == [1, 3]
    c.close()


def test_autocommit_commits_each_statement(table) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(table.url, autocommit=True)
    c.execute("INSERT INTO t VALUES (1)")
    assert not c.in_transaction
    c.rollback()  # nothing to roll back
    c.close()
    assert _rows(table) == [1]
    c = postgres.connect(table.url)
    c.execute("SELECT 1")
    with pytest.raises(postgres.ProgrammingError, match="autocommit cannot change"):
        c.autocommit = True
    c.rollback()
    c.autocommit = True
    # executescript follows the mode: DDL that must run outside a transaction runs.
    c.executescript("CREATE INDEX CONCURRENTLY t_x ON t (x)")
    c.autocommit = False
    c.executescript("INSERT INTO t VALUES (7); INSERT INTO t VALUES (8)")
    c.rollback()
    assert _rows(table) == [1]
    c.close()
    pool = postgres.Pool(table.url, autocommit=True)
    with pool.connection() as pc:
        assert pc.autocommit
    pool = postgres.Pool(table.url)
    with pool.connection() as pc:
        assert not pc.autocommit


def test_write_after_plain_reads_on_the_same_connection(table) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(table.url)
    postgres.setup_schema(c)
    c.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    # Uncommitted changes before a write: refused, nothing lost, nothing written.
    with pytest.raises(postgres.ProgrammingError, match="uncommitted changes"):
        with c.write("main"):
            pass
    assert c.in_transaction
    c.commit()
    # Plain reads leave an implicit transaction open; the write still takes the writer lock
    # as its transaction's first statement.
    assert c.execute("SELECT generation FROM ledgers WHERE slug = 'main'").fetchone() == (0,)
    assert c.in_transaction
    with c.write("main") as w:
        first = w.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            " AND objid = ? AND granted",
            (postgres.WRITER_LOCK,),
        ).fetchone()
        assert first == (1,)
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert not c.in_transaction
    other = table.connect()
    assert other.execute("SELECT generation FROM ledgers WHERE slug = 'main'").fetchone() == (1,)
    other.close()
    # A failed statement leaves the implicit transaction aborted: the error says so, and
    # rollback() clears it.
    with pytest.raises(postgres.ProgrammingError):
        c.execute("SELECT no_such_column FROM ledgers")
    with pytest.raises(postgres.OperationalError, match="aborted"):
        c.execute("SELECT 1")
    c.rollback()
    assert c.execute("SELECT 1").fetchone() == (1,)
    c.close()


def test_lock_writer_setup_schema_and_begin_after_plain_reads(table) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(table.url)
    c.execute("SELECT count(*) FROM t")
    postgres.setup_schema(c)  # runs under the writer lock in a transaction of its own
    c.execute("SELECT count(*) FROM t")
    assert c.lock_writer() == 1
    c.execute("INSERT INTO t VALUES (1)")
    c.commit()
    assert _rows(table) == [1]
    c.execute("SELECT 1")
    c.begin()  # the implicit transaction is the one begin() asks for
    c.execute("INSERT INTO t VALUES (2)")
    c.rollback()
    c.execute("INSERT INTO t VALUES (3)")
    with pytest.raises(postgres.ProgrammingError, match="uncommitted changes"):
        c.lock_writer()
    c.close()
    assert _rows(table) == [1]
