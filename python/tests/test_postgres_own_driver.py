"""The writer session on the user's own connection, against a real server: psycopg 3 (in and
out of autocommit) and psycopg2 opened with session_options(), checked with check_session(),
written with write(conn, ledger) through the core's writer protocol. The same lock and floor
tests the native connection has: three cancelled waits with the exact text, the LW001
refusal with its refusal lock, and alerts raised to a later writer."""

from __future__ import annotations

import sqlite3
import time

import psycopg
import psycopg2
import psycopg_pool
import pytest

from conftest import DRIVERS, backend_alive, backend_pid, generation, in_transaction, wait_until
from writerlock import postgres

REFUSAL_1_2 = (
    "ledger writer version 1 is below version 2, the oldest the shared database allows; "
    "update its code and restart it"
)
REFUSAL_0_1 = (
    "ledger writer version 0 is below version 1, the oldest the shared database allows; "
    "update its code and restart it"
)


@pytest.fixture(params=sorted(DRIVERS))
def open_driver(request, pg_db):  # type: ignore[no-untyped-def]
    """Opens driver connections to the test's database, closed afterwards."""
    opened = []

    def make(**settings):  # type: ignore[no-untyped-def]
        conn = DRIVERS[request.param](pg_db.url, **settings)
        opened.append(conn)
        return conn

    make.name = request.param  # type: ignore[attr-defined]
    yield make
    for conn in opened:
        conn.close()


def _idle(conn) -> bool:  # type: ignore[no-untyped-def]
    return not in_transaction(conn)


def _ledger(pg_db):  # type: ignore[no-untyped-def]
    native = pg_db.connect()
    postgres.setup_schema(native)
    native.execute("INSERT INTO ledgers (slug, generation) VALUES ('main', 0), ('other', 0)")
    return native


def test_session_options_are_the_exact_libpq_keywords() -> None:
    opts = postgres.session_options()
    assert opts == {
        "options": "-c lock_timeout=10s -c idle_in_transaction_session_timeout=15s "
        "-c statement_timeout=60s -c agentihooks.ledger_writer_version=1 "
        "-c tcp_keepalives_idle=30s -c tcp_keepalives_interval=10s "
        "-c tcp_keepalives_count=3 -c tcp_user_timeout=60s",
        "keepalives": "1",
        "keepalives_idle": "30",
        "keepalives_interval": "10",
        "keepalives_count": "3",
        "tcp_user_timeout": "60000",
        "connect_timeout": "10",
        # Named after the program, as the native connections are ("python pytest" here).
        "application_name": opts["application_name"],
    }
    assert opts["application_name"].startswith("python") and "pytest" in opts["application_name"]
    changed = postgres.session_options(version=2, required=2, lock_wait=1.5)
    assert "-c lock_timeout=1500ms" in changed["options"]
    assert "-c agentihooks.ledger_writer_version=2" in changed["options"]
    with pytest.raises(ValueError, match="would refuse its own writes"):
        postgres.session_options(version=1, required=2)


def test_driver_connection_carries_the_settings_and_passes_the_check(open_driver) -> None:  # type: ignore[no-untyped-def]
    conn = open_driver()
    cur = conn.cursor()
    shown = []
    for name in ("lock_timeout", "idle_in_transaction_session_timeout", "statement_timeout"):
        cur.execute(f"SHOW {name}")
        shown.append(cur.fetchone()[0])
    assert shown == ["10s", "15s", "1min"]
    if not getattr(conn, "autocommit", False):
        conn.rollback()
    checks = postgres.check_session(conn)
    assert [c[0] for c in checks][:4] == [
        "lock_timeout",
        "idle_in_transaction_session_timeout",
        "statement_timeout",
        "agentihooks.ledger_writer_version",
    ]
    assert all(status == "in effect" for _, _, _, status in checks), checks
    assert _idle(conn)  # the check leaves no transaction open


