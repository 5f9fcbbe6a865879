"""A typed program using writerlock, checked with ``mypy --strict`` by test_typing.py.

Every function returns from inside a ``with`` block: mypy reports "Missing return
statement" there when a context manager's ``__exit__`` is typed as returning ``bool``
(it might swallow the exception), so this file fails to check unless every ``__exit__``
in the stubs says ``Literal[False]``.
"""

from __future__ import annotations

import sqlite3
from typing import List, Optional

import writerlock
from writerlock import postgres


def queued_count(path: str) -> int:
    conn = sqlite3.connect(path, isolation_level=None)
    queue = writerlock.WriterQueue.for_connection(conn)
    with queue.transaction(conn, wait=5.0) as c:
        row = c.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return int(row[0])


def own_begin(path: str) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    queue = writerlock.WriterQueue(path, strategy="poll")
    with queue.turn(wait=5.0) as turn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("COMMIT")
        return turn.waited


def one_statement(path: str) -> Optional[int]:
    conn = sqlite3.connect(path, isolation_level=None)
    queue = writerlock.WriterQueue(path)
    cursor = queue.execute(conn, "CREATE TABLE IF NOT EXISTS t (x)", wait=2.0)
    try:
        queue.acquire(wait=1.0)
    except writerlock.Busy as err:
        return err.holder_pid
    finally:
        if queue.holding:
            queue.release()
    return cursor.rowcount


def settings(url: str) -> Optional[str]:
    with postgres.connect(url) as conn:
        return conn.show("lock_timeout")


def generation(url: str, ledger: str) -> List[str]:
    conn = postgres.connect(url)
    with conn.write(ledger) as w:
        w.execute("SELECT 1")
        return w.alerts


def generation_with_the_function(url: str, ledger: str) -> int:
    conn = postgres.connect(url)
    with postgres.write(conn, ledger) as w:
        return w.waits


def version() -> str:
    return writerlock.__version__
