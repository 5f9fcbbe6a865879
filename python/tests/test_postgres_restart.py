"""A server restart costs no write through a pool: against a private cluster (started here
by ``tests/pg-cluster.sh``, since a restart would cut every other test's sessions), each
pooled connection used just before ``pg_ctl restart -m fast`` is recognised as ended, and
the writes right after the restart go to fresh connections and commit; a connection of the
caller's own says plainly that the server ended it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from writerlock import postgres

SCRIPT = Path(__file__).resolve().parents[2] / "tests" / "pg-cluster.sh"


@pytest.fixture
def private_cluster() -> Iterator[tuple[str, Path]]:
    # Below a directory the server's user can reach (not pytest's own, which is private).
    base = Path(tempfile.mkdtemp(prefix="writerlock-restart."))
    base.chmod(0o755)
    cluster = base / "cluster"
    out = subprocess.run(
        [str(SCRIPT), "start", str(cluster)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, f"the cluster did not start: {out.stdout}{out.stderr}"
    url = next(
        line.split("=", 1)[1] for line in out.stdout.splitlines() if line.startswith("TEST_DATABASE_URL=")
    )
    try:
        yield url, cluster
    finally:
        subprocess.run([str(SCRIPT), "stop", str(cluster)], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_pooled_writes_right_after_a_restart_commit(private_cluster: tuple[str, Path]) -> None:
    url, cluster = private_cluster
    setup = postgres.connect(url)
    setup.execute("CREATE TABLE restart_rows (tag text)")
    setup.commit()
    setup.close()
    pool = postgres.Pool(url, size=3)
    taken = [pool.take() for _ in range(3)]
    for conn in taken:
        with conn.write():
            conn.execute("INSERT INTO restart_rows VALUES (?)", ("before",))
        pool.give(conn)
    own = postgres.connect(url)
    own.execute("SELECT 1")

    subprocess.run([str(SCRIPT), "restart", str(cluster), "fast"], check=True)

    taken = [pool.take() for _ in range(3)]
    for conn in taken:
        with conn.write():
            conn.execute("INSERT INTO restart_rows VALUES (?)", ("after",))
        pool.give(conn)
    with pytest.raises(postgres.OperationalError, match="administrator command|ended this session"):
        own.execute("SELECT 1")
    own.close()
    check = postgres.connect(url)
    try:
        assert check.execute("SELECT count(*) FROM restart_rows WHERE tag = 'after'").fetchone()[0] == 3
    finally:
        check.close()
