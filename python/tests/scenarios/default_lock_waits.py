"""Three cancelled waits at the real defaults (lock_timeout 10 s, three tries), through Python.

A holder keeps the writer lock (its idle limit raised so the server does not end it); a
writer with the default settings waits three times 10 seconds and gets WriterLockNotGranted,
caught as sqlite3.OperationalError. Prints one JSON line with what happened.
"""

import sqlite3
import time

from _common import create_database, drop_database, report

from writerlock import postgres

url = create_database("waits")
try:
    writer = postgres.connect(url)
    postgres.setup_schema(writer)
    writer.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")

    holder = postgres.connect(url, idle_in_transaction=120.0)
    holder.begin()
    holder.lock_writer()

    start = time.monotonic()
    caught = None
    try:
        with writer.write("main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    except sqlite3.OperationalError as err:
        caught = {
            "type": type(err).__name__,
            "message": str(err),
            "sqlstate": err.sqlstate,
            "tries": err.tries,
            "wait": err.wait,
            "in_transaction": writer.in_transaction,
        }
    elapsed = time.monotonic() - start
    holder.rollback()
    generation = writer.execute("SELECT generation FROM ledgers WHERE slug = 'main'").fetchone()[0]
    report({"elapsed": elapsed, "caught": caught, "generation": generation})
    holder.close()
    writer.close()
finally:
    drop_database(url)
