import sqlite3

import writerlock

conn = sqlite3.connect("app.db", isolation_level=None)         # autocommit mode (the default works too)
conn.execute("CREATE TABLE IF NOT EXISTS events (name TEXT)")
conn.execute("CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, done INTEGER)")
queue = writerlock.WriterQueue.for_connection(conn)            # the connection's own file
with queue.transaction(conn, wait=25.0):                       # writer turn + BEGIN IMMEDIATE
    conn.execute("INSERT INTO events VALUES (?)", ("x",))
queue.execute(conn, "INSERT OR IGNORE INTO jobs VALUES (?, 0)", (7,), wait=5.0)  # one queued write
try:
    queue.execute(conn, "UPDATE jobs SET done = 1 WHERE id = ?", (7,), wait=5.0)
except writerlock.Busy as err:               # a sqlite3.OperationalError; nothing was written
    print(err.waited, err.limit, err.setting, err.holder_pid)
print(conn.execute("SELECT count(*) FROM events").fetchone()[0], "event(s)")
