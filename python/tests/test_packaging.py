"""How the package is built and what it ships: one abi3 wheel from CPython 3.9, its version,
its metadata (README, classifiers, licence files, no placeholder URLs), and ``python -m writerlock status`` / ``demo``, which
work without the ``writerlock`` command (they are Python over the installed module)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
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


def test_metadata_has_the_readme_classifiers_and_licence_and_no_placeholder() -> None:
    meta = importlib.metadata.metadata("writerlock")
    assert meta["Description-Content-Type"].startswith("text/markdown")
    body = meta.get_payload() or meta["Description"] or ""  # type: ignore[attr-defined]
    assert "writerlock.WriterQueue" in body and "python -m writerlock status" in body
    # The PyPI page says how it installs: from Rust source, with a Rust toolchain.
    assert "## Install" in body and "Rust 1.85" in body and "cargo" in body, body
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["License-Expression"] == "MIT OR Apache-2.0"
    classifiers = meta.get_all("Classifier") or []
    for wanted in (
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3.9",
        "Programming Language :: Python :: 3.13",
        "Programming Language :: Python :: Implementation :: CPython",
    ):
        assert wanted in classifiers, classifiers
    # No made-up addresses: a URL either leads somewhere or is left out.
    urls = meta.get_all("Project-URL") or []
    everything = "\n".join(f"{k}: {v}" for k, v in meta.items())
    assert "example.invalid" not in everything and not any("invalid" in u for u in urls), urls


def test_the_wheel_and_the_sdist_carry_both_licence_files(tmp_path: Path) -> None:
    dist = importlib.metadata.distribution("writerlock")
    installed = {Path(str(f)).name: f for f in dist.files or [] if "licenses" in str(f)}
    assert {"LICENSE-MIT", "LICENSE-APACHE"} <= set(installed), dist.files
    text = installed["LICENSE-APACHE"].read_text()
    assert "Apache License" in text and "Version 2.0" in text
    assert "MIT License" in installed["LICENSE-MIT"].read_text()
    maturin = Path(sys.executable).parent / "maturin"
    assert maturin.exists(), f"{maturin} is missing (tests/deps.sh installs it into the venv)"
    done = subprocess.run(
        [str(maturin), "sdist", "-m", str(REPO / "python" / "Cargo.toml"), "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (sdist,) = tmp_path.glob("writerlock-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {Path(n).name for n in tar.getnames() if n.count("/") == 1}
        pkg_info = tar.extractfile(f"{sdist.name[: -len('.tar.gz')]}/PKG-INFO")
        assert pkg_info is not None
        info = pkg_info.read().decode()
    assert {"LICENSE-MIT", "LICENSE-APACHE", "PKG-INFO", "pyproject.toml"} <= names, names
    assert "License-File: LICENSE-MIT" in info and "License-File: LICENSE-APACHE" in info, info


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
        assert as_json["holder"]["held_for_source"] == "handoff-page", as_json["holder"]
        fs = as_json["filesystem"]  # named and judged by the core, as the command does
        assert fs["name"] and fs["magic"].startswith("0x"), fs
        assert fs["kind"] in ("local", "network", "fuse", "unknown"), fs
        assert (fs["warning"] is None) == (fs["kind"] == "local"), fs
        waiter = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys, writerlock\n"
                "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "q = writerlock.WriterQueue(sys.argv[1])\n"
                "print('waiting', flush=True)\n"
                "q.begin(c, wait=60.0)\n",
                db,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert waiter.stdout is not None and waiter.stdout.readline().strip() == "waiting"
            deadline = time.monotonic() + 10
            while True:
                as_json = json.loads(run_module(["status", db, "--json"], tmp_path).stdout)
                if [w["pid"] for w in as_json["queue"]] == [waiter.pid] or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert [w["pid"] for w in as_json["queue"]] == [waiter.pid] and as_json["waiting"] == 1, as_json
            # One name per fact: the pids live in `queue` and `outside`, not repeated.
            assert "waiters" not in as_json and "outside_queue" not in as_json, as_json
            # As `writerlock status --json`: the waiters oldest first, with their command lines.
            (queued,) = as_json["queue"]
            assert queued["pid"] == waiter.pid and "writerlock.WriterQueue" in queued["command"], queued
            done = run_module(["status", db], tmp_path)
            assert re.search(rf"^waiting\s+1 writer \(pid {waiter.pid}\)$", done.stdout, re.M), done.stdout
        finally:
            waiter.kill()
            waiter.wait()
    done = run_module(["status", db], tmp_path)
    assert re.search(r"^writer lock\s+free: nobody holds it$", done.stdout, re.M), done.stdout


def test_python_m_writerlock_status_refuses_bad_paths(tmp_path: Path) -> None:
    # As `writerlock status` refuses them (the core's check and messages): exit status 1,
    # the status of a failure; 2 is for a command line argparse cannot read.
    done = run_module(["status", str(tmp_path / "missing.db")], tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"python -m writerlock status: no database at {tmp_path / 'missing.db'}: check the path\n"
    (tmp_path / "text.db").write_text("not a database")
    done = run_module(["status", str(tmp_path / "text.db")], tmp_path)
    assert done.returncode == 1 and "is not a SQLite database: its first bytes" in done.stderr, done.stderr
    done = run_module(["status", str(tmp_path)], tmp_path)
    assert done.returncode == 1 and "is not a SQLite database: it is a directory" in done.stderr, done.stderr
    done = run_module(["demo", "--processes", "0"], tmp_path)
    assert done.returncode == 2 and "out of range" in done.stderr, done.stderr


def test_python_m_writerlock_status_refuses_every_in_memory_database(tmp_path: Path) -> None:
    # Every form the core takes for an in-memory database, SQLite's mode=memory URIs among
    # them (a file of that name exists, so only the URI's meaning can refuse it).
    (tmp_path / "file:shared.db?mode=memory&cache=shared").write_bytes(b"")
    for path in (":memory:", "", "file::memory:?cache=shared", "file:shared.db?mode=memory&cache=shared"):
        done = run_module(["status", path], tmp_path)
        assert done.returncode == 1, (path, done.stdout, done.stderr)
        assert done.stderr == (
            "python -m writerlock status: an in-memory database has no writer lock: give the "
            "database file's path\n"
        ), (path, done.stderr)


def test_python_m_writerlock_json_errors_are_a_json_object_with_the_same_text(tmp_path: Path) -> None:
    # As the writerlock command does: a script reading stdout gets a document either way.
    (tmp_path / "text.db").write_text("not a database")
    for path, status in ((tmp_path / "missing.db", 1), (tmp_path / "text.db", 1)):
        done = run_module(["status", str(path), "--json"], tmp_path)
        assert done.returncode == status, done.stderr
        error = json.loads(done.stdout)["error"]
        assert done.stderr == f"python -m writerlock status: {error['message']}\n", done.stderr
        assert error["exit_status"] == status


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


SMOKE = """
import sqlite3, sys, tempfile, os
import writerlock
path = os.path.join(tempfile.mkdtemp(), "ledger.db")
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("CREATE TABLE t (x)")
queue = writerlock.WriterQueue.for_connection(conn)
with queue.transaction(conn, wait=2.0):
    conn.execute("INSERT INTO t VALUES (1)")
