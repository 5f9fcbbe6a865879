"""Values side by side with psycopg 3 on the same server: each type is written through a
parameter and read back by both drivers, and no value may differ from psycopg's (same value,
same Python type) without a clear error. Where psycopg refuses a value (an infinite
timestamp, year 10000) both raise a DataError.
"""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import uuid
from typing import Any, List, Tuple
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg.types.json import Json as PsycopgJson

from writerlock import postgres

UTC = datetime.timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")

# (column type, value written through a parameter)
WRITTEN: List[Tuple[str, Any]] = [
    ("bool", True),
    ("int2", -32768),
    ("int4", 2**31 - 1),
    ("int8", -(2**63)),
    ("numeric", decimal.Decimal("-12.340")),
    ("numeric", decimal.Decimal("1e-30")),
    ("float4", 0.1),
    ("float8", 0.1),
    ("float8", float("inf")),
    ("text", "it's ? and 'quoted' ü"),
    ("varchar(10)", "short"),
    ("bytea", b"\x00\x01\xff"),
    ("date", datetime.date(2024, 2, 29)),
    ("date", datetime.date(9999, 12, 31)),
    ("time", datetime.time(23, 59, 59, 999999)),
    ("timetz", datetime.time(12, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=-5, minutes=-30)))),
    ("timestamp", datetime.datetime(1999, 12, 31, 23, 59, 59, 999999)),
    ("timestamp", datetime.datetime(2024, 6, 1, 12, 0, tzinfo=UTC)),  # aware into timestamp
    ("timestamptz", datetime.datetime(2024, 6, 1, 14, 0, 0, 250000, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))),
    ("timestamptz", datetime.datetime(1, 1, 2, tzinfo=UTC)),
    ("interval", datetime.timedelta(days=-3, seconds=7384, microseconds=500000)),
    ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("inet", ipaddress.ip_address("10.0.0.1")),
    ("inet", ipaddress.ip_interface("192.168.1.5/24")),
    ("inet", ipaddress.ip_address("::1")),
    ("cidr", ipaddress.ip_network("10.0.0.0/8")),
    ("int4[]", [1, None, 3]),
    ("int8[]", [[1, 2], [3, 4]]),
    ("text[]", ["a", "b c", "", None, 'q"uote', "back\\slash", "NULL"]),
    ("float8[]", [1.5, 2.0]),
    ("date[]", [datetime.date(2020, 1, 1)]),
    ("numeric[]", [decimal.Decimal("1.10")]),
    ("uuid[]", [uuid.UUID(int=1)]),
    ("int4[]", []),
    # The OID-alias types: written as a name, read as the name the server prints.
    ("regclass", "pg_class"),
    ("regtype", "int4"),
    ("regproc", "now"),
    ("regprocedure", "sum(int4)"),
    ("regoper", "||/"),
    ("regoperator", "+(int4,int4)"),
    ("regnamespace", "pg_catalog"),
    ("regrole", "pg_monitor"),
    ("regconfig", "english"),
    ("regdictionary", "simple"),
    ("regcollation", '"C"'),
    ("regclass[]", ["pg_type", "pg_class"]),
]

JSON_WRITTEN: List[Tuple[str, Any]] = [
    ("json", {"n": 2**70, "b": 1, "a": [1, 2.5, None, True], "f": 1e300}),
    ("jsonb", {"n": 2**70, "b": 1, "a": {"z": "ü"}}),
    ("json", [1, "two"]),
    ("jsonb", 12345678901234567890123),
]


