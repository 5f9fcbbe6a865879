"""Shared fixtures of the writerlock Python tests.

The tests use real parts: real processes (multiprocessing with fork and spawn, ``os.fork``,
subprocesses), a real PostgreSQL server named by ``TEST_DATABASE_URL`` (every test gets a
database of its own: the writer floor can never be lowered), and ``psql`` as the "old code"
client that sends no writer version.

The two Postgres scenarios that run at the real defaults (an idle holder ended after 15 s,
three lock waits of 10 s) run in background processes started when the session starts
(``scenarios/``), so their waits overlap the other tests; their tests collect the results.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"

HOW_TO_RUN = (
    "TEST_DATABASE_URL is not set: the Postgres tests need a real PostgreSQL server. Run "
    "`make test`, or `tests/with-postgres.sh python/tests/run.sh` from the repository "
    "root (it starts a throwaway cluster), or start one with `tests/pg-cluster.sh start` "
    "and export the TEST_DATABASE_URL=... line it prints."
)


def admin_url() -> str:
    url = os.environ.get("TEST_DATABASE_URL", "").strip()
    if not url:
        pytest.fail(HOW_TO_RUN, pytrace=False)
    if "://" not in url:
        pytest.fail(
            f"TEST_DATABASE_URL must be a postgresql:// URL for these tests, not {url!r}",
            pytrace=False,
        )
    return url


def with_database(url: str, name: str) -> str:
    """``url`` with its database name replaced by ``name``."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


_seq = itertools.count()


class ScratchDatabase:
    """A database of its own for one test, dropped afterwards."""

    def __init__(self, tag: str) -> None:
        from writerlock import postgres

        self.admin_url = admin_url()
        self.name = f"wlpy_{tag}_{os.getpid()}_{next(_seq)}"
        self.url = with_database(self.admin_url, self.name)
        admin = postgres.connect(self.admin_url, autocommit=True)
        try:
            admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {self.name}")
        finally:
            admin.close()

    def connect(self, **options):  # type: ignore[no-untyped-def]
        """A connection to this database, in autocommit mode unless ``autocommit=False`` is
        passed: most tests check one statement or one write at a time. The transaction
        semantics themselves are tested with ``autocommit=False`` (the module's default)."""
        from writerlock import postgres

        options.setdefault("autocommit", True)
        return postgres.connect(self.url, **options)

    def drop(self) -> None:
        from writerlock import postgres

        admin = postgres.connect(self.admin_url, autocommit=True)
        try:
            admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        finally:
            admin.close()


@pytest.fixture
def pg_db(request: pytest.FixtureRequest) -> Iterator[ScratchDatabase]:
    tag = "".join(c for c in request.node.name.lower() if c.isalnum())[:24]
    db = ScratchDatabase(tag)
    try:
        yield db
    finally:
        db.drop()


