"""One writer process of a timed SQLite run, written in Python (make bench's 16-writer
figure from Python). It speaks the bench's worker protocol (bench/src/worker.rs):

    python bench/hosts/py_worker.py CONFIG

CONFIG is the worker's JSON configuration (mode, db, id, duration_ns). The worker opens its
connection (autocommit mode, synchronous=NORMAL), prints a ready line, reads the start
instant (CLOCK_MONOTONIC nanoseconds) on stdin, sleeps until then and writes one-row INSERT
transactions until duration_ns has passed, recording when each was asked for, when its
BEGIN returned and when its commit returned. It prints a done line, waits until stdin
closes, and prints one JSON line with those times (nanoseconds after the start instant).

Modes: immediate (conn.execute("BEGIN IMMEDIATE") ... "COMMIT", SQLite's busy handler with
a 25 s busy timeout) and queue-handoff (queue.begin(conn) ... queue.commit(conn), the
default 25 s wait).
"""

import json
import sqlite3
import sys
import time

INSERT = "INSERT INTO t (writer, seq, payload) VALUES (?, ?, ?)"
PAYLOAD = "x" * 64


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def main(argv):
    cfg = json.loads(argv[1])
    mode, path, wid = cfg["mode"], cfg["db"], cfg["id"]
    conn = sqlite3.connect(path, timeout=25.0, isolation_level=None)
    conn.execute("PRAGMA synchronous=NORMAL")
    queue = None
    if mode == "queue-handoff":
        import writerlock

        queue = writerlock.WriterQueue(path)
    elif mode != "immediate":
        raise SystemExit(f"py_worker.py: mode {mode} is not written in Python")
    print(json.dumps({"ready": __import__("os").getpid()}), flush=True)
    start = int(sys.stdin.readline())
    while True:
        left = start - now()
        if left <= 0:
            break
        time.sleep(left / 1e9)
    end = start + int(cfg["duration_ns"])
    call, granted, released, failures = [], [], [], []
    seq = 0
    execute = conn.execute
    while True:
        t0 = now()
        if t0 >= end:
            break
        try:
            if queue is None:
                execute("BEGIN IMMEDIATE")
                t1 = now()
                execute(INSERT, (wid, seq, PAYLOAD))
                execute("COMMIT")
            else:
                queue.begin(conn)
                t1 = now()
                execute(INSERT, (wid, seq, PAYLOAD))
                queue.commit(conn)
            t2 = now()
            call.append(t0 - start)
            granted.append(t1 - start)
            released.append(t2 - start)
        except sqlite3.Error as err:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if queue is not None and queue.holding():
                queue.release()
            failures.append({"call": t0 - start, "at": now() - start, "busy": "busy" in str(err) or "locked" in str(err), "error": str(err)})
        seq += 1
    print(json.dumps({"done": len(granted)}), flush=True)
    sys.stdin.read()
    print(json.dumps({
        "id": wid,
        "mode": mode,
        "pid": __import__("os").getpid(),
        "call": call,
        "granted": granted,
        "released": released,
        "turn_start": [],
        "turn_end": [],
        "failures": failures,
        "censored": [],
    }), flush=True)
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
