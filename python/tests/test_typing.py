"""The package's types as a typed program sees them: ``mypy --strict`` on a typed example
(every ``with`` block of the package returns from inside, which fails when a stub types
``__exit__`` as returning ``bool``), and ``stubtest``, which compares the native module with
its stub ``writerlock/_native.pyi`` and type-checks the Python modules, which are their own
stubs. Both run with the virtualenv's mypy (tests/deps.sh installs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "mypy.ini"


def run_mypy(args: List[str], cwd: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_mypy_is_installed() -> None:
    # Not a skip: without mypy the two checks below cannot run, which is a failure.
    import mypy  # noqa: F401


def test_mypy_strict_accepts_a_typed_program(tmp_path: Path) -> None:
    example = str(HERE / "typed" / "example.py")
    args = ["mypy", "--config-file", str(CONFIG), "--cache-dir", str(tmp_path / "cache"), example]
    done = run_mypy(args, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_stubtest_finds_the_stubs_match_the_module(tmp_path: Path) -> None:
    done = run_mypy(
        [
            "mypy.stubtest",
            "writerlock",
            "--mypy-config-file",
            str(CONFIG),
            "--allowlist",
            str(HERE / "stubtest-allowlist.txt"),
        ],
        tmp_path,  # not the source tree: the installed package is checked
    )
    assert done.returncode == 0, done.stdout + done.stderr


MISTYPED = '''
import writerlock
from writerlock import _native, postgres

postgres.connect("postgresql://x", lock_wiat=5.0)
postgres.session_options(lock_tries="3")
writerlock.WriterQueue("x.db").acquire(wait="5")
_native.pg_alert_text("10.0.0.5", "1", 2)
_native.lock_status("x.db")["holdr"]
'''


def test_mypy_strict_rejects_mistyped_calls(tmp_path: Path) -> None:
    # The other side of the typed example: the settings keywords and the native module are
    # typed, not Any, so a misspelled setting or a wrong argument type is an error.
    example = tmp_path / "mistyped.py"
    example.write_text(MISTYPED)
    args = ["mypy", "--config-file", str(CONFIG), "--cache-dir", str(tmp_path / "cache"), str(example)]
    done = run_mypy(args, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    for line, what in (
        (5, 'Unexpected keyword argument "lock_wiat"'),
        (6, 'Argument "lock_tries" to "session_options" has incompatible type "str"'),
        (7, 'Argument "wait" to "acquire" of "WriterQueue" has incompatible type "str"'),
        (8, 'Argument 2 to "pg_alert_text" has incompatible type "str"'),
        (9, 'TypedDict "_LockStatus" has no key "holdr"'),
    ):
        assert f"mistyped.py:{line}: error: {what}" in done.stdout, (what, done.stdout)
