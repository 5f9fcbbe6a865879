//! The core's values against a real server: what a parameter declares (its type, so the
//! server does not guess), what each column type reads as, and the text form C prints for
//! it. Infinity stays infinity, a JSON integer beyond 64 bits keeps its digits and a `json`
//! value its key order, a `real` reads as Postgres prints it.
//!
//! Needs `TEST_DATABASE_URL` like tests/pg_writer.rs (`make test` sets it).

use writerlock::pg::{Settings, Value};

mod pgdb;
use pgdb::TestDb;

fn one(conn: &mut writerlock::pg::Connection, sql: &str, params: &[Value]) -> Value {
    let rows = conn.execute(sql, params).expect(sql);
    rows.first()
        .and_then(|r| r.get(0))
        .cloned()
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

#[test]
fn parameters_declare_their_type() {
    let db = TestDb::new("values_params");
    let mut c = db.connect(&Settings::new());
    assert_eq!(
        one(&mut c, "SELECT ? = ?", &[Value::Int(1), Value::Float(1.0)]),
        Value::Bool(true)
    );
    assert_eq!(one(&mut c, "SELECT ?", &[Value::Int(42)]), Value::Int(42));
    assert_eq!(
        one(&mut c, "SELECT pg_typeof(?)::text", &[Value::Int(1 << 40)]),
        Value::Text("bigint".into())
    );
    let date = Value::Typed {
        type_oid: 1082,
        text: "2024-02-28".into(),
    };
    assert_eq!(
        one(&mut c, "SELECT ? + 1", &[date]),
        Value::Text("2024-02-29".into())
    );
    let list = Value::Array(vec![Value::Int(1), Value::Int(2)]);
    assert_eq!(one(&mut c, "SELECT 2 = ANY(?)", &[list]), Value::Bool(true));
    let interval = Value::Interval {
        months: 0,
        days: 1,
        micros: 1_500_000,
    };
    assert_eq!(
        one(&mut c, "SELECT ?::text", &[interval]),
        Value::Text("1 day 00:00:01.5".into())
    );
    // An instant written to a timestamp column lands in the session's TimeZone.
    c.execute("SET TimeZone = 'Europe/Berlin'", &[])
        .expect("set");
    let instant = Value::Timestamp {
        micros: 1_717_243_200_000_000, // 2024-06-01 12:00:00 UTC
        time_zone: true,
    };
    assert_eq!(
        one(&mut c, "SELECT ?::timestamp::text", &[instant]),
        Value::Text("2024-06-01 14:00:00".into())
    );
}

#[test]
fn columns_read_as_their_type_and_print_as_postgres_does() {
    let db = TestDb::new("values_columns");
    let mut c = db.connect(&Settings::new());
    let cases: &[(&str, &str)] = &[
        ("'infinity'::timestamp", "infinity"),
        ("'-infinity'::timestamptz", "-infinity"),
        ("'infinity'::date", "infinity"),
        ("'10000-01-01'::timestamp", "10000-01-01 00:00:00"),
        (
            "'1 year 2 mons 3 days 04:05:06.5'::interval",
            "1 year 2 mons 3 days 04:05:06.5",
        ),
        ("'-1 days -02:00:00'::interval", "-1 days -02:00:00"),
        ("'{{1,2},{3,NULL}}'::int4[]", "{{1,2},{3,NULL}}"),
        ("'{\"a b\",c,\"\"}'::text[]", "{\"a b\",c,\"\"}"),
        ("'10.0.0.1/8'::inet", "10.0.0.1/8"),
        ("'10.0.0.1'::inet", "10.0.0.1"),
        ("'10.0.0.0/8'::cidr", "10.0.0.0/8"),
        ("'12:00:00+02'::timetz", "12:00:00+02"),
        ("'-1234567.5'::money", "-$1,234,567.50"),
        ("'[1,5)'::int4range", "[1,5)"),
        ("row(1, 'a b', NULL)", "(1,\"a b\",)"),
        ("B'101'::bit(3)", "101"),
        ("'0.1'::float4", "0.1"),
        ("'(1.5,-2)'::point", "(1.5,-2)"),
        ("'(1e20,1e-7)'::point", "(1e+20,1e-07)"),
        ("'[(0,0),(1,1)]'::lseg", "[(0,0),(1,1)]"),
        ("'(1,1),(0,0)'::box", "(1,1),(0,0)"),
        ("'[(0,0),(1,1),(2,0)]'::path", "[(0,0),(1,1),(2,0)]"),
        ("'((0,0),(1,1),(2,0))'::polygon", "((0,0),(1,1),(2,0))"),
        ("'{1,-1,0}'::line", "{1,-1,0}"),
        ("'<(1,2),3>'::circle", "<(1,2),3>"),
        (
            "'a fat cat:2A sat''s:1,3'::tsvector",
            "'a' 'cat':2A 'fat' 'sat''s':1,3",
        ),
        ("'1 2'::oidvector", "1 2"),
        ("'(1,2)'::tid", "(1,2)"),
        ("'7'::xid", "7"),
        ("'7'::xid8", "7"),
        (
            "'{\"n\": 1180591620717411303424, \"b\": 1, \"a\": 2}'::json",
            "{\"n\":1180591620717411303424,\"b\":1,\"a\":2}",
        ),
    ];
    for (literal, text) in cases {
        let sql = format!("SELECT {literal}, format('%s', {literal})");
        let rows = c.execute(&sql, &[]).expect(&sql);
        let row = rows.first().expect("a row");
        let ours = row.get(0).and_then(Value::pg_text);
        assert_eq!(ours.as_deref(), Some(*text), "{literal}");
        if !literal.contains("json") {
            // The server's own text form, for every type whose form is fixed.
            assert_eq!(
                row.get(1).and_then(Value::pg_text).as_deref(),
                Some(*text),
                "{literal} as the server prints it"
            );
        }
    }
    assert_eq!(one(&mut c, "SELECT '0.1'::float4", &[]), Value::Float(0.1));
    assert_eq!(
        one(&mut c, "SELECT 'infinity'::timestamptz", &[]),
        Value::Timestamp {
            micros: i64::MAX,
            time_zone: true
        }
    );
    // NULL of any type reads, even of a type without a value here; a value of it is an
    // error naming the column.
    assert_eq!(one(&mut c, "SELECT NULL::tsquery", &[]), Value::Null);
    let err = c
        .execute("SELECT 'a & b'::tsquery AS words", &[])
        .expect_err("tsquery has no value here");
    assert!(err.to_string().contains("words"), "{err}");
    // A statement that returns no row still has its columns.
    let rows = c
        .execute("SELECT 1 AS a, 'x'::text AS b WHERE false", &[])
        .expect("empty select");
    let names: Vec<&str> = rows.columns().iter().map(|col| col.name()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(!c.in_transaction());
}

#[test]
fn oid_alias_columns_read_as_the_names_the_server_prints() {
    let db = TestDb::new("values_reg");
    let mut c = db.connect(&Settings::new());
    c.execute_batch("CREATE TABLE reg_target (id int)")
        .expect("create");
    let cases: &[(&str, &str)] = &[
        ("'pg_class'::regclass", "pg_class"),
        ("'reg_target'::regclass", "reg_target"),
        ("'int4'::regtype", "integer"),
        ("'now'::regproc", "now"),
        ("'sum(int4)'::regprocedure", "sum(integer)"),
        ("'||/'::regoper", "||/"),
        ("'+(int4,int4)'::regoperator", "+(integer,integer)"),
        ("'pg_catalog'::regnamespace", "pg_catalog"),
        ("'pg_monitor'::regrole", "pg_monitor"),
        ("'english'::regconfig", "english"),
        ("'simple'::regdictionary", "simple"),
        ("'\"C\"'::regcollation", "\"C\""),
        // No object: the server prints `-` for 0 and the number for an unknown OID.
        ("0::oid::regclass", "-"),
        ("4000000000::oid::regtype", "4000000000"),
        (
            "array['pg_class', 'reg_target']::regclass[]",
            "{pg_class,reg_target}",
        ),
        ("row('pg_type'::regclass, 1)", "(pg_type,1)"),
    ];
    for (literal, text) in cases {
        let sql = format!("SELECT {literal}, format('%s', {literal})");
        let rows = c.execute(&sql, &[]).expect(&sql);
        let row = rows.first().expect("a row");
        assert_eq!(
            row.get(0).and_then(Value::pg_text).as_deref(),
            Some(*text),
            "{literal}"
        );
        assert_eq!(
            row.get(1).and_then(Value::pg_text).as_deref(),
            Some(*text),
            "{literal} as the server prints it"
        );
    }
    assert_eq!(
        one(&mut c, "SELECT 'int8'::regtype", &[]),
        Value::Text("bigint".into())
    );
    assert_eq!(
        one(&mut c, "SELECT NULL::regclass", &[]),
        Value::Null,
        "NULL is NULL, and looks nothing up"
    );
    // Many rows, several types in one statement; a parameter's OID reads as its name too.
    let rows = c
        .execute(
            "SELECT oid::regclass, reltype::regtype, relnamespace::regnamespace FROM pg_class \
             WHERE relname IN ('pg_class', 'pg_type', 'reg_target') ORDER BY relname",
            &[],
        )
        .expect("pg_class");
    let texts: Vec<Vec<String>> = rows
        .rows()
        .iter()
        .map(|r| {
            (0..3)
                .map(|i| r.get(i).and_then(Value::pg_text).unwrap_or_default())
                .collect()
        })
        .collect();
    assert_eq!(
        texts,
        [
            ["pg_class", "pg_class", "pg_catalog"],
            ["pg_type", "pg_type", "pg_catalog"],
            ["reg_target", "reg_target", "public"],
        ]
    );
    assert_eq!(
        one(&mut c, "SELECT ?::oid::regclass", &[Value::Int(1259)]),
        Value::Text("pg_class".into())
    );
    // Inside a transaction the names come from it (a table it created), and the lookup
    // leaves it open and usable.
    c.begin().expect("begin");
    c.execute_batch("CREATE TABLE reg_new (id int)")
        .expect("create in tx");
    assert_eq!(
        one(&mut c, "SELECT 'reg_new'::regclass", &[]),
        Value::Text("reg_new".into())
    );
    assert!(c.in_transaction());
    c.rollback().expect("rollback");
    // Rows handed out one by one wait for the names, and every row still arrives.
    let mut seen = Vec::new();
    c.execute_each(
        "SELECT g, 'pg_class'::regclass FROM generate_series(1, 3) g",
        &[],
        &mut |_, row| {
            seen.push(row.get(1).and_then(Value::pg_text).unwrap_or_default());
            Ok(())
        },
    )
    .expect("each");
    assert_eq!(seen, ["pg_class", "pg_class", "pg_class"]);
    assert!(!c.in_transaction());
}
