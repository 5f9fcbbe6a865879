"""The installed package: its public surface, type information, and the one system SQLite."""

from __future__ import annotations

import importlib.resources
import sqlite3
import subprocess
import sys
import textwrap

import writerlock
from writerlock import postgres


def test_public_surface_of_writerlock() -> None:
    for name in ("WriterQueue", "Busy", "NotStarted", "NotAutocommit"):
        assert hasattr(writerlock, name), name
    assert issubclass(writerlock.Busy, sqlite3.OperationalError)
    assert issubclass(writerlock.NotStarted, sqlite3.OperationalError)
    assert issubclass(writerlock.NotAutocommit, sqlite3.ProgrammingError)
    assert writerlock.TRANSACTION_WAIT == 25.0
    assert writerlock.BUSY_TIMEOUT == 5.0
    assert writerlock.TRANSACTION_SETTING == "[DatabaseSettings] SQLiteTransactionWait"
    assert writerlock.BUSY_SETTING == "[DatabaseSettings] SQLiteBusyTimeout"
    assert writerlock.LOCK_SUFFIX == ".writer-lock"
    assert writerlock.postgres is postgres


def test_public_surface_of_postgres() -> None:
    for name in (
        "connect",
        "Connection",
        "Cursor",
        "Pool",
        "setup_schema",
        "refused_writers",
        "new_alerts",
    ):
        assert callable(getattr(postgres, name)), name
    assert postgres.WRITER_LOCK == 1279607879
    assert postgres.LOCK_WAIT == 10
    assert postgres.LOCK_TRIES == 3
    assert postgres.VERSION == 1
    assert postgres.REQUIRED == 1
    assert postgres.SESSION == {
        "lock_timeout": "10s",
        "idle_in_transaction_session_timeout": "15s",
        "statement_timeout": "60s",
        "agentihooks.ledger_writer_version": "1",
    }
    assert issubclass(postgres.WriterLockNotGranted, sqlite3.OperationalError)
    assert issubclass(postgres.Refused, sqlite3.DatabaseError)
    assert not issubclass(postgres.Refused, sqlite3.OperationalError)
    for cls in (
        postgres.OperationalError,
        postgres.IntegrityError,
        postgres.DataError,
        postgres.ProgrammingError,
        postgres.NotSupportedError,
        postgres.InternalError,
        postgres.SessionEnded,
        postgres.ConnectionClosed,
        postgres.ConnectError,
    ):
        assert issubclass(cls, postgres.DatabaseError)
        assert issubclass(cls, sqlite3.DatabaseError)
    assert issubclass(postgres.IntegrityError, sqlite3.IntegrityError)


def test_type_information_is_installed() -> None:
    files = importlib.resources.files("writerlock")
    for name in ("py.typed", "__init__.pyi", "postgres.pyi"):
        assert files.joinpath(name).is_file(), name
    stub = files.joinpath("__init__.pyi").read_text()
    assert "class WriterQueue" in stub and "class Busy" in stub
    assert "class Connection" in files.joinpath("postgres.pyi").read_text()


def test_import_uses_the_one_system_libsqlite3() -> None:
    # A fresh interpreter: Python's sqlite3 and writerlock (both halves) loaded and used;
    # /proc/self/maps must list exactly one libsqlite3, the system one.
    code = textwrap.dedent(
        """
        import sqlite3, writerlock, writerlock.postgres, tempfile, os
        d = tempfile.mkdtemp()
        conn = sqlite3.connect(os.path.join(d, "x.db"), isolation_level=None)
        q = writerlock.WriterQueue(os.path.join(d, "x.db"))
        with q.transaction(conn):
            conn.execute("CREATE TABLE t (x)")
        paths = set()
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and "sqlite" in os.path.basename(parts[5]):
                    paths.add(parts[5])
        print(sqlite3.sqlite_version)
        for p in sorted(paths):
            print(p)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    version, paths = out[0], out[1:]
    libs = [p for p in paths if "libsqlite3" in p]
    assert len(libs) == 1, f"expected one libsqlite3 mapped, found {paths}"
    assert libs[0].startswith(("/usr/lib", "/lib")), libs
    assert version == sqlite3.sqlite_version
    # Nothing else that looks like SQLite is mapped besides Python's _sqlite3 module.
    others = [p for p in paths if "libsqlite3" not in p and "_sqlite3." not in p]
    assert others == [], others
