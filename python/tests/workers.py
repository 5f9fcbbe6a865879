"""Functions run in other processes by the SQLite tests (importable by spawned children)."""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from typing import Optional, Union

import writerlock


def setup_database(path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS counter (n INTEGER NOT NULL)")
    conn.execute("INSERT INTO counter SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM counter)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS rows (worker INTEGER, i INTEGER, pid INTEGER, "
        "t0 INTEGER, t1 INTEGER)"
    )
    conn.close()


def write_rows(
    queue: Union[writerlock.WriterQueue, str],
    path: str,
    worker: int,
    count: int,
    hold: float = 0.002,
    wait: float = 60.0,
) -> int:
    """``count`` read-modify-write transactions through the queue; returns how many
    committed. The connection has no busy timeout of its own (``timeout=0``): without the
    queue, concurrent writers fail at once with "database is locked"."""
    if isinstance(queue, str):
        queue = writerlock.WriterQueue(queue)
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    done = 0
    for i in range(count):
        with queue.transaction(conn, wait=wait):
            t0 = time.monotonic_ns()
            n = conn.execute("SELECT n FROM counter").fetchone()[0]
            time.sleep(hold)
            conn.execute("UPDATE counter SET n = ?", (n + 1,))
            conn.execute(
                "INSERT INTO rows (worker, i, pid, t0, t1) VALUES (?, ?, ?, ?, ?)",
                (worker, i, os.getpid(), t0, time.monotonic_ns()),
            )
        done += 1
    conn.close()
    return done


def queued_statements(path: str, worker: int, count: int) -> int:
    """``count`` single queued INSERT statements (no transaction) through a new handle."""
    queue = writerlock.WriterQueue(path)
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    for i in range(count):
        queue.execute(
            conn,
            "INSERT INTO rows (worker, i, pid) VALUES (?, ?, ?)",
            (worker, i, os.getpid()),
            wait=30.0,
        )
    conn.close()
    return count


def hold_turn(path: str, wait_for_line: bool = True, seconds: Optional[float] = None) -> None:
    """Takes the turn, prints ``holding <pid>`` and holds it until stdin gets a line (or for
    ``seconds``). Run as ``python workers.py hold PATH``."""
    queue = writerlock.WriterQueue(path)
    conn = sqlite3.connect(path, isolation_level=None)
    queue.begin(conn)
    conn.execute("UPDATE counter SET n = n")
    print(f"holding {os.getpid()}", flush=True)
    if seconds is not None:
        time.sleep(seconds)
    elif wait_for_line:
        sys.stdin.readline()
    queue.commit(conn)
    print("released", flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "hold":
        hold_turn(sys.argv[2])
    else:
        sys.exit("usage: workers.py hold PATH")
