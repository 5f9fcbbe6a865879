"""The exclusion the queue itself provides, with SQLite out of the way.

A check that holds the turn inside ``BEGIN IMMEDIATE`` passes whether or not the queue
excludes anything: SQLite's own write lock serializes those writers and its busy error looks
the same. These tests hold the turn alone (``acquire()``/``release()``, ``turn()``, or a plain
``flock()`` on the lock file), so only the queue's ``flock()`` on ``<db>.writer-lock`` keeps
writers apart; and they check that no program a writer starts keeps its turn after it dies.
All with real processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

import writerlock
from test_sqlite_queue import STATEMENT_BUSY, TRANSACTION_BUSY, connect, count
from workers import setup_database

HERE = Path(__file__).resolve().parent


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    setup_database(path)
    # The lock files exist from the first turn on.
    conn = connect(path)
    writerlock.WriterQueue(path).execute(conn, "UPDATE counter SET n = n")
    conn.close()
    return path


def python(code: str, *args: str) -> "subprocess.Popen[str]":
    """Another Python process running ``code`` (dedented) with ``args``, its stdin and stdout
    piped as text."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(HERE),
    )


def end(proc: "subprocess.Popen[str]") -> None:
    """Kills ``proc`` if it still runs, reaps it and closes its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


# ---------------------------------------------------------------------------------------------
# Turns held alone never overlap

TURN_TAKER = """
    import sys, time, writerlock
    path, strategy, how, turns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    q = writerlock.WriterQueue(path, strategy=strategy)
    print("ready", flush=True)
    sys.stdin.readline()  # everyone starts together
    spans = []
    for _ in range(turns):
        if how == "turn":
            with q.turn(wait=60.0):
                enter = time.monotonic_ns()
                time.sleep(0.002)
                leave = time.monotonic_ns()
        else:
            q.acquire(wait=60.0)
            enter = time.monotonic_ns()
            time.sleep(0.002)
            leave = time.monotonic_ns()
            q.release()
        spans.append(f"{enter} {leave}")
    print("\\n".join(spans), flush=True)
"""


def test_turns_taken_alone_by_several_processes_never_overlap(db: str) -> None:
    # Four processes, both strategies, both ways of holding the turn alone; no SQLite
    # transaction anywhere. CLOCK_MONOTONIC is one clock for every process of the machine.
    setups = [("handoff", "acquire"), ("poll", "turn"), ("handoff", "turn"), ("poll", "acquire")]
    turns = 20
    procs = [python(TURN_TAKER, db, strategy, how, str(turns)) for strategy, how in setups]
    spans: List[Tuple[int, int, int]] = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for writer, proc in enumerate(procs):
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"writer {writer} failed"
            for line in out.split("\n"):
                if line.strip():
                    enter, leave = line.split()
                    spans.append((int(enter), int(leave), writer))
    finally:
        for proc in procs:
            end(proc)
    assert len(spans) == len(setups) * turns
    spans.sort()
    overlaps = [
        f"writer {b[2]} entered {(a[1] - b[0]) / 1e6:.3f} ms before writer {a[2]} left"
        for a, b in zip(spans, spans[1:])
        if b[0] < a[1]
    ]
    assert not overlaps, f"{len(overlaps)} of {len(spans)} turns overlapped: {overlaps[:3]}"


# ---------------------------------------------------------------------------------------------
# A held turn locks the lock file for every other process

PROBE = """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("held")
    else:
        print("free")
"""


def probe(path: str) -> str:
    """``flock(LOCK_EX | LOCK_NB)`` on ``<path>.writer-lock`` from another process: "held" or
    "free"."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), path + writerlock.LOCK_SUFFIX],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("strategy", ["handoff", "poll"])
