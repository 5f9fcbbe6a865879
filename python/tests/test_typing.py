"""The package's types as a typed program sees them: ``mypy --strict`` on a typed example
(every ``with`` block of the package returns from inside, which fails when a stub types
``__exit__`` as returning ``bool``), and ``stubtest``, which compares the stubs with the
installed module. Both run with the virtualenv's mypy (tests/deps.sh installs it)."""

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
