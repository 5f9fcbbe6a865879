"""What a write costs when there is nothing to report: the alert rules (and the caller's
``existing_alerts`` look-up) run only when a refused writer is connected, and a refusal
made after a quiet write is still named by the next one."""

from __future__ import annotations

from writerlock import postgres

UPDATE = "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?"


def test_existing_alerts_is_asked_only_when_a_refused_writer_is_connected(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(c)
    c.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    asked = []

    def existing(conn, ledger):  # type: ignore[no-untyped-def]
        asked.append(ledger)
        return []

    for _ in range(3):
        with c.write("main", existing_alerts=existing) as w:
            w.execute(UPDATE, ("main",))
            assert w.refused == [] and w.alerts == []
    assert asked == []  # nothing to report: the look-up never ran

    # A writer below the floor is refused after those quiet writes, and stays connected.
    old = pg_db.connect(version=0, required=0)
    try:
        with old.write("main") as w:
            w.execute(UPDATE, ("main",))
    except postgres.Refused as err:
        assert (err.version, err.floor) == (0, 1)
    else:
        raise AssertionError("a version 0 writer was not refused")
    with c.write("main", existing_alerts=existing) as w:
        assert [r.pid for r in w.refused] == [old.pid]
        assert len(w.alerts) == 1 and "was refused" in w.alerts[0]
    assert asked == ["main"]
    old.close()