def test_a_held_turn_locks_the_lock_file_for_other_processes(db: str, strategy: str) -> None:
    q = writerlock.WriterQueue(db, strategy=strategy)
    assert probe(db) == "free"
    q.acquire(wait=2.0)
    try:
        assert probe(db) == "held", "another process took LOCK_EX while the turn was held"
    finally:
        q.release()
    assert probe(db) == "free", "the lock file is still held after release()"
    with q.turn(wait=2.0):
        assert probe(db) == "held", "another process took LOCK_EX inside turn()"
    assert probe(db) == "free"


# ---------------------------------------------------------------------------------------------
# A queued writer waits for a holder that is in no SQLite transaction

HOLDER = """
    import fcntl, os, sys, writerlock
    path, how = sys.argv[1], sys.argv[2]
    if how == "acquire":
        q = writerlock.WriterQueue(path)
        q.acquire(wait=10.0)
    else:  # a program that knows only the lock file
        fd = os.open(path + writerlock.LOCK_SUFFIX, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
    print("holding", flush=True)
    sys.stdin.readline()
"""


@contextmanager
def holder_outside_sqlite(path: str, how: str) -> Iterator[int]:
    """Another process holding the writer lock with no SQLite transaction (``acquire()``, or a
    plain ``flock()``) until the block ends; yields its pid."""
    proc = python(HOLDER, path, how)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "holding"
        yield proc.pid
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=10) == 0
    finally:
        end(proc)


def sqlite_is_free(path: str) -> bool:
    """Whether SQLite's own write lock is free: another connection's BEGIN IMMEDIATE."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


@pytest.mark.parametrize("how", ["acquire", "flock"])
def test_a_queued_writer_waits_for_a_holder_outside_any_sqlite_transaction(
    db: str, how: str
) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    with holder_outside_sqlite(db, how) as holder:
        assert sqlite_is_free(db), "SQLite is locked: this test would not show the queue"
        start = time.monotonic()
        with pytest.raises(writerlock.Busy) as info:
            q.begin(conn, wait=1.0)
        elapsed = time.monotonic() - start
        err = info.value
        m = TRANSACTION_BUSY.fullmatch(str(err))
        assert m, str(err)
        waited = float(m["waited"])
        assert str(err) == (
            f"database is busy: the transaction could not start within 1 s (waited "
            f"{waited:.1f} s, the wait argument), another write held the lock all that time; "
            f"nothing was written"
        )
        assert 1.0 <= waited <= 3.0 and elapsed >= 1.0, (waited, elapsed)
        assert abs(err.waited - waited) <= 0.051
        assert err.holder_pid == holder
        assert not q.holding and not conn.in_transaction

        with pytest.raises(writerlock.Busy) as info:
            q.execute(conn, "INSERT INTO rows (worker) VALUES (1)", wait=0.3)
        m = STATEMENT_BUSY.fullmatch(str(info.value))
        assert m, str(info.value)
        waited = float(m["waited"])
        assert str(info.value) == (
            f"database is busy: the statement waited {waited:.1f} s for another write to end "
            f"(limit 0.3 s, the wait argument) and was not run; nothing was written"
        )
        assert 0.3 <= waited <= 2.3, waited
        assert info.value.holder_pid == holder
        assert not q.holding
        assert sqlite_is_free(db)
    conn.close()
    assert count(db) == 0
    start = time.monotonic()
    q.acquire(wait=5.0)
    took = time.monotonic() - start
    q.release()
    assert took < 1.0, f"the freed turn took {took:.3f} s"


# ---------------------------------------------------------------------------------------------
# A program a holder starts does not keep its turn after the holder dies

SPAWNING_HOLDER = """
    import os, subprocess, sys, writerlock
    path, how = sys.argv[1], sys.argv[2]
    q = writerlock.WriterQueue(path)
    q.acquire(wait=10.0)
    argv = ["sleep", "30"]
    quiet = os.open(os.devnull, os.O_WRONLY)
    if how == "Popen(close_fds=False)":
        pid = subprocess.Popen(argv, stdout=quiet, stderr=quiet, close_fds=False).pid
    elif how == "posix_spawn":
        pid = os.posix_spawnp(
            "sleep", argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, quiet, 1)]
        )
    else:  # os.system: the shell and its background job
        r, w = os.pipe()
        os.set_inheritable(w, True)
        os.system(f"sleep 30 >/dev/null 2>&1 </dev/null & echo $! >&{w}")
        os.close(w)
        pid = int(os.read(r, 64))
    print(pid, flush=True)
    sys.stdin.readline()  # killed here, holding the turn
