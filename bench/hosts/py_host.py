"""One writer from Python's sqlite3, by hand against the queue (make bench's host scenario).

    python bench/hosts/py_host.py DATABASE TRANSACTIONS ROUNDS

One process, one connection (autocommit mode, synchronous=NORMAL) on a WAL
database that already has the bench's table t. Each round runs TRANSACTIONS
one-row INSERT transactions per variant, the variants' order reversed every
other round, and prints one JSON line at the end: the rate of every variant
in every round (transactions per second), by the clock and by the process's CPU time
(which other work on a shared machine disturbs less). Variants:

  hand          conn.execute("BEGIN IMMEDIATE"), the INSERT, conn.execute("COMMIT")
  begin_commit  queue.begin(conn), the INSERT, queue.commit(conn)
  helper        with queue.transaction(conn): the INSERT
"""

import json
import sqlite3
import sys
import time

import writerlock

INSERT = "INSERT INTO t (writer, seq, payload) VALUES (?, ?, ?)"
PAYLOAD = "x" * 64


def hand(conn, queue, n, seq):
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, (0, seq + i, PAYLOAD))
        conn.execute("COMMIT")


def begin_commit(conn, queue, n, seq):
    for i in range(n):
        queue.begin(conn)
        conn.execute(INSERT, (1, seq + i, PAYLOAD))
        queue.commit(conn)


def helper(conn, queue, n, seq):
    for i in range(n):
        with queue.transaction(conn):
            conn.execute(INSERT, (2, seq + i, PAYLOAD))


VARIANTS = [("hand", hand), ("begin_commit", begin_commit), ("helper", helper)]


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    path, txns, rounds = argv[1], int(argv[2]), int(argv[3])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=NORMAL")
    queue = writerlock.WriterQueue.for_connection(conn)
    seq = 0
    # Warm-up: statement caches, the lock files, the page cache.
    for _, run in VARIANTS:
        run(conn, queue, min(txns, 500), seq)
        seq += min(txns, 500)
    results, cpu_results = [], []
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
        rates, cpu_rates = {}, {}
        for name, run in order:
            start, cpu = time.perf_counter_ns(), time.process_time_ns()
            run(conn, queue, txns, seq)
            took, cpu_took = time.perf_counter_ns() - start, time.process_time_ns() - cpu
            seq += txns
            rates[name] = txns / (took / 1e9)
            cpu_rates[name] = txns / (max(cpu_took, 1) / 1e9)
        results.append(rates)
        cpu_results.append(cpu_rates)
    conn.close()
    print(json.dumps({
        "host": "python",
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "rounds": results,
        "cpu_rounds": cpu_results,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
