import os

from writerlock import postgres

c = postgres.connect(os.environ["WRITERLOCK_DATABASE_URL"])
doc = postgres.Jsonb({"a": 1, "b": 2})
print(c.execute("SELECT $1::jsonb ? 'a', $1::jsonb ?| array['x', 'b']", (doc,)).fetchone())
print(c.execute("SELECT jsonb_exists(?, 'a')", (doc,)).fetchone())   # (True,)
c.close()
