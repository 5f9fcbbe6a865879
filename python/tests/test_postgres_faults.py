"""The Postgres writer session's failure handling through Python, against a real server: a
commit with an unknown outcome has its own class, a write never runs after its block, limits
that would mean "no limit" are refused naming the argument, the interpreter stays free while
another thread talks to the server, a forked child gets a clear error and leaves the parent
alone, ``with conn:`` is one transaction, and the smaller ones (silent close of a dead
connection, a pool refusing strangers, the address with a password equal to a name)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time

import pytest

from writerlock import postgres


def test_commit_outcome_unknown_is_its_own_connection_loss_class() -> None:
    assert issubclass(postgres.CommitOutcomeUnknown, postgres.ConnectionClosed)
    assert issubclass(postgres.CommitOutcomeUnknown, sqlite3.OperationalError)
    assert postgres.CommitOutcomeUnknown.__module__ == "writerlock.postgres"
    assert "CommitOutcomeUnknown" in postgres.__all__
    from writerlock import _errors

    err = _errors.pg_error("outcome_unknown", "the outcome of the commit is unknown", "08007", {})
    assert isinstance(err, postgres.CommitOutcomeUnknown) and err.sqlstate == "08007"


def test_a_write_used_after_its_block_runs_nothing(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(c)
    c.execute("CREATE TABLE rows (x int)")
    with c.write() as w:
        w.execute("INSERT INTO rows VALUES (1)")
    with pytest.raises(postgres.ProgrammingError, match="this write has already ended"):
        w.execute("INSERT INTO rows VALUES (2)")
    # conn.commit() inside the block ends the write's transaction too.
    with c.write() as w:
        c.commit()
        with pytest.raises(postgres.ProgrammingError, match="this write has already ended"):
            w.execute("INSERT INTO rows VALUES (3)")
        with pytest.raises(postgres.ProgrammingError, match="this write has already ended"):
            w.executemany("INSERT INTO rows VALUES (?)", [(4,), (5,)])
    assert c.execute("SELECT string_agg(x::text, ',' ORDER BY x) FROM rows").fetchone() == ('1',)


@pytest.mark.parametrize(
    "argument, value",
    [
        ("lock_wait", 0),
        ("idle_in_transaction", 0.0004),
        ("statement_timeout", 0),
        ("tcp_user_timeout", 0),
        ("connect_timeout", 0),
        ("statement_timeout", 3_000_000),
    ],
)
def test_limits_that_mean_no_limit_are_refused_naming_the_argument(argument: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"^{argument} is .* between 0\.001 and 2147483\.647 seconds"):
        postgres.connect("postgresql://nobody@127.0.0.1:1/none", **{argument: value})
    with pytest.raises(ValueError, match=argument):
        postgres.Pool("postgresql://nobody@127.0.0.1:1/none", **{argument: value})


def _longest_stall_during(call, busy: postgres.Connection) -> float:  # type: ignore[no-untyped-def]
    """Runs ``call`` while another thread has ``busy`` inside a 3 s statement; returns the
    longest gap of a thread that ticks every 5 ms (a held interpreter stops it)."""
    ticks = [time.monotonic()]
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    worker = threading.Thread(target=lambda: busy.execute("SELECT pg_sleep(3)"))
    ticker = threading.Thread(target=tick)
    ticker.start()
    worker.start()
    time.sleep(0.3)  # the worker is inside its statement now
    try:
        call()
    finally:
        worker.join(10)
        stop.set()
        ticker.join()
    return max(b - a for a, b in zip(ticks, ticks[1:]))


def test_the_interpreter_is_free_while_another_thread_talks_to_the_server(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    for name, call in (
        ("closed", lambda: c.closed),
        ("repr", lambda: repr(c)),
        ("in_transaction", lambda: c.in_transaction),
        ("close", c.close),
    ):
        stall = _longest_stall_during(call, c)
        assert stall < 1.5, f"{name} held the interpreter for {stall:.2f} s"
    pool = postgres.Pool(pg_db.url, size=2)
    pooled = pool.take()
    stall = _longest_stall_during(lambda: pool.give(pooled), pooled)
    assert stall < 1.5, f"Pool.give held the interpreter for {stall:.2f} s"
    assert pool.idle_count == 1


def test_a_forked_child_gets_a_clear_error_and_the_parent_carries_on(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(c)
    c.execute("CREATE TABLE rows (x int)")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                c.execute("SELECT 1")
            except postgres.ProgrammingError as err:
                code = 0 if "a child made by fork()" in str(err) else 2
            c.close()  # lets go of the child's copy; sends the parent's session nothing
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with c.write() as w:
        w.execute("INSERT INTO rows VALUES (1)")
    assert c.execute("SELECT count(*) FROM rows").fetchone() == (1,)


def test_with_conn_is_one_transaction_as_in_sqlite3(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    c.execute("CREATE TABLE rows (x int)")
    with pytest.raises(RuntimeError):
        with c:
            c.execute("INSERT INTO rows VALUES (1)")
            c.execute("INSERT INTO rows VALUES (2)")
            raise RuntimeError("the caller failed")
    assert not c.in_transaction
    assert c.execute("SELECT count(*) FROM rows").fetchone() == (0,)
    with c:
        assert c.in_transaction
        c.execute("INSERT INTO rows VALUES (3)")
    assert not c.in_transaction and not c.closed
    assert c.execute("SELECT string_agg(x::text, ',') FROM rows").fetchone() == ('3',)


def test_close_of_a_dead_connection_is_silent_and_pools_refuse_strangers(pg_db) -> None:  # type: ignore[no-untyped-def]
    from conftest import admin_url

    c = pg_db.connect()
    admin = pg_db.connect()
    admin.execute("SELECT pg_terminate_backend(?)", (c.pid,))
    with pytest.raises(postgres.OperationalError):
        c.execute("SELECT 1")
    c.close()
    c.close()
    pool = postgres.Pool(pg_db.url, size=2)
    stranger = pg_db.connect(version=2)
    with pytest.raises(postgres.ProgrammingError, match="writer version 2"):
        pool.give(stranger)
    elsewhere = postgres.connect(admin_url())
    with pytest.raises(postgres.ProgrammingError, match="goes to"):
        pool.give(elsewhere)
    assert pool.idle_count == 0


def test_an_unsendable_statement_is_a_client_error_and_frees_the_lock(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = pg_db.connect()
    postgres.setup_schema(c)
    c.execute("CREATE TABLE rows (x int)")
    other = pg_db.connect(lock_wait=1.0, lock_tries=1)
    with pytest.raises(postgres.ProgrammingError, match="NUL byte") as info:
        with c.write() as w:
            w.execute("INSERT INTO rows VALUES (1)")
            w.execute("INSERT INTO rows VALUES (2) -- \0")
    assert "the open transaction was rolled back" in str(info.value)
    assert not isinstance(info.value, postgres.ConnectionClosed)
    assert not c.closed and not c.in_transaction
    # The lock is free at once: one wait of 1 s would not outlast a holder left idle
    # until the idle limit (15 s).
    with other.write():
        pass
    with pytest.raises(postgres.ProgrammingError, match="more than the 65535"):
        c.execute("SELECT 1", [0] * 65_536)
    assert c.execute("SELECT count(*) FROM rows").fetchone() == (0,)


def test_own_connections_tell_the_writer_protocol_how_they_dialled(pg_db) -> None:  # type: ignore[no-untyped-def]
    # The refused writer's session lock is taken only where the server sees the session
    # come in on the port it dialled: never through a pooler (tests/pg_faults runs that
    # through a real PgBouncer).
    import urllib.parse

    import psycopg

    from writerlock import _drivers

    conn = psycopg.connect(pg_db.url)
    try:
        assert _drivers.driver_for(conn).dialled() == {"port": urllib.parse.urlsplit(pg_db.url).port}
    finally:
        conn.close()
