"""The installed package: its public surface, type information, and the one system SQLite."""

from __future__ import annotations

import importlib.resources
import re
import sqlite3
import subprocess
import sys
import textwrap

import writerlock
from writerlock import _native, postgres


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


def test_postgres_session_defaults_are_the_cores() -> None:
    # The defaults of every setting come from the core's constants, exposed once by the
    # native module (the values are the interface: 10 s, 30 s, 10 s, 3, 60 s).
    assert (
        _native.PG_CONNECT_TIMEOUT,
        _native.PG_KEEPALIVES,
        _native.PG_KEEPALIVES_IDLE,
        _native.PG_KEEPALIVES_INTERVAL,
        _native.PG_KEEPALIVES_COUNT,
        _native.PG_TCP_USER_TIMEOUT,
    ) == (10.0, True, 30.0, 10.0, 3, 60.0)
    keywords = postgres.session_options()
    assert keywords["connect_timeout"] == f"{_native.PG_CONNECT_TIMEOUT:g}"
    assert keywords["keepalives"] == str(int(_native.PG_KEEPALIVES))
    assert keywords["keepalives_idle"] == f"{_native.PG_KEEPALIVES_IDLE:g}"
    assert keywords["keepalives_interval"] == f"{_native.PG_KEEPALIVES_INTERVAL:g}"
    assert keywords["keepalives_count"] == str(_native.PG_KEEPALIVES_COUNT)
    assert keywords["tcp_user_timeout"] == f"{_native.PG_TCP_USER_TIMEOUT * 1000:g}"
    assert f"-c lock_timeout={postgres.LOCK_WAIT:g}s" in keywords["options"]


def test_type_information_is_installed() -> None:
    # The pydantic-core layout: the native module has a stub of its own, every class,
    # function and constant typed (no module __getattr__ placeholder), and the Python modules
    # carry their annotations themselves, with no stub shadowing them.
    files = importlib.resources.files("writerlock")
    for name in ("py.typed", "_native.pyi", "__init__.py", "postgres.py"):
        assert files.joinpath(name).is_file(), name
    for name in ("__init__.pyi", "postgres.pyi"):
        assert not files.joinpath(name).is_file(), f"{name} shadows its .py module"
    stub = files.joinpath("_native.pyi").read_text()
    assert "def __getattr__" not in stub
    for name in _native.__all__:
        assert re.search(rf"^(class |def |){re.escape(name)}\b", stub, re.MULTILINE), name


def test_import_uses_the_one_system_libsqlite3() -> None:
    # A fresh interpreter: Python's sqlite3 and writerlock (both halves) loaded and used;
    # /proc/self/maps must list exactly one libsqlite3, the system one, and Python's sqlite3
    # must run on it: the version that library's own sqlite3_libversion() gives (called
    # through ctypes) is the one Python's sqlite3 reports.
    code = textwrap.dedent(
        """
        import ctypes, sqlite3, writerlock, writerlock.postgres, tempfile, os
        from writerlock import _native
        import _sqlite3
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
        libs = sorted(p for p in paths if "libsqlite3" in p)
        if len(libs) == 1:
            libversion = ctypes.CDLL(libs[0]).sqlite3_libversion
            libversion.restype = ctypes.c_char_p
            print(libversion().decode())
        else:
            print("-")
        print(sqlite3.sqlite_version)
        print(_native.__file__)
        print(_sqlite3.__file__)
        for p in sorted(paths):
            print(p)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    library_version, python_version, native, python_module, paths = (
        out[0],
        out[1],
        out[2],
        out[3],
        out[4:],
    )
    libs = [p for p in paths if "libsqlite3" in p]
    assert len(libs) == 1, f"expected one libsqlite3 mapped, found {paths}"
    assert libs[0].startswith(("/usr/lib", "/lib")), libs
    assert library_version == python_version, (
        f"Python's sqlite3 reports SQLite {python_version} but the mapped {libs[0]} is "
        f"{library_version}: Python's sqlite3 carries a SQLite of its own"
    )
    # Nothing else that looks like SQLite is mapped besides Python's _sqlite3 module.
    others = [p for p in paths if "libsqlite3" not in p and "_sqlite3." not in p]
    assert others == [], others
    # Neither writerlock's native module nor Python's _sqlite3 carries a copy of SQLite
    # linked in (a bundled build): every SQLite has its file header's text in it, as the
    # system library shows.
    marker = b"SQLite format 3\x00"
    with open(libs[0], "rb") as lib:
        assert marker in lib.read(), f"{libs[0]} lacks SQLite's header text"
    for module in (native, python_module):
        with open(module, "rb") as f:
            assert marker not in f.read(), f"{module} carries a SQLite of its own"
