"""The SQLite write queue through Python's sqlite3: transactions, queued statements, the
busy messages, real processes (multiprocessing with fork and spawn, os.fork), threads, and
the interpreter left free while a writer waits."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

import writerlock
from workers import queued_statements, setup_database, write_rows

HERE = Path(__file__).resolve().parent

TRANSACTION_BUSY = re.compile(
    r"database is busy: the transaction could not start within (?P<limit>[0-9.]+) s "
    r"\(waited (?P<waited>[0-9]+\.[0-9]) s, (?P<setting>[^)]*)\), another write held the "
    r"lock all that time; nothing was written"
)
STATEMENT_BUSY = re.compile(
    r"database is busy: the statement waited (?P<waited>[0-9]+\.[0-9]) s for another write "
    r"to end \(limit (?P<limit>[0-9.]+) s, (?P<setting>[^)]*)\) and was not run; nothing "
    r"was written"
)


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    setup_database(path)
    return path


def connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, timeout=0)


def count(path: str, sql: str = "SELECT count(*) FROM rows") -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def lock_is_held(path: str) -> bool:
    """Whether someone holds the exclusive flock on <path>.writer-lock (probed on a fresh
    open file description, so this process's own locks count too)."""
    try:
        fd = os.open(path + writerlock.LOCK_SUFFIX, os.O_RDONLY)
    except FileNotFoundError:  # never opened: nobody took a turn yet
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def start_holder(path: str) -> "Tuple[subprocess.Popen[str], int]":
    """Starts another process that holds the writer turn until it reads a line; returns it and
    its pid once it holds the turn (or kills it and fails)."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "workers.py"), "hold", path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(HERE),
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line.startswith("holding "), line
        return proc, int(line.split()[1])
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def let_holder_go(proc: "subprocess.Popen[str]") -> None:
    """Tells a process from :func:`start_holder` to commit and give the turn back."""
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()


@contextmanager
def holder_process(path: str) -> Iterator[int]:
    """Another process holding the writer turn until the block ends; yields its pid."""
    proc, pid = start_holder(path)
    try:
        yield pid
        let_holder_go(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "released"
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------------------------
# Transactions and statements


def test_transaction_commits_and_gives_the_turn_back(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    assert not q.holding
    with q.transaction(conn) as c:
        assert c is conn
        assert q.holding
        assert conn.in_transaction
        assert lock_is_held(db)
        conn.execute("INSERT INTO rows (worker) VALUES (1)")
    assert not q.holding
    assert not conn.in_transaction
    assert not lock_is_held(db)
    assert count(db) == 1
    assert 0.0 <= q.last_wait < 1.0


def test_transaction_rolls_back_on_exception(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    with pytest.raises(KeyError):
        with q.transaction(conn):
            conn.execute("INSERT INTO rows (worker) VALUES (1)")
            raise KeyError("boom")
    assert not q.holding and not conn.in_transaction
    assert count(db) == 0


def test_begin_commit_rollback(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    q.begin(conn, wait=5.0)
    conn.execute("INSERT INTO rows (worker) VALUES (1)")
    q.commit(conn)
    q.begin(conn)
    conn.execute("INSERT INTO rows (worker) VALUES (2)")
    q.rollback(conn)
    assert count(db) == 1
    with pytest.raises(sqlite3.ProgrammingError, match="there is no queued transaction to end"):
        q.commit(conn)


def test_execute_runs_one_queued_write_and_returns_the_cursor(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    cur = q.execute(conn, "INSERT INTO rows (worker, i) VALUES (?, ?)", (7, 1))
    assert isinstance(cur, sqlite3.Cursor)
    assert cur.rowcount == 1 and cur.lastrowid is not None
    q.execute(conn, "INSERT INTO rows (worker, i) VALUES (:w, :i)", {"w": 7, "i": 2})
    assert not q.holding and not conn.in_transaction
    rows = q.execute(conn, "SELECT worker, i FROM rows ORDER BY i").fetchall()
    assert rows == [(7, 1), (7, 2)]


def test_reads_do_not_queue(db: str) -> None:
    with holder_process(db):
        q = writerlock.WriterQueue(db)
        conn = connect(db)
        start = time.monotonic()
        assert q.execute(conn, "SELECT count(*) FROM rows", wait=5.0).fetchone() == (0,)
        assert time.monotonic() - start < 1.0


def test_statement_inside_an_open_transaction_runs_at_once(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    with q.transaction(conn):
        q.execute(conn, "INSERT INTO rows (worker) VALUES (1)")
        assert q.holding
    assert count(db) == 1


def test_queued_statement_failure_keeps_the_sqlite3_class(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    conn.execute("CREATE TABLE u (x UNIQUE)")
    q.execute(conn, "INSERT INTO u VALUES (1)")
    with pytest.raises(sqlite3.IntegrityError) as info:
        q.execute(conn, "INSERT INTO u VALUES (1)")
    assert str(info.value) == "the statement failed: UNIQUE constraint failed: u.x"
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    assert not q.holding and not lock_is_held(db)


def test_in_memory_database_needs_no_queue() -> None:
    q = writerlock.WriterQueue(":memory:")
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    with q.transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


# ---------------------------------------------------------------------------------------------
# Errors


def test_busy_transaction_has_the_exact_text_and_details(db: str) -> None:
    with holder_process(db) as holder:
        q = writerlock.WriterQueue(db)
        conn = connect(db)
        start = time.monotonic()
        with pytest.raises(sqlite3.OperationalError) as info:
            q.begin(conn, wait=1.0)
        elapsed = time.monotonic() - start
    err = info.value
    assert isinstance(err, writerlock.Busy)
    m = TRANSACTION_BUSY.fullmatch(str(err))
    assert m, str(err)
    # A Python program has no eZ settings: the message names the argument the limit came from.
    assert m["limit"] == "1" and m["setting"] == "the wait argument"
    assert str(err) == (
        f"database is busy: the transaction could not start within 1 s (waited "
        f"{err.waited:.1f} s, the wait argument), another write held "
        f"the lock all that time; nothing was written"
    )
    assert 1.0 <= err.waited < 3.0 and elapsed >= 1.0
    assert err.limit == 1.0
    assert err.setting == "the wait argument"
    assert err.holder_pid == holder
    assert err.sqlite_errorcode == 5 and err.sqlite_errorname == "SQLITE_BUSY"
    assert not q.holding and not conn.in_transaction


def test_busy_statement_has_the_exact_text(db: str) -> None:
    with holder_process(db) as holder:
        q = writerlock.WriterQueue(db)
        conn = connect(db)
        with pytest.raises(writerlock.Busy) as info:
            q.execute(conn, "INSERT INTO rows (worker) VALUES (1)", wait=0.5)
    err = info.value
    m = STATEMENT_BUSY.fullmatch(str(err))
    assert m, str(err)
    assert m["limit"] == "0.5" and m["setting"] == "the wait argument"
    assert str(err) == (
        f"database is busy: the statement waited {float(m['waited']):.1f} s for another write "
        f"to end (limit 0.5 s, the wait argument) and was not run; nothing was written"
    )
    assert 0.5 <= float(m["waited"]) <= 2.5 and abs(err.waited - float(m["waited"])) <= 0.051
    assert err.limit == 0.5 and err.holder_pid == holder
    assert count(db) == 0


def test_busy_names_the_setting_it_is_given(db: str) -> None:
    with holder_process(db):
        q = writerlock.WriterQueue(db)
        conn = connect(db)
        with pytest.raises(writerlock.Busy) as info:
            q.begin(conn, wait=0.2, setting=writerlock.CLI_TRANSACTION_SETTING)
    # Transaction waits below 1 s are raised to 1 s. The message quotes the measured wait
    # (later than 1.0 s on a loaded machine): the exact sentence with that number.
    m = TRANSACTION_BUSY.fullmatch(str(info.value))
    assert m, str(info.value)
    assert str(info.value) == (
        f"database is busy: the transaction could not start within 1 s (waited "
        f"{float(m['waited']):.1f} s, [DatabaseSettings] SQLiteCLITransactionWait), another "
        f"write held the lock all that time; nothing was written"
    )
    assert 1.0 <= float(m["waited"]) <= 3.0, m["waited"]
    assert info.value.setting == writerlock.CLI_TRANSACTION_SETTING


def test_not_started_when_begin_immediate_fails(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not an SQLite database file, only text" * 100)
    q = writerlock.WriterQueue(str(path))
    conn = sqlite3.connect(str(path), isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as info:
        q.begin(conn)
    err = info.value
    assert isinstance(err, writerlock.NotStarted)
    assert str(err) == (
        "the transaction could not start: file is not a database; nothing was written"
    )
    assert err.sqlite_errorcode == 26
    assert isinstance(err.__cause__, sqlite3.DatabaseError)
    assert not q.holding and not lock_is_held(str(path))


@pytest.mark.parametrize("level", ["", "DEFERRED", "IMMEDIATE"])
def test_connection_in_sqlite3s_default_mode_is_accepted(db: str, level: str) -> None:
    # sqlite3.connect(path) has isolation_level "": sqlite3 opens a transaction of its own
    # before a write outside one. The queue's BEGIN IMMEDIATE comes first, so sqlite3 opens
    # none, and nothing is left open when the turn ends.
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=level)
    q.begin(conn)
    conn.execute("INSERT INTO rows (worker) VALUES (1)")
    q.commit(conn)
    assert not conn.in_transaction and not q.holding and not lock_is_held(db)
    with q.transaction(conn):
        conn.execute("INSERT INTO rows (worker) VALUES (2)")
    assert not conn.in_transaction and not q.holding
    # A queued statement runs in the queue's own transaction and is committed with it.
    q.execute(conn, "INSERT INTO rows (worker) VALUES (3)")
    assert not conn.in_transaction and not q.holding and not lock_is_held(db)
    assert count(db) == 3  # another connection sees all three
    with pytest.raises(RuntimeError):
        with q.transaction(conn):
            conn.execute("INSERT INTO rows (worker) VALUES (4)")
            raise RuntimeError("rolled back")
    assert count(db) == 3 and not conn.in_transaction
    # A transaction sqlite3 opened itself (a write outside the queue) is refused as ever.
    conn.execute("INSERT INTO rows (worker) VALUES (5)")
    assert conn.in_transaction
    with pytest.raises(sqlite3.OperationalError, match="already inside a transaction"):
        q.begin(conn)
    conn.rollback()


def test_connection_with_autocommit_false_is_refused(db: str) -> None:
    # Python 3.12's `autocommit=False` keeps a transaction open at all times. Before 3.12
    # the attribute does not exist, so a subclass provides it.
    if sys.version_info >= (3, 12):
        conn = sqlite3.connect(db, autocommit=False)
    else:

        class Explicit(sqlite3.Connection):
            autocommit = False

        conn = sqlite3.connect(db, isolation_level=None, factory=Explicit)
    q = writerlock.WriterQueue(db)
    with pytest.raises(writerlock.NotAutocommit, match="autocommit=False") as info:
        q.begin(conn)
    # Python 3.12+ has `autocommit`: the advice is the one its documentation gives.
    assert "open it with sqlite3.connect(path, autocommit=True)" in str(info.value)
    assert not q.holding


def test_legacy_transaction_control_on_python_3_12_is_accepted(db: str) -> None:
    # On 3.12+ a connection has `autocommit` (sqlite3.LEGACY_TRANSACTION_CONTROL, -1, by
    # default); before 3.12 a subclass provides it. isolation_level then decides: accepted.
    if sys.version_info >= (3, 12):
        conn = sqlite3.connect(db)
    else:

        class Legacy(sqlite3.Connection):
            autocommit = -1

        conn = sqlite3.connect(db, factory=Legacy)
    q = writerlock.WriterQueue(db)
    with q.transaction(conn):
        conn.execute("INSERT INTO rows (worker) VALUES (1)")
    assert count(db) == 1 and not q.holding and not conn.in_transaction


def test_connection_inside_a_transaction_is_refused(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = connect(db)
    conn.execute("BEGIN")
    with pytest.raises(sqlite3.OperationalError, match="already inside a transaction"):
        q.begin(conn)
    assert not q.holding and not lock_is_held(db)
    conn.execute("ROLLBACK")


def test_same_thread_cannot_take_the_turn_twice(db: str) -> None:
    q = writerlock.WriterQueue(db)
    a, b = connect(db), connect(db)
    q.begin(a)
    with pytest.raises(sqlite3.ProgrammingError, match="already holds the writer turn"):
        q.begin(b)
    q.rollback(a)


def test_busy_survives_pickling() -> None:
    import pickle

    err = writerlock.Busy("database is busy: ...", 1.5, 1.0, "[X] Y", 42)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is writerlock.Busy
    assert (str(back), back.waited, back.limit, back.setting, back.holder_pid) == (
        "database is busy: ...",
        1.5,
        1.0,
        "[X] Y",
        42,
    )


# ---------------------------------------------------------------------------------------------
# Real processes


def _all_committed(db: str, expected: int) -> None:
    assert count(db) == expected
    assert count(db, "SELECT n FROM counter") == expected
    # The transactions' spans (after begin, before commit) never overlap.
    conn = sqlite3.connect(db)
    spans: List[Tuple[int, int]] = conn.execute(
        "SELECT t0, t1 FROM rows WHERE t0 IS NOT NULL ORDER BY t0"
    ).fetchall()
    conn.close()
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, "two transactions overlapped"


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_many_processes_write_through_the_queue(db: str, method: str) -> None:
    processes, each = 8, 12
    ctx = multiprocessing.get_context(method)
    # With fork the children inherit this queue, already used here (its lock files are
    # open); with spawn it travels pickled and each child opens its own.
    queue = writerlock.WriterQueue(db)
    write_rows(queue, db, -1, 1)
    with ctx.Pool(processes) as pool:
        results = [
            pool.apply_async(write_rows, (queue, db, w, each)) for w in range(processes)
        ]
        done = [r.get(timeout=120) for r in results]
    assert done == [each] * processes
    _all_committed(db, processes * each + 1)
    pids = count(db, "SELECT count(DISTINCT pid) FROM rows")
    assert pids >= 2


def test_os_fork_children_write_through_the_inherited_queue(db: str) -> None:
    queue = writerlock.WriterQueue(db)
    write_rows(queue, db, -1, 1)
    children, each = 6, 10
    pids = []
    for w in range(children):
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                code = 0 if write_rows(queue, db, w, each) == each else 1
            finally:
                os._exit(code)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    _all_committed(db, children * each + 1)


def test_forked_child_never_takes_over_the_parents_turn(db: str) -> None:
    queue = writerlock.WriterQueue(db)
    conn = connect(db)
    queue.begin(conn)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the turn is the parent's, not ours
        os.close(r)
        result = b"?"
        try:
            child_conn = connect(db)
            if queue.holding:
                result = b"H"  # wrongly believes it holds the parent's turn
            else:
                try:
                    queue.begin(child_conn, wait=1.0)
                    result = b"G"  # wrongly granted while the parent holds it
                except writerlock.Busy as err:
                    result = b"B" if err.holder_pid == os.getppid() else b"P"
        finally:
            os.write(w, result)
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    result = os.read(r, 1)
    os.close(r)
    assert result == b"B", result
    # The child's exit released nothing of ours: the lock file is still held (probed on a
    # fresh open file description; `queue.holding` is this process's own flag and would
    # say so whatever the child did).
    assert lock_is_held(db)
    conn.execute("INSERT INTO rows (worker) VALUES (1)")
    queue.commit(conn)
    assert count(db) == 1


def test_queued_statements_from_many_processes_all_land(db: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(6) as pool:
        done = pool.starmap(queued_statements, [(db, w, 25) for w in range(6)])
    assert done == [25] * 6
    assert count(db) == 150


# ---------------------------------------------------------------------------------------------
# Threads


def _threads_exclude_each_other(db: str, shared: bool) -> None:
    threads, each = 6, 8
    shared_queue = writerlock.WriterQueue(db)
    active = 0
    max_active = 0
    lock_seen = []
    errors: List[BaseException] = []
    guard = threading.Lock()

    def run() -> None:
        nonlocal active, max_active
        queue = shared_queue if shared else writerlock.WriterQueue(db)
        conn = sqlite3.connect(db, isolation_level=None, timeout=0, check_same_thread=False)
        try:
            for _ in range(each):
                with queue.transaction(conn, wait=60):
                    with guard:
                        active += 1
                        max_active = max(max_active, active)
                    lock_seen.append(lock_is_held(db))
                    n = conn.execute("SELECT n FROM counter").fetchone()[0]
                    time.sleep(0.002)
                    conn.execute("UPDATE counter SET n = ?", (n + 1,))
                    with guard:
                        active -= 1
        except BaseException as err:  # reported below
            errors.append(err)
        finally:
            conn.close()

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not errors, errors
    assert max_active == 1
    assert all(lock_seen) and len(lock_seen) == threads * each
    assert count(db, "SELECT n FROM counter") == threads * each


def test_threads_with_their_own_handles_exclude_each_other(db: str) -> None:
    _threads_exclude_each_other(db, shared=False)


def test_threads_sharing_one_handle_take_turns(db: str) -> None:
    _threads_exclude_each_other(db, shared=True)


def test_the_interpreter_is_free_while_a_writer_waits(db: str) -> None:
    ticks = 0
    stop = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    with holder_process(db):
        q = writerlock.WriterQueue(db)
        conn = connect(db)
        t = threading.Thread(target=tick)
        t.start()
        try:
            start_ticks = ticks
            with pytest.raises(writerlock.Busy):
                q.begin(conn, wait=1.5)  # waits 1.5 s in the flock loop
            during = ticks - start_ticks
        finally:
            stop.set()
            t.join()
    # About one tick per millisecond: with the interpreter held there would be none.
    assert during >= 300, during


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_database_replaced_by_rename_is_refused_and_nothing_written(
    tmp_path: Path, journal: str
) -> None:
    # A restore or a deploy renames a new file over the database while a connection has
    # the old one open: its writes would land in the orphaned file.
    path = str(tmp_path / "site.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE rows (worker INTEGER)")
    q = writerlock.WriterQueue(path)
    with q.transaction(conn):
        conn.execute("INSERT INTO rows (worker) VALUES (1)")
    # Checkpointed first: a WAL left beside the database would be read into the restored
    # file by its next reader (the operator's side of a restore, documented), whatever the
    # queue does.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    restored = str(tmp_path / "restored.db")
    fresh = sqlite3.connect(restored)
    fresh.execute("CREATE TABLE rows (worker INTEGER)")
    fresh.commit()
    fresh.close()
    os.rename(restored, path)
    for call in (
        lambda: q.begin(conn),
        lambda: q.transaction(conn).__enter__(),
        lambda: q.execute(conn, "INSERT INTO rows (worker) VALUES (2)"),
    ):
        with pytest.raises(writerlock.WrongDatabase) as info:
            call()
        assert path in str(info.value)
        assert "open the database again" in str(info.value)
        assert not q.holding and not conn.in_transaction
    assert count(path) == 0  # the restored file: nothing written to either
    reopened = sqlite3.connect(path, isolation_level=None)
    with q.transaction(reopened):
        reopened.execute("INSERT INTO rows (worker) VALUES (3)")
    assert count(path) == 1


def test_removed_database_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "site.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE rows (worker INTEGER)")
    q = writerlock.WriterQueue(path)
    q.begin(conn)
    q.commit(conn)
    os.unlink(path)
    with pytest.raises(writerlock.WrongDatabase, match="replaced or removed"):
        q.begin(conn)
    assert not q.holding


class LoggingConnection(sqlite3.Connection):
    """An integrator's connection that logs every statement and wraps execute()."""

    seen: "list[str]" = []

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        LoggingConnection.seen.append(sql)
        return super().execute(sql, *args)  # type: ignore[arg-type]


class RecursingConnection(sqlite3.Connection):
    """A wrapper that runs every statement through the queue: it recursed into the queue."""

    queue: "writerlock.WriterQueue | None" = None

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        if self.queue is not None and not self.in_transaction and not sql.lstrip().upper().startswith("SELECT"):
            return self.queue.execute(self, sql, *args)  # type: ignore[no-any-return]
        return super().execute(sql, *args)  # type: ignore[arg-type]


def test_queue_statements_never_pass_through_the_hosts_execute(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None, factory=LoggingConnection)
    LoggingConnection.seen.clear()
    q.begin(conn)
    conn.execute("INSERT INTO rows (worker) VALUES (1)")
    q.commit(conn)
    with q.transaction(conn):
        conn.execute("INSERT INTO rows (worker) VALUES (2)")
    q.execute(conn, "INSERT INTO rows (worker) VALUES (3)")
    q.begin(conn)
    q.rollback(conn)
    # Only the caller's own conn.execute() calls: no PRAGMA, BEGIN, COMMIT or ROLLBACK of
    # the queue's. A statement given to queue.execute() runs through sqlite3's own
    # Connection.execute, so a wrapper that routes writes through the queue cannot recurse.
    assert LoggingConnection.seen == [
        "INSERT INTO rows (worker) VALUES (1)",
        "INSERT INTO rows (worker) VALUES (2)",
    ]
    assert count(db) == 3


def test_connection_that_routes_writes_through_the_queue_does_not_recurse(db: str) -> None:
    q = writerlock.WriterQueue(db)
    conn = sqlite3.connect(db, isolation_level=None, factory=RecursingConnection)
    conn.queue = q
    with q.transaction(conn):
        conn.execute("INSERT INTO rows (worker) VALUES (1)")
    conn.execute("INSERT INTO rows (worker) VALUES (2)")  # queued by the wrapper itself
    assert count(db) == 2 and not q.holding


def test_two_queues_of_one_database_nested_in_one_thread_are_refused_at_once(db: str) -> None:
    # The inner wait could only wait for this very thread: refused at once, naming the
    # database, instead of waiting out its limit and blaming another writer.
    q1 = writerlock.WriterQueue(db)
    q2 = writerlock.WriterQueue(db)
    with q1.turn(wait=5.0):
        started = time.monotonic()
        with pytest.raises(sqlite3.ProgrammingError) as info:
            with q2.turn(wait=3.0):
                pass
        assert time.monotonic() - started < 1.0
        assert "through another writer queue handle" in str(info.value)
        assert db in str(info.value)
        assert not isinstance(info.value, writerlock.Busy)
    # Threads of one process still wait for each other: another thread gets the turn
    # once this one gave it back.
    with q2.turn(wait=5.0):
        assert q2.holding
