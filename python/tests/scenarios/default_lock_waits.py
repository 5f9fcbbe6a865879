"""Three cancelled waits at the real defaults (lock_timeout 10 s, three tries), through Python.

A holder keeps the writer lock (its idle limit raised so the server does not end it); a
writer with the default settings waits three times 10 seconds and gets WriterLockNotGranted,
caught as sqlite3.OperationalError. A psycopg 3 connection opened with session_options()
waits at the same time through write(conn). Prints one JSON line with what happened.
"""

import sqlite3
import threading
import time

import psycopg

from _common import create_database, drop_database, report

from writerlock import postgres

url = create_database("waits")
try:
    writer = postgres.connect(url)
    postgres.setup_schema(writer)
    writer.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0)")
    writer.commit()

    holder = postgres.connect(url, idle_in_transaction=120.0)
    holder.begin()
    holder.lock_writer()

    driver_result = {}

    def driver_writer() -> None:
        conn = psycopg.connect(url, **postgres.session_options())
        begun = time.monotonic()
        try:
            with postgres.write(conn, "main") as w:
                w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
            driver_result["caught"] = None
        except sqlite3.OperationalError as err:
            driver_result["caught"] = {
                "type": type(err).__name__,
                "message": str(err),
                "sqlstate": err.sqlstate,
                "idle": conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE,
            }
        driver_result["elapsed"] = time.monotonic() - begun
        conn.close()

    thread = threading.Thread(target=driver_writer)
    thread.start()
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
    thread.join(timeout=60)
    holder.rollback()
    generation = writer.execute("SELECT generation FROM ledgers WHERE slug = 'main'").fetchone()[0]
    report({"elapsed": elapsed, "caught": caught, "generation": generation, "driver": driver_result})
    holder.close()
    writer.close()
finally:
    drop_database(url)
