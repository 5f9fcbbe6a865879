"""The writer session as a role with data grants only, in a fresh process: once the owner set
the schema up, the set-up that runs before each process's first write reads the catalog and
runs no DDL, so such a role writes, through the native connection and through psycopg."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.parse

from conftest import generation
from writerlock import postgres

CHILD = textwrap.dedent(
    """
    import os, sys
    import psycopg
    from writerlock import postgres
    url = os.environ["WL_WRITER_URL"]
    try:
        if sys.argv[1] == "native":
            c = postgres.connect(url)
            with c.write("main") as w:
                w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = ?", ("main",))
            c.close()
        else:
            conn = psycopg.connect(url, autocommit=sys.argv[1] == "autocommit",
                                   **postgres.session_options())
            with postgres.write(conn, "main") as w:
                w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = %s", ("main",))
            conn.close()
        print("ok")
    except Exception as err:
        print(f"{type(err).__name__}: {err}")
    """
)


def _as(url: str, user: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def test_a_writer_role_with_data_grants_only_writes_from_a_fresh_process(pg_db) -> None:  # type: ignore[no-untyped-def]
    role = f"wlpy_writer_{os.getpid()}"
    admin = postgres.connect(pg_db.admin_url, autocommit=True)
    admin.execute(f"DROP ROLE IF EXISTS {role}")
    admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        owner = pg_db.connect()
        postgres.setup_schema(owner)
        owner.execute("INSERT INTO ledgers (slug) VALUES ('main')")
        owner.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ledgers, row_changes, writer_floor TO {role}"
        )
        owner.execute(f"GRANT USAGE ON SEQUENCE writer_refusals TO {role}")
        for n, how in enumerate(("native", "psycopg", "autocommit"), start=1):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, how],
                capture_output=True,
                text=True,
                env={**os.environ, "WL_WRITER_URL": _as(pg_db.url, role)},
            )
            assert out.stdout.strip() == "ok", (how, out.stdout, out.stderr)
            assert generation(owner) == n
        owner.close()
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {pg_db.name} WITH (FORCE)")
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()
