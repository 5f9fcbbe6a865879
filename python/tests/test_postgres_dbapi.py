"""writerlock.postgres as a DB-API 2.0 module (PEP 249), against a real server: the module
globals, the exception hierarchy on sqlite3's classes, type objects and constructors,
lastrowid from INSERT ... RETURNING, psycopg's %s answered with a client error that says to
use ?, and the PG* environment variables and the password file honoured as libpq does."""

from __future__ import annotations

import datetime
import os
import pickle
import sqlite3
import time
import urllib.parse

import pytest

from conftest import admin_url, wait_until
from writerlock import postgres

PEP249_ERRORS = (
    "Warning",
    "Error",
    "InterfaceError",
    "DatabaseError",
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
)


def test_module_globals() -> None:
    assert postgres.apilevel == "2.0"
    assert postgres.threadsafety == 2
    assert postgres.paramstyle == "qmark"
    for name in PEP249_ERRORS:
        assert isinstance(getattr(postgres, name), type), name
        assert getattr(postgres.Connection, name) is getattr(postgres, name), name


def test_exception_hierarchy_is_pep_249_on_sqlite3s_classes() -> None:
    p = postgres
    assert issubclass(p.Warning, Exception) and issubclass(p.Warning, sqlite3.Warning)
    assert issubclass(p.Error, sqlite3.Error)
    for sub in (p.InterfaceError, p.DatabaseError):
        assert issubclass(sub, p.Error)
    assert issubclass(p.InterfaceError, sqlite3.InterfaceError)
    assert issubclass(p.DatabaseError, sqlite3.DatabaseError)
    for name in ("DataError", "OperationalError", "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError"):
        cls = getattr(p, name)
        assert issubclass(cls, p.DatabaseError), name
        assert issubclass(cls, getattr(sqlite3, name)), name  # what the ledger code catches
    assert issubclass(p.WriterLockNotGranted, sqlite3.OperationalError)
    assert issubclass(p.Refused, p.DatabaseError) and not issubclass(p.Refused, sqlite3.OperationalError)
    err = p.OperationalError("lost", "08003")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is p.OperationalError and back.sqlstate == "08003" and str(back) == "lost"