def _same(ours: Any, theirs: Any) -> None:
    assert ours == theirs, f"writerlock read {ours!r}, psycopg {theirs!r}"
    assert type(ours) is type(theirs), f"writerlock read {type(ours)}, psycopg {type(theirs)}"
    if isinstance(ours, (datetime.datetime, datetime.time)):
        assert ours.utcoffset() == theirs.utcoffset(), (ours, theirs)
    if isinstance(ours, (list, tuple)):
        for a, b in zip(ours, theirs):
            _same(a, b)
    if isinstance(ours, dict):
        assert list(ours) == list(theirs), "keys in another order"
        for k in ours:
            _same(ours[k], theirs[k])


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_each_type_round_trips_as_psycopg_reads_it(pg_db, zone: str) -> None:  # type: ignore[no-untyped-def]
    ours = postgres.connect(pg_db.url)
    theirs = psycopg.connect(pg_db.url)
    for conn in (ours, theirs):
        conn.execute(f"SET TimeZone = '{zone}'")
    cases = WRITTEN + JSON_WRITTEN
    ours.execute(
        "CREATE TABLE v (id int PRIMARY KEY, by text, "
        + ", ".join(f"c{i} {ty}" for i, (ty, _) in enumerate(cases))
        + ")"
    )
    ours.commit()
    for i, (ty, value) in enumerate(cases):
        json = ty in ("json", "jsonb")
        mine = postgres.Json(value) if json else value
        psy = PsycopgJson(value) if json else value
        ours.execute(f"INSERT INTO v (id, by, c{i}) VALUES (?, 'writerlock', ?)", (2 * i, mine))
        theirs.execute(f"INSERT INTO v (id, by, c{i}) VALUES (%s, 'psycopg', %s)", (2 * i + 1, psy))
    ours.commit()
    theirs.commit()
    for i, (ty, value) in enumerate(cases):
        sql = f"SELECT c{i} FROM v WHERE id IN ({2 * i}, {2 * i + 1}) ORDER BY id"
        mine = [r[0] for r in ours.execute(sql).fetchall()]
        psy = [r[0] for r in theirs.execute(sql).fetchall()]
        where = f"{ty} {value!r}"
        # The value each driver stored, read by each driver: four readings, one value.
        for a, b in zip(mine, psy):
            try:
                _same(a, b)
            except AssertionError as err:
                raise AssertionError(f"{where}: {err}") from None
        _same(mine[0], mine[1])
        if ty == "timestamptz":
            assert mine[0].tzinfo == ZoneInfo(zone)  # the session's TimeZone, as psycopg
    # The description names every column, with no row too.
    cur = ours.execute("SELECT * FROM v WHERE false")
    assert [d[0] for d in cur.description][:3] == ["id", "by", "c0"] and cur.fetchall() == []
    ours.close()
    theirs.close()


def test_types_psycopg_maps_are_read_the_same_and_the_rest_as_text(pg_db) -> None:  # type: ignore[no-untyped-def]
    ours = postgres.connect(pg_db.url)
    theirs = psycopg.connect(pg_db.url)
    literals = [
        "'1 year 2 mons 3 days 04:05:06.5'::interval",
        "'-1 mon'::interval",
        "'{{1,2},{3,NULL}}'::int4[]",
        "'{}'::text[]",
        "'{\"a b\",c}'::varchar[]",
        "'10.0.0.1/8'::inet",
        "'::ffff:1.2.3.4'::inet",
        "'2001:db8::/32'::cidr",
        "'12:00:00+02'::timetz",
        "'01:02:03.5-05:30'::timetz",
        "'12.34'::money",
        "'-1234567.5'::money",
        "row(1, 'a b', NULL, '')",
        "'0.1'::float4",
        "'{\"b\": 1, \"a\": 2}'::json",
        "'{\"b\": 1, \"a\": 2}'::jsonb",
        "B'101'::bit(3)",
        "'08:00:2b:01:02:03'::macaddr",
        "'16/B374D848'::pg_lsn",
        "'x'::xml",
        "'abc'::name",
        "'{\"2024-01-01\"}'::date[]",
        "'{1.5}'::numeric[]",
        "'{t,f}'::bool[]",
        "'{\"12345678-1234-5678-1234-567812345678\"}'::uuid[]",
        "'{\"1 day\"}'::interval[]",
        "'(1.5,-2)'::point",
        "'(1e20,1e-7)'::point",
        "'<(1,2),3>'::circle",
        "'((0,0),(1,1),(2,0))'::polygon",
        "'a fat cat:2A sat''s:1,3'::tsvector",
        "'1 2'::oidvector",
        "'(1,2)'::tid",
        "'7'::xid",
        "'7'::xid8",
        "'pg_class'::regclass",
        "'int8'::regtype",
        "'now'::regproc",
        "'sum(int4)'::regprocedure",
        "'||/'::regoper",
        "'+(int4,int4)'::regoperator",
        "'pg_catalog'::regnamespace",
        "'pg_monitor'::regrole",
        "'english'::regconfig",
        "'simple'::regdictionary",
        "'\"C\"'::regcollation",
        "0::oid::regclass",
        "4000000000::oid::regtype",
        "'{pg_class,pg_type}'::regclass[]",
        "row('pg_type'::regclass, 1)",
        "NULL::regclass",
    ]
    for literal in literals:
        mine = ours.execute(f"SELECT {literal}").fetchone()[0]
        psy = theirs.execute(f"SELECT {literal}").fetchone()[0]
        try:
            _same(mine, psy)
        except AssertionError as err:
            raise AssertionError(f"{literal}: {err}") from None
    # OID-alias columns of a table made in the open transaction, many rows of them: the
    # names are the ones that transaction sees, and it stays open.
    sql = (
        "SELECT c.oid::regclass, c.reltype::regtype, c.relnamespace::regnamespace FROM pg_class c "
        "WHERE c.relname IN ('reg_made_here', 'pg_class', 'pg_type') ORDER BY c.relname"
    )
    read = []
    for conn in (ours, theirs):  # one after the other: the same name in two transactions waits
        conn.execute("CREATE TABLE reg_made_here (id int)")
        read.append(conn.execute(sql).fetchall())
        conn.rollback()
    _same(read[0], read[1])
    assert read[0][-1] == ("reg_made_here", "reg_made_here", "public")
    # A server-side cursor streams them by name too.
    named = ours.cursor("reg_stream")
    named.itersize = 2
    named.execute("SELECT g, 'pg_class'::regclass FROM generate_series(1, 5) g")
    assert list(named) == [(g, "pg_class") for g in range(1, 6)]
    named.close()
    ours.rollback()
    # Ranges: psycopg has a Range class of its own; this module reads a range as its text.
    assert ours.execute("SELECT '[1,5)'::int4range, 'empty'::int4range").fetchone() == ("[1,5)", "empty")
    assert ours.execute("SELECT tstzrange('2024-01-01', NULL)").fetchone() == (
        '["2024-01-01 00:00:00+00",)',
    )
    # NULL of any type is None, even of one without a Python value.
    nulls = "NULL::interval, NULL::int4[], NULL::inet, NULL::tsquery, NULL::point, NULL::int4range, NULL::money"
    assert ours.execute(f"SELECT {nulls}").fetchone() == (None,) * 7
    ours.close()
    theirs.close()


