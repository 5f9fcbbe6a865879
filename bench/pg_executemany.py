"""executemany of ROWS rows in one transaction: writerlock.postgres against psycopg 3.

    python bench/pg_executemany.py URL [ROWS] [ROUNDS]

make bench runs it as scenario 10 (writerlock-bench reads its last line); it runs by hand
too. Both drivers insert the same (int, text, float8) rows into a table of their own,
`executemany` then `commit()`, in ROUNDS alternated rounds (default 5): each round times
one run of each driver, the order reversed every other round, so drift in the machine's
speed does not favour either. psycopg runs its executemany as it does by default
(pipelined since 3.1); writerlock sends a thousand statements to a message. Every run's
rows are counted afterwards (a run that stored another count fails the script).

Prints one JSON line: the rows, the rounds, each driver's seconds per round, and per round
psycopg's seconds divided by writerlock's (above 1: writerlock is faster).
"""

import json
import statistics
import sys
import time


def timed(conn, table, sql, rows):
    """One run: empty the table, then executemany and commit, timed."""
    cur = conn.cursor()
    cur.execute(f"TRUNCATE {table}")
    conn.commit()
    start = time.perf_counter()
    cur.executemany(sql, rows)
    conn.commit()
    took = time.perf_counter() - start
    stored = conn.cursor().execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    conn.commit()
    if stored != len(rows):
        sys.exit(f"pg_executemany.py: {table}: {stored} rows stored, {len(rows)} expected")
    return took


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    url = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    import psycopg
    from writerlock import postgres

    setup = postgres.connect(url, autocommit=True)
    for table in ("bench_many_writerlock", "bench_many_psycopg"):
        setup.execute(f"DROP TABLE IF EXISTS {table}")
        setup.execute(f"CREATE TABLE {table} (id int, name text, v float8)")
    rows = [(i, f"name {i}", i * 0.5) for i in range(n)]
    drivers = {
        "writerlock": (
            postgres.connect(url),
            "bench_many_writerlock",
            "INSERT INTO bench_many_writerlock VALUES (?, ?, ?)",
        ),
        "psycopg": (
            psycopg.connect(url),
            "bench_many_psycopg",
            "INSERT INTO bench_many_psycopg VALUES (%s, %s, %s)",
        ),
    }
    # One warm-up run each: connection, statement and type caches.
    for conn, table, sql in drivers.values():
        timed(conn, table, sql, rows[:100])
    seconds = {name: [] for name in drivers}
    for r in range(rounds):
        order = ["writerlock", "psycopg"] if r % 2 == 0 else ["psycopg", "writerlock"]
        for name in order:
            seconds[name].append(timed(*drivers[name], rows))
    for conn, _, _ in drivers.values():
        conn.close()
    for table in ("bench_many_writerlock", "bench_many_psycopg"):
        setup.execute(f"DROP TABLE {table}")
    setup.close()
    speed = [p / w for p, w in zip(seconds["psycopg"], seconds["writerlock"])]
    print(
        json.dumps(
            {
                "rows": n,
                "rounds": rounds,
                "seconds": seconds,
                "median_s": {k: statistics.median(v) for k, v in seconds.items()},
                "best_s": {k: min(v) for k, v in seconds.items()},
                "speed_over_psycopg": speed,
                "median_speed_over_psycopg": statistics.median(speed),
            }
        )
    )


if __name__ == "__main__":
    main()
