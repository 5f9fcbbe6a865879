"""The writer floor through Python, against a real server: the refusal caught as
sqlite3.DatabaseError with the generation unchanged and one alert offered on the next write,
the old plain client (psql, no writer version) refused and then passing when it records its
rows, the floor never lowered, and the alert rules."""

from __future__ import annotations

import sqlite3

import pytest

from conftest import generation, wait_until
from writerlock import postgres

REFUSAL_0_1 = (
    "ledger writer version 0 is below version 1, the oldest the shared database allows; "
    "update its code and restart it"
)
REFUSAL_1_2 = (
    "ledger writer version 1 is below version 2, the oldest the shared database allows; "
    "update its code and restart it"
)


def _ledger(conn) -> None:  # type: ignore[no-untyped-def]
    postgres.setup_schema(conn)
    conn.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0), ('other', 0)")


def test_current_writer_stores_floor_1_and_writes(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    assert postgres.stored_floor(c) is None
    _ledger(c)
    assert postgres.stored_floor(c) == 1
    with c.write("main") as w:
        assert w.floor == 1
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert generation(c) == 1


def test_refusal_is_a_database_error_and_offers_one_alert(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    _ledger(c)
    with c.write("main") as w:
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    c.execute("UPDATE writer_floor SET version = 2 WHERE name = 'ledger'")

    caught = None
    try:
        with c.write("main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    except sqlite3.DatabaseError as err:  # what the ledger's handlers catch
        caught = err
    assert isinstance(caught, postgres.Refused)
    assert not isinstance(caught, sqlite3.OperationalError)
    assert str(caught) == REFUSAL_1_2
    assert caught.code == "LW001" and caught.sqlstate == "LW001"
    assert (caught.version, caught.floor) == (1, 2)
    assert not c.in_transaction
    assert generation(c) == 1  # unchanged

    # The refused session stays connected: the next allowed write offers one alert.
    newer = pg_db.connect(version=2, required=2)
    expected = f"The ledger writer at 127.0.0.1 was refused: {REFUSAL_1_2}"
    with newer.write("main") as w:
        assert len(w.refused) == 1
        refused = w.refused[0]
        assert (refused.writer, refused.pid, refused.version, refused.floor) == ("127.0.0.1", c.pid, 1, 2)
        assert refused.alert_text == expected and refused.refusal == REFUSAL_1_2
        assert w.alerts == [expected]
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert generation(c) == 2
    # Not raised twice while that alert is open on the ledger; raised on another ledger.
    with newer.write("main", existing_alerts=[postgres.Alert(expected)]) as w:
        assert w.alerts == []
    with newer.write("main", existing_alerts=lambda conn, ledger: [(expected, False)]) as w:
        assert w.alerts == []  # a closed one still in the list
    with newer.write("other", existing_alerts=[]) as w:
        assert w.alerts == [expected]
    assert [r.pid for r in postgres.refused_writers(newer)] == [c.pid]

    # Once the refused writer disconnects, no alert any more.
    c.close()
    assert wait_until(lambda: postgres.refused_writers(newer) == [])
    with newer.write("main") as w:
        assert w.alerts == [] and w.refused == []


def test_old_plain_connection_is_refused_then_passes_with_its_rows(pg_db, psql_factory) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    _ledger(c)
    old = psql_factory(pg_db.url)  # psql sends no writer version: old code, version 0
    assert old.run("SELECT current_setting('agentihooks.ledger_writer_version', true) IS NULL").strip() == "t"

    out = old.run("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert f"ERROR:  {REFUSAL_0_1}" in out
    assert generation(c) == 0

    # While it stays connected, the next allowed write names it.
    with c.write("main") as w:
        assert w.alerts == [f"The ledger writer at 127.0.0.1 was refused: {REFUSAL_0_1}"]

    # The same old connection passes when it records its changed rows first.
    out = old.run(
        "BEGIN; "
        "INSERT INTO row_changes (slug, generation, row_key) VALUES ('main', 1, 'r1'); "
        "UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'; "
        "COMMIT"
    )
    assert "ERROR" not in out, out
    assert generation(c) == 1


def test_floor_is_never_lowered(pg_db) -> None:  # type: ignore[no-untyped-def]
    high = pg_db.connect(version=3, required=3)
    postgres.setup_schema(high)
    assert postgres.stored_floor(high) == 3
    low = pg_db.connect()
    postgres.setup_schema(low)  # stores its REQUIRED of 1: GREATEST keeps 3
    assert postgres.stored_floor(low) == 3
    with pytest.raises(postgres.Refused) as info:
        with low.write():
            pass
    assert (info.value.version, info.value.floor) == (1, 3)


def test_setup_schema_runs_the_hosts_sql_first(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(
        c,
        extra_sql="CREATE TABLE ledgers (slug text PRIMARY KEY, generation bigint NOT NULL "
        "DEFAULT 0, title text)",
    )
    c.execute("INSERT INTO ledgers (slug, title) VALUES ('main', 'Main')")
    assert c.execute("SELECT title FROM ledgers").fetchone() == ("Main",)


def test_alert_rules_without_a_database() -> None:
    a = postgres.RefusedWriter("10.0.0.5", 1, 0, 1)
    b = postgres.RefusedWriter("10.0.0.6", 2, 0, 1)
    a_again = ("10.0.0.5", 3, 0, 1)
    text_a = f"The ledger writer at 10.0.0.5 was refused: {REFUSAL_0_1}"
    assert a.alert_text == text_a == postgres.alert_text("10.0.0.5", 0, 1)
    assert postgres.refusal_message(0, 1) == REFUSAL_0_1
    assert postgres.new_alerts([a, b, a_again], []) == [text_a, b.alert_text]
    assert postgres.new_alerts([a], [text_a]) == []
    assert postgres.new_alerts([a], [{"text": text_a, "open": False}]) == []
    assert postgres.new_alerts([postgres.RefusedWriter("10.0.0.5", 1, 0, 2)], [(text_a, False)]) != []
    closed = [(text_a, False)] + [(f"other {i}", False) for i in range(postgres.KEPT_CLOSED_ALERTS)]
    assert postgres.new_alerts([a], closed) == [text_a]  # aged out of the kept 200
    with pytest.raises(TypeError):
        postgres.new_alerts([a], [42])
    with pytest.raises(TypeError):
        postgres.new_alerts(["not a writer"], [])
