"""``python -m writerlock``: the ``status`` and ``demo`` commands of the package itself, in
Python over the installed module, for machines without the ``writerlock`` command.

    python -m writerlock status DB [--json]
    python -m writerlock demo [--processes 64] [--writes 3] [--hold-ms 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import TRANSACTION_WAIT, WriterQueue, __version__, _native


def status(path: str) -> Dict[str, Any]:
    """Who holds the writer lock of the database at ``path`` and who waits, as a dict: the
    facts ``writerlock status --json`` shows, read by the same core after the same check of
    the path (``ValueError`` for an in-memory database or a file that is not a SQLite
    database, ``FileNotFoundError`` when neither it nor its lock file exists, with the
    command's messages)."""
    return {"database": path, **_native.lock_status(path)}


def _pids(pids: Sequence[int]) -> str:
    return "pid " + ", ".join(str(p) for p in pids)


def print_status(s: Dict[str, Any]) -> None:
    def line(label: str, text: str) -> None:
        print(f"{label:<12} {text}")

    fs = s["filesystem"]
    line("database", s["database"])
    line("file system", fs["name"] + (f" ({fs['magic']})" if fs["magic"] else ""))
    if not s["lock_file"]["exists"]:
        line(
            "writer lock",
            f"no writer has used the queue on this database yet: {s['lock_file']['path']} "
            "does not exist",
        )
    elif s["holder"] is None:
        line("writer lock", "free: nobody holds it")
    else:
        h = s["holder"]
        if h["held_for_s"] is not None:
            held = f"held for {h['held_for_s']:.3f} s (since its acquisition stamped on the hand-off page)"
        else:
            held = "held for an unknown time"
        line("writer lock", f"held by pid {h['pid']}, {held}")
        if h["command"]:
            line("  command", h["command"])
        elif not h["alive"]:
            line("  command", "the process that took the lock has exited (a child it forked holds it)")
        if h["held_for_s"] is None and h["process_age_s"] is not None:
            line(
                "  held for",
                f"not recorded on the hand-off page; the process started "
                f"{h['process_age_s']:.1f} s ago, so at most that",
            )
    if s["waiting"] == 0:
        line("waiting", "nobody")
    else:
        n = s["waiting"]
        line("waiting", f"{n} writer{'s' if n > 1 else ''} ({_pids([w['pid'] for w in s['queue']])})")
    if s["blocked"]:
        line("blocked", f"{len(s['blocked'])} in a blocking flock() on the lock file, outside the queue ({_pids(s['blocked'])})")
    if s["outside"]:
        outside = [p["pid"] for p in s["outside"]]
        line("outside", f"SQLite's write lock is held outside the queue by {_pids(outside)}")
    if fs["warning"]:
        line("WARNING", fs["warning"])


# ---------------------------------------------------------------------------------------------
# demo

MODES = ("queue", "plain", "immediate")


def _publish_all(path: str, mode: str, writes: int, hold: float, busy_ms: int) -> List[Dict[str, Any]]:
    """One worker process: ``writes`` publishes (read the counter, hold, write it back, log)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=busy_ms / 1000.0)
    queue = WriterQueue(path)
    out = []
    for _ in range(writes):
        start = time.monotonic()
        error = None
        try:
            if mode == "queue":
                with queue.transaction(conn, wait=TRANSACTION_WAIT):
                    _work(conn, hold)
            else:
                conn.execute("BEGIN" if mode == "plain" else "BEGIN IMMEDIATE")
                try:
                    _work(conn, hold)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.Error as err:
            error = str(err)
        elapsed = time.monotonic() - start
        out.append({"ok": error is None, "error": error, "wait": max(0.0, elapsed - hold)})
    conn.close()
    return out


def _work(conn: sqlite3.Connection, hold: float) -> None:
    n = conn.execute("SELECT n FROM counter").fetchone()[0]
    time.sleep(hold)
    conn.execute("UPDATE counter SET n = ?", (n + 1,))
    conn.execute("INSERT INTO log (pid, n) VALUES (?, ?)", (os.getpid(), n + 1))


def _quantile(values: List[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def demo(processes: int, writes: int, hold_ms: int, busy_ms: int) -> List[Dict[str, Any]]:
    """Runs the three modes on a temporary database; returns one result per mode."""
    results = []
    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="writerlock-demo-") as tmp:
        for mode in MODES:
            path = os.path.join(tmp, f"{mode}.db")
            db = sqlite3.connect(path, isolation_level=None)
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("CREATE TABLE counter (n INTEGER NOT NULL)")
            db.execute("INSERT INTO counter VALUES (0)")
            db.execute("CREATE TABLE log (pid INTEGER, n INTEGER)")
            start = time.monotonic()
            with ctx.Pool(processes) as pool:
                runs = pool.starmap(
                    _publish_all, [(path, mode, writes, hold_ms / 1000.0, busy_ms)] * processes
                )
            total = time.monotonic() - start
            records = [r for run in runs for r in run]
            committed = sum(r["ok"] for r in records)
            counter = db.execute("SELECT n FROM counter").fetchone()[0]
            db.close()
            waits = [r["wait"] for r in records if r["ok"]]
            errors = sorted({r["error"] for r in records if r["error"]})
            results.append(
                {
                    "mode": mode,
                    "committed": committed,
                    "publishes": len(records),
                    "failed": len(records) - committed,
                    "lost_updates": committed - counter,
                    "total_s": total,
                    "wait_p50_s": _quantile(waits, 0.5),
                    "wait_p99_s": _quantile(waits, 0.99),
                    "wait_max_s": max(waits) if waits else 0.0,
                    "errors": errors[:3],
                }
            )
    return results


def print_demo(results: List[Dict[str, Any]]) -> None:
    print(f"{'mode':<10} {'committed':>9} {'failed':>7} {'total':>9} {'wait p50':>9} {'wait p99':>9} {'wait max':>9}")
    for r in results:
        print(
            f"{r['mode']:<10} {r['committed']:>5}/{r['publishes']:<3} {r['failed']:>7} "
            f"{r['total_s']:>7.2f} s {r['wait_p50_s'] * 1000:>6.1f} ms {r['wait_p99_s'] * 1000:>6.1f} ms "
            f"{r['wait_max_s'] * 1000:>6.1f} ms"
        )
    print(
        "queue: writerlock's write queue; plain: deferred BEGIN with the busy timeout; "
        "immediate: BEGIN IMMEDIATE with SQLite's busy handler alone"
    )
    for r in results:
        for text in r["errors"]:
            print(f"{r['mode']}: {text}")


def _whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``, or a message saying so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range: give {low} to {high}")
        return value

    return parse


_positive = _whole_number(1, 1024)
_non_negative = _whole_number(0, 600_000)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m writerlock",
        description="The SQLite write queue's status and demo, from the installed Python package.",
    )
    parser.add_argument("--version", action="version", version=f"writerlock {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser(
        "status",
        help="who holds a database's writer lock and who waits",
        description="Shows who holds the writer lock of a SQLite database now (pid, command, "
        "hold time when the hand-off page records it), how many writers wait, writers outside "
        "the queue, and warns when the file system is not a local disk. Reads only.",
    )
    st.add_argument("db", help="the SQLite database file")
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    de = sub.add_parser(
        "demo",
        help="processes publishing at once: the queue vs plain BEGIN vs BEGIN IMMEDIATE",
        description="Starts PROCESSES processes that each publish WRITES times (read a counter, "
        "hold, write it back) on a temporary database, through the queue, with a deferred "
        "BEGIN and with BEGIN IMMEDIATE, and compares what committed.",
    )
    de.add_argument(
        "--processes", type=_positive, default=64, help="processes publishing at once (default 64)"
    )
    de.add_argument("--writes", type=_positive, default=3, help="publishes per process (default 3)")
    de.add_argument(
        "--hold-ms",
        type=_non_negative,
        default=5,
        help="how long each publish holds its transaction, in ms (default 5)",
    )
    de.add_argument(
        "--busy-timeout-ms",
        type=_non_negative,
        default=5000,
        help="SQLite's busy timeout of each connection, the one wait of the plain and BEGIN "
        "IMMEDIATE modes, in ms (default 5000)",
    )
    de.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "status":
            try:
                s = status(args.db)
            except ValueError as err:  # refused as the command refuses it: exit status 1
                return _failed(args, str(err), 1)
            if args.json:
                print(json.dumps(s, indent=2))
            else:
                print_status(s)
        else:
            results = demo(args.processes, args.writes, args.hold_ms, args.busy_timeout_ms)
            if args.json:
                print(json.dumps(results, indent=2))
            else:
                print_demo(results)
    except OSError as err:
        return _failed(args, str(err), 1)
    return 0


def _failed(args: argparse.Namespace, message: str, exit_status: int) -> int:
    """Reports a failure as the ``writerlock`` command does: one line on stderr, and with
    ``--json`` the same text as a JSON error object on stdout; returns the exit status."""
    print(f"python -m writerlock {args.command}: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps({"error": {"message": message, "exit_status": exit_status}}))
    return exit_status


if __name__ == "__main__":
    sys.exit(main())