def test_check_session_refuses_a_connection_without_the_settings(pg_db) -> None:  # type: ignore[no-untyped-def]
    plain = psycopg.connect(pg_db.url)
    try:
        with pytest.raises(postgres.SettingNotInEffect) as info:
            postgres.check_session(plain)
        assert isinstance(info.value, sqlite3.OperationalError)
        assert str(info.value).startswith(
            "the session setting lock_timeout is not in effect: it was sent as 10s but the "
            "server reports 0"
        )
        assert info.value.setting == "lock_timeout"
        assert _idle(plain)
        # write() refuses it too: the floor trigger would judge it as version 0.
        _ledger(pg_db)
        with pytest.raises(postgres.SettingNotInEffect) as info:
            with postgres.write(plain, "main"):
                pass
        assert "agentihooks.ledger_writer_version" in str(info.value)
        assert _idle(plain)
    finally:
        plain.close()


def test_psycopg_pool_configure_checks_every_connection(pg_db) -> None:  # type: ignore[no-untyped-def]
    native = _ledger(pg_db)
    with psycopg_pool.ConnectionPool(
        pg_db.url,
        kwargs=postgres.session_options(),
        configure=postgres.check_session,
        min_size=1,
        max_size=2,
        open=True,
        timeout=10,
    ) as pool:
        with pool.connection() as conn:
            with postgres.write(conn, "main") as w:
                w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = %s", ("main",))
    assert generation(native) == 1