def test_values_python_cannot_hold_are_a_data_error_naming_the_column(pg_db) -> None:  # type: ignore[no-untyped-def]
    ours = postgres.connect(pg_db.url, autocommit=True)
    theirs = psycopg.connect(pg_db.url, autocommit=True)
    for literal, word in [
        ("'infinity'::timestamp", "too large"),
        ("'-infinity'::timestamp", "too small"),
        ("'infinity'::timestamptz", "too large"),
        ("'infinity'::date", "too large"),
        ("'-infinity'::date", "too small"),
        ("'10000-01-01'::timestamp", "too large"),
        ("'10000-01-01'::date", "too large"),
        ("'0044-03-15 BC'::date", "too small"),
    ]:
        with pytest.raises(psycopg.DataError):
            theirs.execute(f"SELECT {literal} AS far").fetchone()
        with pytest.raises(postgres.DataError, match=f"column far: .*{word}") as info:
            ours.execute(f"SELECT {literal} AS far")
        assert info.value.sqlstate == "22008"
        assert literal.split("'")[1] in str(info.value)  # the value, as Postgres prints it
    ours.close()
    theirs.close()


def test_parameters_carry_their_python_type(pg_db) -> None:  # type: ignore[no-untyped-def]
    c = postgres.connect(pg_db.url)
    assert c.execute("SELECT ? = ?", (1, 1.0)).fetchone() == (True,)
    assert c.execute("SELECT ?", (42,)).fetchone() == (42,)
    assert c.execute("SELECT ?, ?", (2**40, 2**70)).fetchone() == (2**40, decimal.Decimal(2**70))
    assert c.execute("SELECT ? + 1", (datetime.date(2024, 2, 28),)).fetchone() == (datetime.date(2024, 2, 29),)
    assert c.execute("SELECT 3 = ANY(?)", ([1, 2, 3],)).fetchone() == (True,)
    assert c.execute("SELECT 'b' = ANY(?)", (["a", "b"],)).fetchone() == (True,)
    assert c.execute("SELECT ? + interval '1 hour'", (datetime.timedelta(minutes=30),)).fetchone() == (
        datetime.timedelta(minutes=90),
    )
    assert c.execute("SELECT ? << '10.0.0.0/8'::cidr", (ipaddress.ip_address("10.1.2.3"),)).fetchone() == (True,)
    assert c.execute("SELECT ?", ([[1, 2], [3, 4]],)).fetchone() == ([[1, 2], [3, 4]],)
    assert c.execute("SELECT ?", (None,)).fetchone() == (None,)
    assert c.execute("SELECT ?::jsonb", ({"n": 2**70},)).fetchone() == ({"n": 2**70},)
    assert c.execute("SELECT ?", (postgres.Jsonb([1, {"a": 2}]),)).fetchone() == ([1, {"a": 2}],)
    # jsonb's ? operators: write the statement with $n placeholders (a ? then stays an
    # operator), or use the functions behind the operators.
    doc = postgres.Jsonb({"a": 1, "b": 2})
    assert c.execute("SELECT $1::jsonb ? 'a', $1::jsonb ?| array['x', 'b'], $1::jsonb ?& array['a', 'x']", (doc,)).fetchone() == (
        True,
        True,
        False,
    )
    assert c.execute("SELECT jsonb_exists(?, 'a')", (doc,)).fetchone() == (True,)
    with pytest.raises(TypeError, match="cannot send"):
        c.execute("SELECT ?", (object(),))
    c.close()


