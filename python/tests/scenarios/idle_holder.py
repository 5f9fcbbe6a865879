"""The seed's writer-lock scenario at the real defaults, through Python.

One connection takes the writer lock and sits idle in its transaction while a second writer
waits; the server ends the idle holder after 15 s (idle_in_transaction_session_timeout) and
the second writer commits within 30 s; a psycopg 3 writer opened with session_options()
waits at the same time through write(conn) and commits too. Prints one JSON line with what
happened.
"""

import sqlite3
import threading
import time

import psycopg

from _common import create_database, drop_database, report

from writerlock import postgres

url = create_database("idle")
try:
    holder = postgres.connect(url)
    postgres.setup_schema(holder)
    holder.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    holder.commit()
    holding = holder.write("main")
    holding.__enter__()
    holding.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    holder_pid = holder.pid  # the holder now sits idle inside its transaction

    driver_result = {}

    def driver_writer() -> None:
        conn = psycopg.connect(url, **postgres.session_options())
        begun = time.monotonic()
        with postgres.write(conn, "main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
            driver_result["waits"] = w.waits
        driver_result["elapsed"] = time.monotonic() - begun
        conn.close()

    thread = threading.Thread(target=driver_writer)
    thread.start()
    writer = postgres.connect(url)
    start = time.monotonic()
    with writer.write("main") as w:
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
        waits = w.waits
    elapsed = time.monotonic() - start
    thread.join(timeout=60)

    alive = writer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = ?", (holder_pid,)
    ).fetchone()[0]
    generation = writer.execute("SELECT generation FROM ledgers WHERE slug = 'main'").fetchone()[0]
    try:
        holder.execute("SELECT 1")
        holder_error = None
    except sqlite3.OperationalError as err:  # the ended session fails its next statement
        holder_error = {"type": type(err).__name__, "message": str(err), "sqlstate": err.sqlstate}
    report(
        {
            "elapsed": elapsed,
            "waits": waits,
            "holder_alive": alive,
            "generation": generation,
            "holder_error": holder_error,
            "holder_closed": holder.closed,
            "driver": driver_result,
        }
    )
    writer.close()
finally:
    drop_database(url)