class Psql:
    """An interactive ``psql`` session: a plain client that sends no writer version, as
    code from before the floor did. ``run`` returns what psql printed, errors included."""

    def __init__(self, url: str) -> None:
        psql = shutil.which("psql")
        if psql is None:
            pytest.fail(
                "psql is not installed; install it with: apt-get install -y postgresql-client",
                pytrace=False,
            )
        self.proc = subprocess.Popen(
            [psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=0", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._n = 0

    def run(self, sql: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._n += 1
        marker = f"__writerlock_done_{self._n}__"
        self.proc.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + marker + "\n")
        self.proc.stdin.flush()
        lines: List[str] = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("psql exited: " + "".join(lines))
            if line.strip() == marker:
                return "".join(lines)
            lines.append(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def psql_factory() -> Iterator:
    sessions: List[Psql] = []

    def make(url: str) -> Psql:
        s = Psql(url)
        sessions.append(s)
        return s

    yield make
    for s in sessions:
        s.close()


# ---------------------------------------------------------------------------------------------
# Background scenarios at the real defaults

SCENARIO_TESTS = {
    "idle_holder": "test_idle_holder_is_ended_and_the_next_writer_commits_within_30_s",
    "default_lock_waits": "test_three_cancelled_waits_of_10_seconds_at_the_defaults",
}
_scenarios: Dict[str, subprocess.Popen] = {}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    # The background scenarios' tests go last, so the other tests run while they wait.
    last = set(SCENARIO_TESTS.values())
    items.sort(key=lambda item: item.originalname in last)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not os.environ.get("TEST_DATABASE_URL", "").strip():
        return
    wanted = {item.originalname for item in session.items}
    for name, test in SCENARIO_TESTS.items():
        if test in wanted:
            _scenarios[name] = subprocess.Popen(
                [sys.executable, str(SCENARIOS / f"{name}.py")],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=str(HERE),
            )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for proc in _scenarios.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def scenario_result(name: str, timeout: float = 120.0) -> dict:
    """Waits for a background scenario and returns the JSON result it printed."""
    admin_url()
    proc = _scenarios.get(name)
    if proc is None:
        pytest.fail(f"the background scenario {name} was not started", pytrace=False)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"scenario {name} did not finish within {timeout} s:\n{out}\n{err}")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"scenario {name} failed (exit {proc.returncode}):\n{out}\n{err}"
    )
    return json.loads(lines[-1])


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.01) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def backend_alive(admin, pid: int) -> bool:  # type: ignore[no-untyped-def]
    return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ?", (pid,)).fetchone()[0] > 0


def generation(conn, slug: str = "main") -> Optional[int]:  # type: ignore[no-untyped-def]
    row = conn.execute("SELECT generation FROM ledgers WHERE slug = ?", (slug,)).fetchone()
    return None if row is None else row[0]


# ---------------------------------------------------------------------------------------------
# The user's own psycopg connections (psycopg 3 in and out of autocommit, psycopg2), opened
# with the writer session's settings, and what the tests read of them. Imported on first use,
# so that the SQLite tests never load a Postgres driver.


def psycopg3(url: str, **settings: Any) -> Any:
    """A psycopg 3 connection (not in autocommit) with ``postgres.session_options(**settings)``."""
    import psycopg

    from writerlock import postgres

    return psycopg.connect(url, **postgres.session_options(**settings))


def psycopg3_autocommit(url: str, **settings: Any) -> Any:
    """A psycopg 3 connection in autocommit with ``postgres.session_options(**settings)``."""
    import psycopg

    from writerlock import postgres

    return psycopg.connect(url, autocommit=True, **postgres.session_options(**settings))


def psycopg2_connection(url: str, **settings: Any) -> Any:
    """A psycopg2 connection with ``postgres.session_options(**settings)``."""
    import psycopg2

    from writerlock import postgres

    return psycopg2.connect(url, **postgres.session_options(**settings))


#: The drivers a writer test runs on, by the name its parameter shows.
DRIVERS: Dict[str, Callable[..., Any]] = {
    "psycopg3": psycopg3,
    "psycopg3_autocommit": psycopg3_autocommit,
    "psycopg2": psycopg2_connection,
}


def backend_pid(conn: Any) -> int:
    """The server process of a native ``postgres.Connection``, a psycopg 3 or a psycopg2
    connection."""
    import psycopg

    from writerlock import postgres

    if isinstance(conn, postgres.Connection):
        return conn.pid
    if isinstance(conn, psycopg.Connection):
        return int(conn.info.backend_pid)
    return int(conn.get_backend_pid())


def in_transaction(conn: Any) -> bool:
    """Whether the session of a native ``postgres.Connection``, a psycopg 3 or a psycopg2
    connection is inside a transaction (or a failed one), as its driver tracks it."""
    import psycopg
    import psycopg2.extensions

    from writerlock import postgres

    if isinstance(conn, postgres.Connection):
        return conn.in_transaction
    if isinstance(conn, psycopg.Connection):
        return bool(conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)
    return bool(conn.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_IDLE)
