"""executemany of ROWS rows in one transaction: writerlock.postgres against psycopg 3 by hand.

    python bench/pg_executemany.py URL [ROWS] [REPEATS]

Both insert the same (int, text, float8) rows into a fresh table and commit; each is run
REPEATS times (default 5) and the best and median seconds are printed as one JSON line
per driver, then the ratio of the medians. psycopg runs its executemany as it does by
default (pipelined since 3.1); writerlock sends a thousand statements to a message.
"""

import json
import statistics
import sys
import time


def run(label, connect, sql, rows, repeats):
    times = []
    conn = connect()
    for _ in range(repeats):
        cur = conn.cursor()
        cur.execute("TRUNCATE bench_many")
        conn.commit()
        start = time.perf_counter()
        cur.executemany(sql, rows)
        conn.commit()
        times.append(time.perf_counter() - start)
    count = conn.cursor().execute("SELECT count(*) FROM bench_many").fetchone()[0]
    conn.close()
    if count != len(rows):
        sys.exit(f"{label}: {count} rows stored, {len(rows)} expected")
    out = {"driver": label, "rows": len(rows), "best": min(times), "median": statistics.median(times)}
    print(json.dumps(out))
    return out


def main():
    url = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    import psycopg
    from writerlock import postgres

    setup = postgres.connect(url, autocommit=True)
    setup.execute("DROP TABLE IF EXISTS bench_many")
    setup.execute("CREATE TABLE bench_many (id int, name text, v float8)")
    setup.close()
    rows = [(i, f"name {i}", i * 0.5) for i in range(n)]
    ours = run("writerlock", lambda: postgres.connect(url), "INSERT INTO bench_many VALUES (?, ?, ?)", rows, repeats)
    theirs = run("psycopg", lambda: psycopg.connect(url), "INSERT INTO bench_many VALUES (%s, %s, %s)", rows, repeats)
    print(json.dumps({"psycopg_over_writerlock": theirs["median"] / ours["median"]}))
    drop = postgres.connect(url, autocommit=True)
    drop.execute("DROP TABLE bench_many")
    drop.close()


if __name__ == "__main__":
    main()
