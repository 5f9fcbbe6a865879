import sqlite3

import writerlock

conn = sqlite3.connect("app.db", isolation_level=None)
conn.execute("CREATE TABLE IF NOT EXISTS events (name TEXT)")
queue = writerlock.WriterQueue("app.db")
with queue.turn(wait=25.0):                  # the writer turn alone, given back at the end
    conn.execute("BEGIN IMMEDIATE")          # your own transaction, inside the turn
    conn.execute("INSERT INTO events VALUES ('y')")
    conn.execute("COMMIT")
queue.acquire(wait=25.0)                     # the same without a with block
try:
    conn.executescript("BEGIN IMMEDIATE; INSERT INTO events VALUES ('z'); COMMIT;")
finally:
    queue.release()