def test_write_commits_rolls_back_and_takes_the_lock_first(open_driver, pg_db) -> None:  # type: ignore[no-untyped-def]
    native = _ledger(pg_db)
    conn = open_driver()
    with postgres.write(conn, "main") as w:
        assert (w.waits, w.floor, w.alerts, w.refused, w.ledger) == (1, 1, [], [], "main")
        # The writer lock is held by this session.
        held = w.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s "
            "AND pid = pg_backend_pid() AND granted",
            (postgres.WRITER_LOCK,),
        ).fetchone()[0]
        assert held == 1
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = %s", ("main",))
    assert generation(native) == 1 and _idle(conn)

    with pytest.raises(RuntimeError):
        with postgres.write(conn, "main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
            raise RuntimeError("the caller failed")
    assert generation(native) == 1 and _idle(conn)

    # A statement that failed inside the block: the commit rolls back and says so.
    with pytest.raises(sqlite3.OperationalError, match="rolled back") as info:
        with postgres.write(conn, "main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
            try:
                w.execute("SELECT 1/0")
            except (psycopg.Error, psycopg2.Error):
                pass  # swallowed by the caller
    assert info.value.sqlstate == "40000"
    assert generation(native) == 1 and _idle(conn)

    # The writer lock must be the transaction's first statement.
    autocommit = bool(getattr(conn, "autocommit", False))
    cur = conn.cursor()
    if autocommit:
        cur.execute("BEGIN")
    cur.execute("SELECT 1")
    with pytest.raises(sqlite3.OperationalError, match="cannot start a transaction within a transaction"):
        with postgres.write(conn, "main"):
            pass
    if autocommit:
        cur.execute("ROLLBACK")
    else:
        conn.rollback()


def test_three_cancelled_waits_raise_writer_lock_not_granted(open_driver, pg_db) -> None:  # type: ignore[no-untyped-def]
    native = _ledger(pg_db)
    holder = pg_db.connect()
    holder.begin()
    holder.lock_writer()
    conn = open_driver(lock_wait=1.0)
    start = time.monotonic()
    try:
        with postgres.write(conn, "main", lock_wait=1.0) as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
        pytest.fail("the write was granted while another session held the writer lock")
    except sqlite3.OperationalError as err:  # what the ledger's handlers catch
        caught = err
    elapsed = time.monotonic() - start
    assert isinstance(caught, postgres.WriterLockNotGranted)
    assert str(caught) == "the ledger writer lock was not granted in 3 waits of 1 seconds"
    assert caught.sqlstate == "55P03" and (caught.tries, caught.wait) == (3, 1.0)
    assert getattr(caught.__cause__, "sqlstate", None) == "55P03" or getattr(
        caught.__cause__, "pgcode", None
    ) == "55P03"
    assert 2.9 <= elapsed < 10.0
    assert _idle(conn)
    holder.rollback()
    with postgres.write(conn, "main", lock_wait=1.0) as w:  # granted once the holder is gone
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert generation(native) == 1


def test_refusal_is_lw001_with_the_refusal_lock_and_an_alert_for_the_next_writer(open_driver, pg_db) -> None:  # type: ignore[no-untyped-def]
    native = _ledger(pg_db)
    native.execute("UPDATE writer_floor SET version = 2 WHERE name = 'ledger'")
    conn = open_driver()
    caught = None
    try:
        with postgres.write(conn, "main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    except sqlite3.DatabaseError as err:
        caught = err
    assert isinstance(caught, postgres.Refused)
    assert not isinstance(caught, sqlite3.OperationalError)
    assert str(caught) == REFUSAL_1_2
    assert caught.code == "LW001" and (caught.version, caught.floor) == (1, 2)
    assert generation(native) == 0 and _idle(conn)

    # The refused session keeps its refusal lock: a later writer (native or on the same
    # driver) names it.
    expected = f"The ledger writer at 127.0.0.1 was refused: {REFUSAL_1_2}"
    newer = open_driver(version=2, required=2)
    with postgres.write(newer, "main", version=2, required=2) as w:
        assert [(r.writer, r.pid, r.version, r.floor) for r in w.refused] == [
            ("127.0.0.1", backend_pid(conn), 1, 2)
        ]
        assert w.alerts == [expected]
        w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert generation(native) == 1
    with postgres.write(newer, "main", version=2, required=2, existing_alerts=[expected]) as w:
        assert w.alerts == []  # not raised twice while open
    with postgres.write(
        newer, "other", version=2, required=2, existing_alerts=lambda c, ledger: []
    ) as w:
        assert w.alerts == [expected]
    native_newer = pg_db.connect(version=2, required=2)
    with native_newer.write("main") as w:
        assert w.alerts == [expected]

    # The refused-writers and floor queries run on a driver's connection too.
    assert [r.pid for r in postgres.refused_writers(newer)] == [backend_pid(conn)]
    assert postgres.stored_floor(newer) == 2 and _idle(newer)
    conn.close()  # once the refused writer disconnects, no alert any more
    assert wait_until(lambda: postgres.refused_writers(newer) == [])
    with postgres.write(newer, "main", version=2, required=2) as w:
        assert w.alerts == [] and w.refused == []


def test_old_plain_client_refused_by_the_trigger_is_named_to_a_driver_writer(open_driver, pg_db, psql_factory) -> None:  # type: ignore[no-untyped-def]
    _ledger(pg_db)
    conn = open_driver()
    # A write that finds no refused writer: the next ones skip the scan while the refusal
    # count stays, and the refusal below moves it.
    with postgres.write(conn, "main") as w:
        assert w.alerts == [] and w.refused == []
    old = psql_factory(pg_db.url)  # sends no writer version
    out = old.run("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
    assert f"ERROR:  {REFUSAL_0_1}" in out
    with postgres.write(conn, "main") as w:
        assert w.alerts == [f"The ledger writer at 127.0.0.1 was refused: {REFUSAL_0_1}"]


def test_setup_schema_on_a_driver_connection_never_lowers_the_floor(open_driver, pg_db) -> None:  # type: ignore[no-untyped-def]
    high = open_driver(version=3, required=3)
    assert postgres.stored_floor(high) is None and _idle(high)
    postgres.setup_schema(high, version=3, required=3)
    native = pg_db.connect()
    assert postgres.stored_floor(native) == postgres.stored_floor(high) == 3
    low = open_driver()
    postgres.setup_schema(low)
    assert postgres.stored_floor(native) == 3
    with pytest.raises(postgres.Refused) as info:
        with postgres.write(low):
            pass
    assert (info.value.version, info.value.floor) == (1, 3)


def test_other_connections_are_refused_with_a_type_error() -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(TypeError, match="psycopg 3 connection or a psycopg2 connection"):
        postgres.write(conn, "main")
    with pytest.raises(TypeError):
        postgres.check_session(conn)


def test_a_session_the_server_ends_inside_the_block_is_reported_for_what_it_is(open_driver, pg_db) -> None:  # type: ignore[no-untyped-def]
    native = _ledger(pg_db)
    conn = open_driver(idle_in_transaction=1.0)
    with pytest.raises(postgres.OperationalError) as info:
        with postgres.write(conn, "main", idle_in_transaction=1.0) as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
            pid = backend_pid(conn)
            # Idle inside the transaction until the server ends the session.
            assert wait_until(lambda: not backend_alive(native, pid), timeout=20.0, interval=0.05)
    err = info.value
    if isinstance(err, postgres.SessionEnded):
        assert err.sqlstate == "25P03" and "idle-in-transaction timeout" in str(err)
    else:
        # psycopg2 reports only a closed connection: the outcome is unknown, and says so.
        assert isinstance(err, postgres.CommitOutcomeUnknown), err
        assert err.sqlstate == "08007" and "the outcome of the commit is unknown" in str(err), err
    assert generation(native) == 0


def test_autocommit_connections_start_a_write_in_one_message(open_driver, pg_db, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from writerlock import _drivers

    native = _ledger(pg_db)
    conn = open_driver()
    kinds = []
    real_run = _drivers.Driver.run

    def recording_run(self, kind, sql):  # type: ignore[no-untyped-def]
        kinds.append((kind, sql))
        return real_run(self, kind, sql)

    monkeypatch.setattr(_drivers.Driver, "run", recording_run)
    for n in (1, 2):
        kinds.clear()
        with postgres.write(conn, "main") as w:
            w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'")
        assert generation(native) == n
        if getattr(conn, "autocommit", False):
            # BEGIN, the lock and the floor check together
            assert [k for k, _ in kinds] == ["start_write", "commit"]
        else:
            assert [k for k, _ in kinds] == ["begin", "writer_lock", "floor_check", "commit"]
        # The first write's floor check scans pg_locks for refused writers; the second, at
        # the refusal count the first kept, does not.
        check = next(sql for k, sql in kinds if k in ("start_write", "floor_check"))
        assert ("pg_locks" in check) == (n == 1), check


def test_sqlalchemy_connections_over_psycopg(pg_db) -> None:  # type: ignore[no-untyped-def]
    import sqlalchemy as sa

    native = _ledger(pg_db)
    engine = sa.create_engine(
        pg_db.url.replace("postgresql://", "postgresql+psycopg://", 1),
        connect_args=postgres.session_options(),
    )
    try:
        # engine.connect(): the block's statements go through SQLAlchemy on the same session.
        with engine.connect() as c:
            postgres.check_session(c)
            with postgres.write(c, "main") as w:
                assert w.waits == 1 and w.alerts == []
                c.execute(sa.text("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'main'"))
            assert generation(native) == 1
            c.execute(sa.text("SELECT 1"))  # SQLAlchemy's own transaction...
            with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
                with postgres.write(c, "main"):  # ...is not the writer lock's first statement
                    pass
            c.rollback()
        # engine.raw_connection(): the pooled DBAPI connection.
        raw = engine.raw_connection()
        try:
            with postgres.write(raw, "main") as w:
                w.execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = %s", ("main",))
        finally:
            raw.close()
        assert generation(native) == 2
    finally:
        engine.dispose()


def test_an_async_psycopg_connection_is_refused_with_a_type_error(pg_db) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    async def attempt() -> str:
        conn = await psycopg.AsyncConnection.connect(pg_db.url, **postgres.session_options())
        try:
            with pytest.raises(TypeError) as info:
                postgres.write(conn, "main")
            return str(info.value)
        finally:
            await conn.close()

    assert "async psycopg connection" in asyncio.run(attempt())


def test_a_write_used_after_it_ended_runs_nothing(open_driver, pg_db) -> None:  # type: ignore[no-untyped-def]
    native = _ledger(pg_db)
    native.execute("CREATE TABLE rows (x int)")
    conn = open_driver()
    with postgres.write(conn, "main") as w:
        w.execute("INSERT INTO rows VALUES (1)")
    with pytest.raises(postgres.ProgrammingError, match="this write has already ended"):
        w.execute("INSERT INTO rows VALUES (2)")
    with postgres.write(conn, "main") as w:
        conn.commit()  # ends the write's transaction and its writer lock
        with pytest.raises(postgres.ProgrammingError, match="this write has already ended"):
            w.execute("INSERT INTO rows VALUES (3)")
        with pytest.raises(postgres.ProgrammingError, match="this write has already ended"):
            w.executemany("INSERT INTO rows VALUES (%s)", [(4,), (5,)])
    assert native.execute("SELECT string_agg(x::text, ',') FROM rows").fetchone() == ("1",)
