"""The Python examples of the documentation, run verbatim: every ```python block of the
README's "## Python" section and of docs/python.md is one file of python/examples/ (same
text), every file is shown in one of them, and each file runs to its end in a fresh
directory, against a scratch Postgres database for the Postgres ones. The
SQLAlchemy recipe is also run by many processes at once to show its writers take turns."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import ScratchDatabase

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
EXAMPLES = HERE.parent / "examples"


def readme_python_blocks() -> List[str]:
    """The README's Python section, then docs/python.md."""
    text = (REPO / "README.md").read_text()
    start = text.index("\n## Python\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    page = (REPO / "docs" / "python.md").read_text()
    readme = re.findall(r"```python\n(.*?)```", section, re.S)
    assert readme, "the README's Python section has no python block"
    return readme + re.findall(r"```python\n(.*?)```", page, re.S)


def example_files() -> Dict[str, str]:
    return {p.name: p.read_text() for p in sorted(EXAMPLES.glob("*.py"))}


def test_every_readme_python_block_is_an_example_file() -> None:
    blocks = readme_python_blocks()
    files = example_files()
    assert blocks, "the README's Python section and docs/python.md have no python blocks"
    unmatched = [b for b in blocks if b not in files.values()]
    assert not unmatched, (
        "python blocks of the README or docs/python.md that are not a file of "
        "python/examples/ (copy the block there, or the file into the page):\n\n" + "\n---\n".join(unmatched)
    )
    unused = [name for name, body in files.items() if body not in blocks]
    assert not unused, f"python/examples/ files neither the README nor docs/python.md shows: {unused}"


@pytest.mark.parametrize("name", sorted(example_files()))
def test_the_example_runs(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = dict(os.environ)
    scratch = None
    if "postgres" in example_files()[name]:
        scratch = ScratchDatabase("readme" + "".join(c for c in name if c.isalnum())[:12])
        env["WRITERLOCK_DATABASE_URL"] = scratch.url
    try:
        done = subprocess.run(
            [sys.executable, "-W", "error", str(EXAMPLES / name)],
            cwd=str(tmp_path),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        if scratch is not None:
            scratch.drop()
    assert done.returncode == 0, done.stdout + done.stderr
    if name == "sqlite_queue.py":
        assert done.stdout.strip().endswith("1 event(s)"), done.stdout
    if name == "sqlalchemy_recipe.py":
        assert done.stdout.strip() == "False", done.stdout
    if name == "postgres_jsonb.py":
        assert done.stdout.split("\n")[:2] == ["(True, True)", "(True,)"], done.stdout
    if name == "postgres_settings.py":
        assert done.stdout.split("\n")[:3] == [
            "lock_timeout 10s",
            "idle_in_transaction_session_timeout 15s",
            "statement_timeout 1min",
        ], done.stdout


def test_the_package_readme_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (HERE.parent / "README.md").read_text(), re.S)
    assert blocks
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", block],
            cwd=str(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, block + done.stdout + done.stderr


SQLALCHEMY_WORKER = """
import sys, time
exec(open(sys.argv[1]).read().split("with engine.begin() as conn:")[0])   # the recipe's set-up
engine.dispose()
engine = sqlalchemy.create_engine("sqlite:///app.db", connect_args={"timeout": 0})
for fn, name in ((autocommit, "connect"), (begin_in_turn, "begin"), (commit_in_turn, "commit"),
                 (rollback_in_turn, "rollback")):
    event.listen(engine, name, fn)
for _ in range(int(sys.argv[2])):
    with engine.begin() as conn:
        n = conn.exec_driver_sql("SELECT n FROM counter").scalar()
        time.sleep(0.002)
        conn.exec_driver_sql("UPDATE counter SET n = ?", (n + 1,))
"""


def test_the_sqlalchemy_recipe_makes_writers_take_turns(tmp_path: Path) -> None:
    # SQLAlchemy is a test dependency (tests/deps.sh installs it): missing, this fails.
    import sqlalchemy  # noqa: F401

    db = sqlite3.connect(str(tmp_path / "app.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE counter (n INTEGER NOT NULL)")
    db.execute("INSERT INTO counter VALUES (0)")
    worker = tmp_path / "worker.py"
    worker.write_text(SQLALCHEMY_WORKER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(EXAMPLES / "sqlalchemy_recipe.py"), "25"],
            cwd=str(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
    # Busy timeout 0: without the turn, concurrent BEGIN IMMEDIATEs would fail at once, and
    # a lost update would show as a count below 100.
    assert db.execute("SELECT n FROM counter").fetchone()[0] == 100


RECIPE_USES = """
import sys
exec(open(sys.argv[1]).read().split("with engine.begin() as conn:")[0])   # the recipe's set-up
import fcntl, os
from sqlalchemy import text

def lock_file_held():                                  # probed on a fresh open file description
    fd = os.open("app.db" + writerlock.LOCK_SUFFIX, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False

def check(label):                                      # the turn given back, not only the flag
    assert not queue.holding and not lock_file_held(), label

with engine.begin() as conn:                           # commit at the end of the block
    conn.execute(text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
check("begin block")
with engine.connect() as conn:                         # SQLAlchemy 2.0 commit-as-you-go
    conn.execute(text("INSERT INTO t VALUES (1)"))
    assert queue.holding and lock_file_held()          # autobegin took the turn
    conn.commit()
    check("commit")
    conn.execute(text("INSERT INTO t VALUES (2)"))
    conn.rollback()
    check("rollback")
    conn.execute(text("INSERT INTO t VALUES (3)"))
check("closed without commit: rolled back")
try:
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (4)"))
        raise KeyError("boom")
except KeyError:
    pass
check("exception in begin block")
with engine.connect() as conn:
    rows = [r[0] for r in conn.execute(text("SELECT x FROM t ORDER BY x"))]
    conn.rollback()
assert rows == [1], rows
print("ok")
"""


def test_the_sqlalchemy_recipe_gives_the_turn_back_however_a_transaction_ends(
    tmp_path: Path,
) -> None:
    script = tmp_path / "uses.py"
    script.write_text(RECIPE_USES)
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script), str(EXAMPLES / "sqlalchemy_recipe.py")],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
