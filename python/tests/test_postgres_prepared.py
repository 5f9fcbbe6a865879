"""Statements kept prepared on the server, as psycopg 3 keeps them: after five runs with the
same parameter types, on a session that talks to the server directly (tests/pg_faults
checks that none are kept through PgBouncer), forgotten when the server drops them, and
never closed by a child after fork()."""

from __future__ import annotations

import gc
import os
import sqlite3

import pytest

from writerlock import postgres

UPDATE = "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?"
KEPT = "SELECT statement FROM pg_prepared_statements ORDER BY statement"


def _kept(c: postgres.Connection) -> list:  # type: ignore[type-arg]
    return [r[0] for r in c.execute(KEPT).fetchall()]


def _ready(pg_db):  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(c)
    c.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    return c


def test_a_write_statement_is_prepared_after_five_runs(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    for n in range(1, 7):
        with c.write("main") as w:
            assert w.execute(UPDATE, ("main",)).rowcount == 1
        kept = [s for s in _kept(c) if s.startswith("UPDATE ledgers")]
        assert kept == ([] if n <= 5 else ["UPDATE ledgers SET generation = generation + 1 WHERE slug = $1"]), n
    assert c.execute("SELECT generation FROM ledgers").fetchone() == (6,)


def test_discard_all_forgets_what_was_kept(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    for _ in range(7):
        assert c.execute("SELECT generation FROM ledgers WHERE slug = ?", ("main",)).fetchone() == (0,)
    assert any(s.startswith("SELECT generation") for s in _kept(c))
    c.execute("DISCARD ALL")
    assert not any(s.startswith("SELECT generation") for s in _kept(c))
    # Run again: unnamed at first, prepared again later, never "does not exist".
    for _ in range(7):
        assert c.execute("SELECT generation FROM ledgers WHERE slug = ?", ("main",)).fetchone() == (0,)
    assert any(s.startswith("SELECT generation") for s in _kept(c))
    c.executescript("DEALLOCATE ALL")
    assert c.execute("SELECT generation FROM ledgers WHERE slug = ?", ("main",)).fetchone() == (0,)


def test_a_changed_table_fails_once_then_runs(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    for _ in range(7):
        assert c.execute("SELECT * FROM ledgers WHERE slug = ?", ("main",)).fetchone()[0] == "main"
    c.execute("ALTER TABLE ledgers ADD COLUMN note text")
    # As with psycopg 3: the kept plan's columns changed; the server refuses it once.
    with pytest.raises(sqlite3.DatabaseError, match="cached plan must not change result type"):
        c.execute("SELECT * FROM ledgers WHERE slug = ?", ("main",))
    cur = c.execute("SELECT * FROM ledgers WHERE slug = ?", ("main",))
    assert cur.description is not None and cur.description[-1][0] == "note"


def test_a_kept_statement_describes_an_empty_result(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    for _ in range(7):
        cur = c.execute("SELECT slug, generation FROM ledgers WHERE slug = ?", ("none",))
        assert cur.fetchall() == []
        assert cur.description is not None
        assert [d[0] for d in cur.description] == ["slug", "generation"]


def test_a_child_after_fork_leaves_the_parents_statements(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    for _ in range(7):
        with c.write("main") as w:
            w.execute(UPDATE, ("main",))
    pid = os.fork()
    if pid == 0:  # the child drops its copy of the connection (the session's destructor runs)
        code = 0
        try:
            del w, c
            gc.collect()
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with c.write("main") as w:
        assert w.execute(UPDATE, ("main",)).rowcount == 1
    assert c.execute("SELECT generation FROM ledgers").fetchone() == (8,)


def test_the_floor_check_is_prepared_and_survives_losing_it(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    for _ in range(2):  # the first write scans for refused writers; the second prepares
        with c.write("main") as w:
            w.execute(UPDATE, ("main",))
    assert "writerlock_floor_check" in [
        r[0] for r in c.execute("SELECT name FROM pg_prepared_statements").fetchall()
    ]
    # Something the connection cannot see drops it (a function, say): the next write
    # starts again with the check as text, writes, and the one after prepares it again.
    c.execute("DO $$ BEGIN EXECUTE 'DEALLO' || 'CATE writerlock_floor_check'; END $$")
    with c.write("main") as w:
        assert w.floor == 1
        w.execute(UPDATE, ("main",))
    with c.write("main") as w:
        w.execute(UPDATE, ("main",))
    assert "writerlock_floor_check" in [
        r[0] for r in c.execute("SELECT name FROM pg_prepared_statements").fetchall()
    ]
    # The prepared check still refuses a writer below a raised floor.
    admin = pg_db.connect()
    admin.execute("UPDATE writer_floor SET version = 2 WHERE name = 'ledger'")
    with pytest.raises(postgres.Refused):
        with c.write("main") as w:
            w.execute(UPDATE, ("main",))
    assert c.execute("SELECT generation FROM ledgers").fetchone() == (4,)
