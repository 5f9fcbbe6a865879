import os
import psycopg
from writerlock import postgres

url = os.environ["WRITERLOCK_DATABASE_URL"]
conn = psycopg.connect(url, **postgres.session_options())
postgres.check_session(conn)          # raises postgres.SettingNotInEffect if a pooler dropped them
postgres.setup_schema(conn)           # the floor table and trigger (write() also runs it once)
with postgres.write(conn, "main") as w:   # WriterLockNotGranted, Refused (LW001) as with connect()
    w.execute("INSERT INTO ledgers (slug) VALUES (%s) ON CONFLICT DO NOTHING", ("main",))
    w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = %s", ("main",))
    for text in w.alerts:             # refused writers to name in a writer alert
        print(text)
conn.close()
# A pool: psycopg_pool.ConnectionPool(url, kwargs=postgres.session_options(),
#                                     configure=postgres.check_session)
