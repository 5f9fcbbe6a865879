"""A transaction the queue began but the host ended (``with conn:``, the caller's own
``COMMIT`` or ``ROLLBACK``, a script) gives the turn back at once: another process gets it, this
connection's next ``begin()`` works and its busy timeout is its own again. A ``COMMIT`` that
SQLite refuses keeps the transaction, and the turn with it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Callable, Dict

import pytest

import writerlock
from test_sqlite_exclusion import end, probe, python
from workers import setup_database


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    setup_database(path)
    return path


def with_block(conn: sqlite3.Connection) -> None:
    with conn:
        conn.execute("INSERT INTO rows (worker, i) VALUES (1, 1)")


def own_commit(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO rows (worker, i) VALUES (1, 1)")
    conn.execute("COMMIT")


def connection_commit(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO rows (worker, i) VALUES (1, 1)")
    conn.commit()


def script_commit(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO rows (worker, i) VALUES (1, 1)")
    # executescript() commits a pending transaction before it runs the script.
    conn.executescript("SELECT 1;")


def own_rollback(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO rows (worker, i) VALUES (1, 1)")
    conn.execute("ROLLBACK")


ENDINGS: Dict[str, Callable[[sqlite3.Connection], None]] = {
    "with conn:": with_block,
    "its own COMMIT": own_commit,
    "conn.commit()": connection_commit,
    "a script that commits": script_commit,
    "its own ROLLBACK": own_rollback,
}

WAITER = """
    import sys, time, writerlock
    q = writerlock.WriterQueue(sys.argv[1])
    print("ready", flush=True)
    q.acquire(wait=20.0)
    print(time.monotonic_ns(), flush=True)
    q.release()
"""


@pytest.mark.parametrize("isolation_level", ["", None], ids=["default mode", "autocommit"])
@pytest.mark.parametrize("how", list(ENDINGS))
def test_a_transaction_the_host_ends_gives_the_turn_back(
    db: str, how: str, isolation_level: "str | None"
) -> None:
    conn = sqlite3.connect(db, timeout=30, isolation_level=isolation_level)
    q = writerlock.WriterQueue(db)
    q.begin(conn, wait=5.0)
    assert probe(db) == "held"
    waiter = python(WAITER, db)
    try:
        assert waiter.stdout is not None
        assert waiter.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # the waiter is in line
        ENDINGS[how](conn)
        ended = time.monotonic_ns()
        line = waiter.stdout.readline().strip()
        assert line, "the other process never got the turn"
        handed = (int(line) - ended) / 1e6
        print(f"{how}: the waiting process had the turn {handed:.2f} ms after the host ended it")
        assert waiter.wait(timeout=10) == 0
    finally:
        end(waiter)
    assert not q.holding
    assert not conn.in_transaction
    # The connection's own busy timeout (timeout=30) is back.
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    # The next begin works, and the queue's commit ends it as before.
    q.begin(conn, wait=5.0)
    conn.execute("INSERT INTO rows (worker, i) VALUES (2, 2)")
    q.commit(conn)
    assert not q.holding
    rows = [r[0] for r in conn.execute("SELECT worker FROM rows ORDER BY worker")]
    assert rows == ([2] if how == "its own ROLLBACK" else [1, 2])
    conn.close()


def test_a_commit_sqlite_refuses_keeps_the_turn_while_the_transaction_stays_open(db: str) -> None:
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    conn.execute(
        "CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    q = writerlock.WriterQueue(db)
    q.begin(conn, wait=5.0)
    conn.execute("INSERT INTO child VALUES (7)")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("COMMIT")  # the deferred foreign key fails: the transaction stays open
    assert conn.in_transaction
    assert q.holding
    assert probe(db) == "held"
    conn.execute("ROLLBACK")
    assert not q.holding
    assert probe(db) == "free"
    # And the queue's own refused COMMIT keeps it too, as before.
    q.begin(conn, wait=5.0)
    conn.execute("INSERT INTO child VALUES (8)")
    with pytest.raises(sqlite3.Error):
        q.commit(conn)
    assert q.holding and probe(db) == "held"
    q.rollback(conn)
    assert not q.holding and probe(db) == "free"
    conn.close()


def test_a_queue_dropped_mid_turn_leaves_hooks_that_harm_nothing(db: str) -> None:
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    q = writerlock.WriterQueue(db)
    q.begin(conn, wait=5.0)
    del q  # the turn goes with the handle; the connection still has the queue's hooks
    assert probe(db) == "free"
    conn.execute("INSERT INTO rows (worker, i) VALUES (3, 3)")
    conn.execute("COMMIT")  # the hooks find no turn and clear themselves
    q2 = writerlock.WriterQueue(db)
    q2.begin(conn, wait=5.0)
    conn.execute("INSERT INTO rows (worker, i) VALUES (4, 4)")
    q2.commit(conn)
    assert count_rows(db) == 2
    conn.close()


def count_rows(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM rows").fetchone()[0])
    finally:
        conn.close()
