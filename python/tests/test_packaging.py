"""How the package is built and what it ships: one abi3 wheel from CPython 3.9, its version,
its metadata (README, project URLs), and ``python -m writerlock status`` / ``demo``, which
work without the ``writerlock`` command (they are Python over the installed module)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import writerlock
from test_sqlite_queue import holder_process
from workers import setup_database

REPO = Path(__file__).resolve().parent.parent.parent


def cargo_version() -> str:
    text = (REPO / "Cargo.toml").read_text()
    match = re.search(r'^\[workspace\.package\]\n(?:.*\n)*?version = "([^"]+)"', text, re.M)
    assert match, "no workspace version in Cargo.toml"
    return match.group(1)


def test_version_is_the_packages() -> None:
    assert writerlock.__version__ == importlib.metadata.version("writerlock") == cargo_version()


def test_the_wheel_is_abi3_from_cpython_3_9() -> None:
    wheel = importlib.metadata.distribution("writerlock").read_text("WHEEL") or ""
    tags = [line.split(": ", 1)[1] for line in wheel.splitlines() if line.startswith("Tag: ")]
    assert tags and all(t.startswith("cp39-abi3-") for t in tags), wheel
    native = Path(writerlock._native.__file__)
    assert native.name == "_native.abi3.so", native.name


def test_metadata_has_the_readme_and_the_project_urls() -> None:
    meta = importlib.metadata.metadata("writerlock")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Repository", "Issues"} <= set(urls), urls
    assert meta["Description-Content-Type"].startswith("text/markdown")
    body = meta.get_payload() or meta["Description"] or ""  # type: ignore[attr-defined]
    assert "writerlock.WriterQueue" in body and "python -m writerlock status" in body
    assert meta["Requires-Python"] == ">=3.9"


def run_module(args: List[str], cwd: Path) -> "subprocess.CompletedProcess[str]":
    # A PATH without the `writerlock` command: the module must not need it.
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    assert shutil.which("writerlock", path=env["PATH"]) is None
    return subprocess.run(
        [sys.executable, "-m", "writerlock", *args],
        cwd=str(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_writerlock_status_shows_the_holder_and_waiters(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    setup_database(db)
    done = run_module(["status", db], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no writer has used the queue on this database yet" in done.stdout
    with holder_process(db) as holder:
        done = run_module(["status", db], tmp_path)
        assert done.returncode == 0, done.stderr
        assert f"held by pid {holder}, held for " in done.stdout, done.stdout
        assert "workers.py hold" in done.stdout  # its command line
        assert re.search(r"^waiting\s+nobody$", done.stdout, re.M), done.stdout
        assert re.search(r"^file system\s+\S+", done.stdout, re.M), done.stdout
        as_json = json.loads(run_module(["status", db, "--json"], tmp_path).stdout)
        assert as_json["holder"]["pid"] == holder and as_json["waiting"] == 0
        assert as_json["holder"]["held_for_s"] is not None  # stamped on the hand-off page
    done = run_module(["status", db], tmp_path)
    assert re.search(r"^writer lock\s+free: nobody holds it$", done.stdout, re.M), done.stdout


def test_python_m_writerlock_status_refuses_bad_paths(tmp_path: Path) -> None:
    done = run_module(["status", str(tmp_path / "missing.db")], tmp_path)
    assert done.returncode == 2 and "does not exist" in done.stderr, done.stderr
    (tmp_path / "text.db").write_text("not a database")
    done = run_module(["status", str(tmp_path / "text.db")], tmp_path)
    assert done.returncode == 2 and "is not a SQLite database" in done.stderr, done.stderr
    done = run_module(["status", str(tmp_path)], tmp_path)
    assert done.returncode == 2 and "is a directory" in done.stderr, done.stderr
    done = run_module(["demo", "--processes", "0"], tmp_path)
    assert done.returncode == 2 and "out of range" in done.stderr, done.stderr


def test_python_m_writerlock_demo_commits_every_queued_publish(tmp_path: Path) -> None:
    done = run_module(
        ["demo", "--processes", "6", "--writes", "2", "--hold-ms", "2", "--json"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    results = {r["mode"]: r for r in json.loads(done.stdout)}
    assert set(results) == {"queue", "plain", "immediate"}
    queue = results["queue"]
    assert queue["committed"] == queue["publishes"] == 12 and queue["lost_updates"] == 0
    table = run_module(["demo", "--processes", "2", "--writes", "1"], tmp_path)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split()[:3] == ["mode", "committed", "failed"]
