"""Client processes for make bench's Postgres scenario (run by writerlock-bench).

    python pg_clients.py MODE URL CLIENTS SECONDS WRITES

MODE is ``psycopg`` (the ledger write written by hand with psycopg 3: BEGIN, the writer
lock, the floor read, the UPDATE, COMMIT, with the ledger session's startup options and
keepalives) or ``writerlock`` (``writerlock.postgres``'s ``write()`` doing the same
UPDATE). CLIENTS processes connect, do one warm-up write each, then start together and
write for SECONDS seconds (or, with WRITES > 0, exactly WRITES writes each). Prints one
JSON line: ``{"writes": ..., "errors": ..., "seconds": ..., "first_error": ...}``.
"""

import json
import os
import sys
import time

UPDATE_HAND = "UPDATE ledgers SET generation = generation + 1 WHERE slug = %s"
UPDATE_LIB = "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?"
WRITER_LOCK = 1279607879
# The ledger session's settings: the same -c startup options and client keepalives
# writerlock sends.
OPTIONS = (
    "-c lock_timeout=10s -c idle_in_transaction_session_timeout=15s "
    "-c statement_timeout=60s -c agentihooks.ledger_writer_version=1"
)
VERSION = 1


def hand_writer(url, slug):
    import psycopg

    conn = psycopg.connect(
        url,
        options=OPTIONS,
        keepalives=1,
        keepalives_idle=30,
        keepalives_interval=10,
        keepalives_count=3,
    )

    def write():
        # psycopg opens the transaction (BEGIN) before the first statement.
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)" % WRITER_LOCK)
                cur.execute("SELECT version FROM writer_floor WHERE name = 'ledger'")
                row = cur.fetchone()
                if row is not None and VERSION < row[0]:
                    raise RuntimeError("below the writer floor")
                cur.execute(UPDATE_HAND, (slug,))
            conn.commit()
        except BaseException:
            conn.rollback()
            raise

    return write


def library_writer(url, slug):
    from writerlock import postgres

    conn = postgres.connect(url)

    def write():
        with conn.write(slug) as w:
            w.execute(UPDATE_LIB, (slug,))

    return write


def child(mode, url, index, seconds, writes, ready_w, start_r, result_w):
    errors = 0
    done = 0
    first_error = None
    try:
        slug = "bench-%d" % index
        make = hand_writer if mode == "psycopg" else library_writer
        write = make(url, slug)
        write()  # warm-up: connection, schema check, statement caches
    except Exception as e:  # reported, not hidden
        os.write(result_w, (json.dumps({"writes": 0, "errors": 1, "first_error": repr(e)}) + "\n").encode())
        os.write(ready_w, b"r")
        os._exit(0)
    os.write(ready_w, b"r")
    os.read(start_r, 1)  # returns at EOF: the parent closed the pipe, everyone starts
    start = time.monotonic()
    while True:
        if writes > 0:
            if done + errors >= writes:
                break
        elif time.monotonic() - start >= seconds:
            break
        try:
            write()
            if writes > 0 or time.monotonic() - start <= seconds:
                done += 1
        except Exception as e:
            errors += 1
            if first_error is None:
                first_error = repr(e)
    out = {"writes": done, "errors": errors, "first_error": first_error}
    os.write(result_w, (json.dumps(out) + "\n").encode())
    os._exit(0)


def main():
    mode, url, clients, seconds, writes = sys.argv[1:6]
    clients, seconds, writes = int(clients), float(seconds), int(writes)
    if mode not in ("psycopg", "writerlock"):
        sys.exit("pg_clients.py: MODE must be psycopg or writerlock, not %r" % mode)
    # Import in the parent, before forking, so a missing module fails once, clearly.
    if mode == "psycopg":
        import psycopg  # noqa: F401
    else:
        import writerlock.postgres  # noqa: F401
    ready_r, ready_w = os.pipe()
    start_r, start_w = os.pipe()
    result_r, result_w = os.pipe()
    pids = []
    for i in range(clients):
        pid = os.fork()
        if pid == 0:
            os.close(start_w)
            os.close(ready_r)
            os.close(result_r)
            child(mode, url, i, seconds, writes, ready_w, start_r, result_w)
        pids.append(pid)
    os.close(ready_w)
    os.close(start_r)
    os.close(result_w)
    got = 0
    while got < clients:
        b = os.read(ready_r, clients - got)
        if not b:
            break
        got += len(b)
    started = time.monotonic()
    os.close(start_w)
    chunks = []
    while True:
        b = os.read(result_r, 65536)
        if not b:
            break
        chunks.append(b)
    elapsed = time.monotonic() - started
    for pid in pids:
        os.waitpid(pid, 0)
    total = {"writes": 0, "errors": 0, "seconds": elapsed, "first_error": None}
    for line in b"".join(chunks).decode().splitlines():
        r = json.loads(line)
        total["writes"] += r["writes"]
        total["errors"] += r["errors"]
        if total["first_error"] is None and r.get("first_error"):
            total["first_error"] = r["first_error"]
    print(json.dumps(total))


if __name__ == "__main__":
    main()