queue.execute(conn, "INSERT INTO t VALUES (2)", wait=2.0)
assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 2
legacy = sqlite3.connect(path)                 # sqlite3's default mode: accepted
with queue.transaction(legacy, wait=2.0):
    legacy.execute("INSERT INTO t VALUES (2)")
assert not legacy.in_transaction
assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 3
conn.execute("DELETE FROM t WHERE rowid = (SELECT max(rowid) FROM t)")
if sys.version_info >= (3, 12):                # the autocommit=True connection 3.12 recommends
    auto = sqlite3.connect(path, autocommit=True)
    with queue.transaction(auto, wait=2.0):
        auto.execute("INSERT INTO t VALUES (3)")
    assert auto.execute("SELECT count(*) FROM t").fetchone()[0] == 3
from writerlock import postgres
assert postgres.WRITER_LOCK == 1279607879
print(writerlock.__version__, "%d.%d" % sys.version_info[:2])
"""


def other_cpythons() -> List[str]:
    """CPython interpreters from 3.9 on this machine besides the test's own (pyenv's, and
    /usr/bin/python3.X); a fresh Debian 12 machine has none, and then the test's own
    interpreter is the one checked."""
    found = {}
    candidates = sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob("3.*/bin/python3"))
    candidates += sorted(Path("/usr/bin").glob("python3.[0-9]*"))
    for exe in candidates:
        if not os.access(exe, os.X_OK) or not re.fullmatch(r"python3(\.\d+)?", exe.name):
            continue
        probe = subprocess.run(
            [str(exe), "-c", "import sys, sqlite3; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        version = probe.stdout.strip()
        if probe.returncode == 0 and tuple(map(int, version.split("."))) >= (3, 9):
            found.setdefault(version, str(exe))
    return [found[v] for v in sorted(found, key=lambda v: tuple(map(int, v.split("."))))]


def test_the_one_wheel_runs_on_every_cpython_from_3_9(tmp_path: Path) -> None:
    wheel = os.environ.get("WRITERLOCK_WHEEL", "")
    assert wheel and os.path.exists(wheel), "run through python/tests/run.sh, which builds the wheel"
    interpreters = other_cpythons() or [sys.executable]
    seen = []
    for i, exe in enumerate(interpreters):
        venv = tmp_path / f"venv{i}"
        subprocess.run([exe, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        py = str(venv / "bin" / "python")
        site = subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()
        # Unpack the wheel into the venv as an installer would (no pip needed in the venv).
        subprocess.run(
            [sys.executable, "-m", "zipfile", "-e", wheel, site], check=True, timeout=60
        )
        done = subprocess.run([py, "-c", SMOKE], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{exe}: {done.stdout}{done.stderr}"
        seen.append(done.stdout.split()[1])
    print("the abi3 wheel ran on CPython " + ", ".join(seen))
    assert seen


def test_python_m_writerlock_help_speaks_the_users_words(tmp_path: Path) -> None:
    for args in (["--help"], ["status", "--help"], ["demo", "--help"]):
        done = run_module(args, tmp_path)
        assert done.returncode == 0 and len(done.stdout) > 200, (args, done.stdout, done.stderr)
        text = done.stdout.lower()
        assert "seed" not in text and not re.search(r"issue\s*#?\s*\d", text), done.stdout
    assert run_module(["--version"], tmp_path).stdout.strip() == f"writerlock {writerlock.__version__}"