def test_executemany_stores_what_execute_stores(pg_db) -> None:  # type: ignore[no-untyped-def]
    """executemany sends its statements many to a message with the parameters written as
    literals: every value must land exactly as execute() (and psycopg) stores it, quotes and
    backslashes included, whatever standard_conforming_strings says."""
    ours = postgres.connect(pg_db.url)
    theirs = psycopg.connect(pg_db.url)
    cases = WRITTEN + JSON_WRITTEN
    ours.execute(
        "CREATE TABLE m (id int, how text, "
        + ", ".join(f"c{i} {ty}" for i, (ty, _) in enumerate(cases))
        + ")"
    )
    ours.commit()
    for i, (ty, value) in enumerate(cases):
        json = ty in ("json", "jsonb")
        mine = postgres.Json(value) if json else value
        sql = f"INSERT INTO m (id, how, c{i}) VALUES (?, ?, ?)"
        cur = ours.executemany(sql, [(i, "many", mine), (i, "many", None)])
        assert cur.rowcount == 2
        ours.execute(sql, (i, "one", mine))
    ours.commit()
    for i, (ty, value) in enumerate(cases):
        got = dict(
            theirs.execute(f"SELECT how, c{i} FROM m WHERE id = %s AND c{i} IS NOT NULL", (i,)).fetchall()
        )
        _same(got["many"], got["one"])
        assert theirs.execute(f"SELECT count(*) FROM m WHERE id = %s AND c{i} IS NULL", (i,)).fetchone() == (1,)
    nasty = ["'); DROP TABLE m; --", "back\\slash\\'", "E'x'", "$$", "?", "\\x00", "ü\t\n"]
    for conforming in ("on", "off"):
        ours.execute(f"SET standard_conforming_strings = {conforming}")
        ours.execute("DELETE FROM m")
        ours.executemany("INSERT INTO m (id, how) VALUES (?, ?)", list(enumerate(nasty)))
        assert [r[0] for r in ours.execute("SELECT how FROM m ORDER BY id").fetchall()] == nasty
    ours.rollback()
    # A failed row fails the call; in a transaction nothing of it stays.
    with pytest.raises(postgres.DataError):
        ours.executemany("INSERT INTO m (id, c2) VALUES (?, ?)", [(1, 1), (2, 2**40)])
    ours.rollback()
    with pytest.raises(postgres.ProgrammingError, match="placeholders"):
        ours.executemany("INSERT INTO m (id) VALUES (?)", [(1,), (1, 2)])
    assert ours.execute("SELECT count(*) FROM m").fetchone() == (3 * len(cases),)
    ours.close()
    theirs.close()


def test_a_value_python_cannot_hold_leaves_the_session_and_transaction_usable(pg_db) -> None:  # type: ignore[no-untyped-def]
    """Rows become Python values in batches while the rest are read: a value Python cannot
    hold in the middle of a long result still lets the whole result be read, so the session
    stays in step, and the transaction (the statement itself succeeded) can commit."""
    c = postgres.connect(pg_db.url)
    c.execute("CREATE TABLE kept (x int)")
    c.execute("INSERT INTO kept VALUES (1)")
    with pytest.raises(postgres.DataError, match="column ts: timestamp too large"):
        c.execute(
            "SELECT g, CASE WHEN g = 2500 THEN 'infinity'::timestamp ELSE now()::timestamp END AS ts "
            "FROM generate_series(1, 5000) g"
        )
    assert c.execute("SELECT count(*) FROM generate_series(1, 5000)").fetchone() == (5000,)
    c.commit()
    other = pg_db.connect()
    assert other.execute("SELECT x FROM kept").fetchall() == [(1,)]
    other.close()
    c.close()