def test_errors_raised_are_the_pep_249_classes(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    with pytest.raises(postgres.Error) as info:
        c.execute("SELECT 1/0")
    assert isinstance(info.value, postgres.DataError)
    with pytest.raises(postgres.Error) as info2:
        postgres.connect("postgresql://nobody@127.0.0.1:notaport/x")
    assert isinstance(info2.value, postgres.InterfaceError)


def test_type_objects_match_description(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    cur = c.execute(
        "SELECT 1::int4, 2::int8, 1.5::numeric, 2.5::float8, 'x'::text, 'y'::varchar, "
        "'\\x00'::bytea, now(), current_date, localtime, 'ctid'::text"
    )
    codes = [d[1] for d in cur.description]
    assert codes[:4] == [postgres.NUMBER] * 4
    assert codes[4:6] == [postgres.STRING] * 2
    assert codes[6] == postgres.BINARY and codes[6] != postgres.STRING
    assert codes[7:10] == [postgres.DATETIME] * 3
    assert postgres.ROWID == "oid" and postgres.NUMBER != "text"


def test_constructors_round_trip(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.execute("CREATE TABLE t (b bytea, d date, tm time, ts timestamp)")
    ticks = time.mktime((2024, 5, 6, 7, 8, 9, 0, 0, -1))
    row = (
        postgres.Binary(b"\x00\xff"),
        postgres.DateFromTicks(ticks),
        postgres.TimeFromTicks(ticks),
        postgres.TimestampFromTicks(ticks),
    )
    assert row[1] == postgres.Date(2024, 5, 6)
    assert row[2] == postgres.Time(7, 8, 9)
    assert row[3] == postgres.Timestamp(2024, 5, 6, 7, 8, 9)
    c.execute("INSERT INTO t VALUES (?, ?, ?, ?)", row)
    assert c.execute("SELECT b, d, tm, ts FROM t").fetchone() == (
        b"\x00\xff",
        datetime.date(2024, 5, 6),
        datetime.time(7, 8, 9),
        datetime.datetime(2024, 5, 6, 7, 8, 9),
    )


def test_lastrowid_where_the_server_says(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.execute("CREATE TABLE t (id bigserial PRIMARY KEY, x text)")
    cur = c.execute("INSERT INTO t (x) VALUES (?) RETURNING id", ("a",))
    assert cur.lastrowid == 1
    cur = c.execute("/* two */ INSERT INTO t (x) VALUES (?) RETURNING id", ("b",))
    assert cur.lastrowid == 2 and cur.fetchone() == (2,)
    assert c.execute("INSERT INTO t (x) VALUES ('c')").lastrowid is None  # no id returned
    assert c.execute("SELECT id FROM t WHERE id = 1").lastrowid is None
    assert c.execute("INSERT INTO t (x) VALUES ('d'), ('e') RETURNING id").lastrowid is None


def test_psycopg_placeholders_get_a_client_error_saying_use_qmark(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.execute("CREATE TABLE t (id int, x text)")
    with pytest.raises(postgres.ProgrammingError) as info:
        c.execute("INSERT INTO t VALUES (%s, %s)", (1, "a"))
    text = str(info.value)
    assert "uses %s, psycopg's placeholder style" in text and "takes ? placeholders" in text
    assert info.value.__cause__ is None  # answered before anything was sent
    assert isinstance(info.value, sqlite3.ProgrammingError)
    with pytest.raises(postgres.ProgrammingError, match=r"uses %\(id\)s") as info:
        c.execute("SELECT x FROM t WHERE id = %(id)s", {"id": 1})
    assert "in the order of the ?s" in str(info.value)
    # Without parameters the server's syntax error at % becomes the same client error.
    with pytest.raises(postgres.ProgrammingError, match="takes \\? placeholders") as info:
        c.execute("DELETE FROM t WHERE id = %s")
    assert getattr(info.value.__cause__, "sqlstate", None) == "42601"
    with pytest.raises(postgres.ProgrammingError, match="takes \\? placeholders"):
        c.executemany("INSERT INTO t VALUES (%s, %s)", [(1, "a")])
    # % in literals and the modulo operator are left alone; ? and $n work.
    c.execute("INSERT INTO t VALUES (?, '%s')", (7,))
    c.execute("INSERT INTO t VALUES ($1, $2)", (8, "y"))
    assert c.execute("SELECT x, id % 3 FROM t ORDER BY id").fetchall() == [("%s", 1), ("y", 2)]


# --------------------------------------------------------------------------------------------
# PG* environment variables and the password file


def _parts() -> urllib.parse.SplitResult:
    return urllib.parse.urlsplit(admin_url())


def test_pg_environment_fills_what_the_address_leaves_out(pg_db, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    parts = _parts()
    monkeypatch.setenv("PGHOST", parts.hostname or "")
    monkeypatch.setenv("PGPORT", str(parts.port))
    monkeypatch.setenv("PGUSER", parts.username or "")
    monkeypatch.setenv("PGDATABASE", pg_db.name)
    monkeypatch.setenv("PGAPPNAME", "swarm-worker")
    c = postgres.connect("postgresql://")
    assert c.execute("SELECT current_database(), current_user").fetchone() == (pg_db.name, parts.username)
    assert c.show("application_name") == "swarm-worker"
    assert c.address == f"postgresql://{parts.username}@{parts.hostname}:{parts.port}/{pg_db.name}"
    assert c.show("lock_timeout") == "10s"  # the session's settings still apply
    c.close()
    c = postgres.connect(f"dbname={pg_db.name}")  # libpq key=value pairs too
    assert c.execute("SELECT current_database()").fetchone() == (pg_db.name,)
    c.close()


@pytest.fixture
def password_role(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    """A role that must give its password (a scram-sha-256 rule for it alone in the test
    cluster's pg_hba.conf), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to add a password rule to the test cluster's pg_hba.conf")
    admin = postgres.connect(admin_url(), autocommit=True)
    hba = admin.execute("SHOW hba_file").fetchone()[0]
    if not os.access(hba, os.W_OK):
        admin.close()
        pytest.skip(f"the test cluster's {hba} is not writable here")
    role = f"wl_pgpass_{os.getpid()}"
    original = open(hba).read()
    admin.execute(f"DROP ROLE IF EXISTS {role}")
    admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'Tr0ub4dor'")
    with open(hba, "w") as f:
        f.write(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + original)
    admin.execute("SELECT pg_reload_conf()")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("PGPASSWORD", "PGPASSFILE"):
        monkeypatch.delenv(name, raising=False)
    parts = _parts()
    url = f"postgresql://{role}@{parts.hostname}:{parts.port}/postgres"

    def refused() -> bool:
        try:
            postgres.connect(url).close()
            return False
        except postgres.ConnectError:
            return True

    try:
        assert wait_until(refused, timeout=10.0, interval=0.1), "the password rule did not take effect"
        yield role, url, home
    finally:
        with open(hba, "w") as f:
            f.write(original)
        admin.execute("SELECT pg_reload_conf()")
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()


def test_password_file_and_pgpassword_are_used(password_role, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    role, url, home = password_role
    parts = _parts()
    with pytest.raises(postgres.ConnectError):
        postgres.connect(url)
    pgpass = home / ".pgpass"
    pgpass.write_text(f"# test\n{parts.hostname}:{parts.port}:*:{role}:Tr0ub4dor\n")
    pgpass.chmod(0o600)
    c = postgres.connect(url)
    assert c.execute("SELECT current_user").fetchone() == (role,)
    c.close()
    # libpq refuses a password file others can read; the error says so and what to do.
    pgpass.chmod(0o644)
    with pytest.raises(postgres.ConnectError) as info:
        postgres.connect(url)
    assert "was not used because group or others can read it" in str(info.value)
    assert f"chmod 0600 {pgpass}" in str(info.value)
    assert "Tr0ub4dor" not in str(info.value)
    # PGPASSWORD when there is no usable file.
    monkeypatch.setenv("PGPASSWORD", "Tr0ub4dor")
    c = postgres.connect(url)
    assert c.execute("SELECT current_user").fetchone() == (role,)
    c.close()
