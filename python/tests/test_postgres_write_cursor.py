"""What ``w.execute`` inside ``with conn.write(...) as w:`` gives back: the same cursor, row
count, ``lastrowid``, description and values as ``conn.execute`` outside a write, and the
same errors, raised before anything is sent where the statement can be told wrong by its
text; and what the write object refuses (entering twice, a failing alert look-up)."""

from __future__ import annotations

import datetime
import sqlite3
import sys

import pytest

from writerlock import postgres

UPDATE = "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?"


def _ready(pg_db):  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(c)
    c.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    c.execute("CREATE TABLE items (id bigserial PRIMARY KEY, at timestamptz, name text)")
    c.commit()
    return c


def test_a_writes_cursor_matches_the_connections(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    c.execute("SET TIME ZONE 'Europe/Paris'")
    c.commit()
    at = datetime.datetime(2026, 7, 1, 12, 0, tzinfo=datetime.timezone.utc)
    with c.write("main") as w:
        assert isinstance(w, postgres.Write)
        cur = w.execute(UPDATE, ("main",))
        assert isinstance(cur, postgres.Cursor)
        assert (cur.rowcount, cur.description, cur.lastrowid) == (1, None, None)
        with pytest.raises(postgres.ProgrammingError, match="no result to fetch"):
            cur.fetchone()
        ins = w.execute("INSERT INTO items (at, name) VALUES (?, ?) RETURNING id", (at, "a"))
        assert ins.rowcount == 1 and ins.lastrowid == 1
        assert ins.description is not None and ins.description[0][0] == "id"
        assert ins.fetchall() == [(1,)]
        # timestamptz comes back in the session's TimeZone, as conn.execute gives it.
        row = w.execute("SELECT at, name FROM items WHERE id = ?", (1,)).fetchone()
        assert row[0] == at and row[0].utcoffset() == datetime.timedelta(hours=2)
        assert w.execute("SELECT name FROM items WHERE id = -1").description[0][0] == "name"
        # DDL counts no rows.
        assert w.execute("CREATE TEMP TABLE scratch (x int)").rowcount == -1
        # A statement that changes the TimeZone is followed inside the write too.
        w.execute("SET LOCAL TIME ZONE 'Asia/Tokyo'")
        row = w.execute("SELECT at FROM items WHERE id = 1").fetchone()
        assert row[0] == at and row[0].utcoffset() == datetime.timedelta(hours=9)
    outside = c.execute("SELECT at FROM items WHERE id = 1").fetchone()
    assert outside[0].utcoffset() == datetime.timedelta(hours=2)  # SET LOCAL ended with the write
    c.rollback()


def test_a_writes_statement_errors_name_the_problem(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    with c.write("main") as w:
        with pytest.raises(TypeError, match="sql must be a str, not bytes"):
            w.execute(b"SELECT 1")  # type: ignore[arg-type]
        # psycopg's placeholders with values: told before anything is sent, so the write
        # goes on.
        with pytest.raises(postgres.ProgrammingError, match="psycopg's placeholder style"):
            w.execute("UPDATE ledgers SET generation = %s WHERE slug = 'main'", (5,))
        w.execute(UPDATE, ("main",))
    assert c.execute("SELECT generation FROM ledgers").fetchone() == (1,)
    c.rollback()
    with pytest.raises(postgres.ProgrammingError, match="psycopg's placeholder style") as err:
        with c.write("main") as w:
            # Without values the server sees the %s and refuses it; the error says why.
            w.execute("UPDATE ledgers SET generation = %s WHERE slug = 'main'")
    assert err.value.__cause__ is not None and err.value.__cause__.sqlstate == "42601"
    with pytest.raises(postgres.ProgrammingError, match="its with block is over") as ended:
        w.execute(UPDATE, ("main",))
    assert ended.value.sqlstate == "25000"
    assert c.execute("SELECT generation FROM ledgers").fetchone() == (1,)
    c.rollback()


def test_a_write_is_entered_once(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    w = c.write("main")
    with w:
        with pytest.raises(postgres.ProgrammingError, match="this write is already open"):
            w.__enter__()
        w.execute(UPDATE, ("main",))
    assert not c.in_transaction
    assert c.execute("SELECT generation FROM ledgers").fetchone() == (1,)
    c.rollback()


def test_uncommitted_changes_before_a_write_are_refused(pg_db) -> None:  # type: ignore[no-untyped-def]
    _ready(pg_db)
    c = pg_db.connect(autocommit=False)
    c.execute("INSERT INTO items (name) VALUES ('pending')")
    with pytest.raises(postgres.ProgrammingError, match="uncommitted changes") as err:
        with c.write("main"):
            pass
    assert err.value.sqlstate == "25001"
    assert c.in_transaction  # left as it was: nothing lost, nothing written
    c.rollback()
    with c.write("main") as w:
        w.execute(UPDATE, ("main",))
    assert c.execute("SELECT count(*) FROM items").fetchone() == (0,)
    c.rollback()


def test_a_failing_alert_look_up_starts_nothing(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    old = pg_db.connect(version=0, required=0)
    with pytest.raises(postgres.Refused):
        with old.write("main") as w:
            w.execute(UPDATE, ("main",))

    def broken(conn, ledger):  # type: ignore[no-untyped-def]
        raise LookupError("the alert list is unreadable")

    with pytest.raises(LookupError, match="unreadable"):
        with c.write("main", existing_alerts=broken):
            raise AssertionError("the block ran")
    # The write's transaction was rolled back: the writer lock is free for the next one.
    assert not c.in_transaction
    other = pg_db.connect()
    with other.write("main", existing_alerts=[]) as w:
        assert [r.pid for r in w.refused] == [old.pid] and len(w.alerts) == 1
        w.execute(UPDATE, ("main",))
    assert isinstance(w.refused[0], postgres.RefusedWriter)
    old.close()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes came with Python 3.11")
def test_rollback_failure_is_noted_on_the_blocks_error(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = _ready(pg_db)
    admin = pg_db.connect()
    with pytest.raises(RuntimeError) as err:
        with c.write("main"):
            # The server ends the session under the write (waiting until it is gone, so the
            # rollback cannot slip in first); then the block fails.
            assert admin.execute(f"SELECT pg_terminate_backend({c.pid}, 5000)").fetchone() == (True,)
            admin.commit()
            raise RuntimeError("the block failed")
    # The block's own error stays what it is, and carries the rollback's failure.
    notes = getattr(err.value, "__notes__", [])
    assert len(notes) == 1, notes
    assert notes[0].startswith("writerlock: the rollback failed too: the database server ended")
    assert isinstance(err.value, RuntimeError) and not isinstance(err.value, sqlite3.Error)