"""


# subprocess.Popen's default (close_fds=True) closes every other descriptor in the child
# itself, and os.fork() runs the library's fork handler, so neither would show whether the
# lock files are opened close-on-exec; these three keep every inheritable descriptor.
@pytest.mark.parametrize("how", ["Popen(close_fds=False)", "posix_spawn", "os.system"])
def test_a_program_started_by_a_holder_does_not_keep_the_turn_after_it_dies(
    db: str, how: str
) -> None:
    proc = python(SPAWNING_HOLDER, db, how)
    sleeper = 0
    try:
        assert proc.stdout is not None
        sleeper = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)  # the holder dies holding the turn
        proc.wait(timeout=10)
        os.kill(sleeper, 0)  # the program it started lives on
        q = writerlock.WriterQueue(db)
        start = time.monotonic()
        try:
            q.acquire(wait=2.0)
        except writerlock.Busy as err:
            pytest.fail(
                f"the dead holder's program (pid {sleeper}, started with {how}) kept the "
                f"writer turn: {err}"
            )
        took = time.monotonic() - start
        q.release()
        assert took < 0.5, f"the dead holder's turn took {took:.3f} s to come free"
    finally:
        end(proc)
        if sleeper:
            try:
                os.kill(sleeper, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------------------------------------
# Lock files an operator removes or replaces while a turn is held

TURN_HOLDER = """
    import sys, time, writerlock
    path, strategy, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
    q = writerlock.WriterQueue(path, strategy=strategy)
    q.acquire(wait=10.0)
    enter = time.monotonic_ns()
    print("holding", flush=True)
    time.sleep(hold)
    leave = time.monotonic_ns()
    q.release()
    print(f"{enter} {leave}", flush=True)
"""


def change_file(path: str, how: str) -> None:
    """What an operator does to a lock file: ``rm`` it, or rename a new file over it."""
    if how == "rm":
        os.unlink(path)
    else:
        Path(path + ".new").write_bytes(b"")
        os.rename(path + ".new", path)


@pytest.mark.parametrize("strategy", ["handoff", "poll"])
@pytest.mark.parametrize("suffix", [".writer-lock", ".writer-queue"])
@pytest.mark.parametrize("how", ["rm", "rename"])
def test_a_lock_file_removed_or_replaced_while_held_lets_no_second_writer_in(
    db: str, strategy: str, suffix: str, how: str
) -> None:
    # Another process holds the turn while a cleanup job removes a lock file or a restore
    # renames a new one over it. Neither a long-lived handle of this process (a worker that
    # keeps its queue between jobs, opened before the change) nor a fresh one may enter
    # before the holder leaves.
    long_lived = writerlock.WriterQueue(db, strategy=strategy)
    long_lived.acquire(wait=5.0)
    long_lived.release()
    for queue in (long_lived, writerlock.WriterQueue(db, strategy=strategy)):
        holder = python(TURN_HOLDER, db, strategy, "0.5")
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "holding"
            change_file(db + suffix, how)
            queue.acquire(wait=10.0)
            entered = time.monotonic_ns()
            queue.release()
            out, _ = holder.communicate(timeout=10)
            assert holder.returncode == 0, out
            leave = int(out.split()[1])
            assert entered > leave, (
                f"a writer entered {(leave - entered) / 1e6:.3f} ms before the holder left "
                f"({how} of {suffix}, {strategy})"
            )
        finally:
            end(holder)
