import os

import writerlock.postgres

c = writerlock.postgres.connect(os.environ["WRITERLOCK_DATABASE_URL"])
for name in ("lock_timeout", "idle_in_transaction_session_timeout", "statement_timeout"):
    print(name, c.execute(f"SHOW {name}").fetchone()[0])   # 10s, 15s, 1min
