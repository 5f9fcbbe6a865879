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


def own_settings(url: str) -> float:
    # The session settings are typed keywords, on every way of opening a session.
    conn = postgres.connect(url, lock_wait=5.0, lock_tries=2, keepalives=False)
    conn.close()
    options = postgres.session_options(statement_timeout=30.0, tcp_user_timeout=20.0)
    pool = postgres.Pool(url, 2, idle_in_transaction=5.0)
    assert pool.size == 2 and options
    return postgres.LOCK_WAIT


def through_the_package(url: str) -> int:
    # writerlock.postgres imports on first use, and is typed as the submodule.
    with writerlock.postgres.connect(url) as conn:
        return conn.pid


def lock_holder(path: str) -> Optional[int]:
    from writerlock import _native

    holder = _native.lock_status(path)["holder"]
    return None if holder is None else holder["pid"]
