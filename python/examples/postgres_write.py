import os

from writerlock import postgres

url = os.environ["WRITERLOCK_DATABASE_URL"]    # postgresql://ledger@db:5432/ledger
pg = postgres.connect(url)                     # lock_timeout 10s, idle 15s, statement 1min
postgres.setup_schema(pg, """
    CREATE TABLE IF NOT EXISTS ledgers (slug TEXT PRIMARY KEY, generation INTEGER NOT NULL);
    INSERT INTO ledgers VALUES ('main', 0) ON CONFLICT DO NOTHING;
""")                                           # your schema, then the writer floor
current_alerts = []                            # the writer alerts your ledger already shows


def raise_writer_alert(ledger, text):
    print(f"ALERT {ledger}: {text}")


with pg.write("main", existing_alerts=current_alerts) as w:    # writer lock (3 waits) + floor
    w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = ?", ("main",))
    for text in w.alerts:
        raise_writer_alert("main", text)
