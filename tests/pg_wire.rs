//! What the writer session sends on the wire, read by a relay between it and a real server:
//! no named prepared statements (a transaction pooler hands each transaction to whichever
//! server connection is free, so a statement prepared under a name in one transaction may
//! be missing, or another client's, in the next), a write's start as one message with the
//! lock as the transaction's first statement, and the round trips a write costs.
//!
//! Needs `TEST_DATABASE_URL` like tests/pg_writer.rs (`make test` sets it).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use writerlock::pg::{setup_schema, Connection, Error, Pool, Settings, Value};

mod pgdb;
use pgdb::{admin_url, TestDb};

/// `url` split around its authority: (`scheme://user@`, `host:port`, `/db?query`).
fn split_url(url: &str) -> (String, String, String) {
    let (scheme, rest) = url.split_once("://").expect("a postgresql:// URL");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h.to_string()),
        None => (String::new(), authority.to_string()),
    };
    let host = if host.contains(':') {
        host
    } else {
        format!("{host}:5432")
    };
    (format!("{scheme}://{user}"), host, rest[end..].to_string())
}

/// A database of its own, reached directly (`url`) and through a relay (`relayed`).
struct WireDb {
    /// Kept for its drop, which removes the database.
    _db: TestDb,
    url: String,
    relayed: String,
    relay: Relay,
}

impl WireDb {
    fn new(tag: &str) -> WireDb {
        let db = TestDb::new(&format!("wire_{tag}"));
        let (head, host, tail) = split_url(&admin_url());
        let query = tail.find('?').map(|i| &tail[i..]).unwrap_or("");
        let url = format!("{head}{host}/{}{query}", db.name);
        let relay = Relay::start(&host);
        let relayed = format!("{head}127.0.0.1:{}/{}{query}", relay.port, db.name);
        WireDb {
            _db: db,
            url,
            relayed,
            relay,
        }
    }
}

/// One frontend message: its type byte and body.
#[derive(Debug, Clone)]
struct Message {
    kind: u8,
    body: Vec<u8>,
}

impl Message {
    /// The NUL-terminated strings at the start of the body.
    fn strings(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = &self.body[..];
        for _ in 0..n {
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            out.push(String::from_utf8_lossy(&rest[..end]).into_owned());
            rest = rest.get(end + 1..).unwrap_or(&[]);
        }
        out
    }
}

/// A TCP relay to the server that records every frontend message and counts round trips
/// (a client send after the server last sent).
struct Relay {
    port: u16,
    messages: Arc<Mutex<Vec<Message>>>,
    round_trips: Arc<AtomicU64>,
}

impl Relay {
    fn start(server: &str) -> Relay {
        let server = server
            .to_socket_addrs()
            .expect("resolve the server")
            .next()
            .expect("a server address");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().expect("relay address").port();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let round_trips = Arc::new(AtomicU64::new(0));
        let (m, rt) = (Arc::clone(&messages), Arc::clone(&round_trips));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(upstream) = TcpStream::connect(server) else {
                    continue;
                };
                relay(client, upstream, Arc::clone(&m), Arc::clone(&rt));
            }
        });
        Relay {
            port,
            messages,
            round_trips,
        }
    }

    fn messages(&self) -> Vec<Message> {
        self.messages.lock().expect("messages").clone()
    }

    fn clear(&self) {
        self.messages.lock().expect("messages").clear();
    }

    fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }

    /// The text of every simple-query message recorded.
    fn queries(&self) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m.kind == b'Q')
            .map(|m| m.strings(1).remove(0))
            .collect()
    }
}

fn relay(
    client: TcpStream,
    server: TcpStream,
    messages: Arc<Mutex<Vec<Message>>>,
    round_trips: Arc<AtomicU64>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let client_last = Arc::new(AtomicBool::new(false));
    let (c2, s2) = (
        client.try_clone().expect("clone"),
        server.try_clone().expect("clone"),
    );
    let flag = Arc::clone(&client_last);
    std::thread::spawn(move || {
        let mut pending: Vec<u8> = Vec::new();
        let mut started = false;
        pump(client, server, |data| {
            if !flag.swap(true, Ordering::SeqCst) {
                round_trips.fetch_add(1, Ordering::SeqCst);
            }
            pending.extend_from_slice(data);
            parse(&mut pending, &mut started, &messages);
        })
    });
    std::thread::spawn(move || pump(s2, c2, |_| client_last.store(false, Ordering::SeqCst)));
}

/// Splits complete frontend messages off `pending`; the startup packet (and an SSL
/// request before it) has no type byte.
fn parse(pending: &mut Vec<u8>, started: &mut bool, messages: &Mutex<Vec<Message>>) {
    loop {
        if !*started {
            if pending.len() < 8 {
                return;
            }
            let len = u32::from_be_bytes([pending[0], pending[1], pending[2], pending[3]]) as usize;
            if pending.len() < len {
                return;
            }
            let code = u32::from_be_bytes([pending[4], pending[5], pending[6], pending[7]]);
            pending.drain(..len);
            if code == 196_608 {
                *started = true; // protocol 3.0: typed messages from here on
            }
            continue;
        }
        if pending.len() < 5 {
            return;
        }
        let len = u32::from_be_bytes([pending[1], pending[2], pending[3], pending[4]]) as usize;
        if pending.len() < 1 + len {
            return;
        }
        let kind = pending[0];
        let body = pending[5..1 + len].to_vec();
        pending.drain(..1 + len);
        messages
            .lock()
            .expect("messages")
            .push(Message { kind, body });
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, mut on_read: impl FnMut(&[u8])) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                on_read(&buf[..n]);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Every statement name in Parse, Bind, Describe and Close messages: all must be empty.
fn statement_names(messages: &[Message]) -> Vec<String> {
    let mut names = Vec::new();
    for m in messages {
        match m.kind {
            b'P' => names.push(m.strings(1).remove(0)),
            b'B' => names.push(m.strings(2).remove(1)),
            b'D' | b'C' if m.body.first() == Some(&b'S') => {
                let mut named = m.clone();
                named.body.remove(0);
                names.push(named.strings(1).remove(0));
            }
            _ => {}
        }
    }
    names
}

fn update(conn: &mut Connection, slug: &str) -> Result<(), Error> {
    let mut w = conn.write()?;
    w.execute(
        "UPDATE ledgers SET generation = generation + 1 WHERE slug = ?",
        &[Value::from(slug)],
    )?;
    w.commit()
}

/// Behind a transaction pooler a named prepared statement outlives the transaction on a
/// server connection that the next transaction may not get: statements must go unnamed.
#[test]
fn pg_statements_go_unnamed_so_a_transaction_pooler_cannot_mix_them_up() {
    let db = WireDb::new("unnamed");
    let mut conn = Connection::connect(&db.relayed, &Settings::new()).expect("connect");
    setup_schema(&mut conn, None).expect("setup");
    conn.execute(
        "INSERT INTO ledgers (slug) VALUES (?), (?)",
        &[Value::from("a"), Value::from("b")],
    )
    .expect("insert");
    for _ in 0..3 {
        update(&mut conn, "a").expect("write");
    }
    let rows = conn
        .execute(
            "SELECT slug, generation FROM ledgers WHERE slug = $1",
            &[Value::from("a")],
        )
        .expect("select");
    assert_eq!(rows.first().and_then(|r| r.get(1)), Some(&Value::Int(3)));
    conn.execute("SELECT ?::bytea", &[Value::Bytes(vec![1, 2])])
        .expect("bytes");
    conn.check_settings().expect("settings");
    assert_eq!(
        conn.show("lock_timeout").expect("show").as_deref(),
        Some("10s")
    );
    let pool = Pool::new(&db.relayed, Settings::new(), 2).expect("pool");
    let mut pooled = pool.take().expect("take");
    update(&mut pooled, "b").expect("pooled write");
    pool.give(pooled).expect("give back");

    let messages = db.relay.messages();
    let parses = messages.iter().filter(|m| m.kind == b'P').count();
    assert!(
        parses >= 5,
        "the statements went as Parse messages: {parses}"
    );
    let named: Vec<String> = statement_names(&messages)
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect();
    assert!(
        named.is_empty(),
        "named prepared statements were sent: {named:?}"
    );
}

/// A write's start is one message, with the lock as the first statement after BEGIN; a
/// write with one statement costs three round trips (start, statement, COMMIT).
#[test]
fn pg_write_starts_in_one_message_and_costs_three_round_trips() {
    let db = WireDb::new("trips");
    let mut conn = Connection::connect(&db.relayed, &Settings::new()).expect("connect");
    setup_schema(&mut conn, None).expect("setup");
    conn.execute("INSERT INTO ledgers (slug) VALUES ('a')", &[])
        .expect("insert");
    update(&mut conn, "a").expect("warm-up write");
    // The session's first write knows no clean refusal count: its floor check scans
    // pg_locks in the same message, and keeps the count it read.
    let warm_up = db.relay.queries();
    assert!(
        warm_up
            .iter()
            .any(|q| q.starts_with("BEGIN; SELECT pg_advisory_xact_lock") && q.contains("pg_locks")),
        "{warm_up:?}"
    );

    db.relay.clear();
    let before = db.relay.round_trips();
    let writes = 10;
    for _ in 0..writes {
        update(&mut conn, "a").expect("write");
    }
    let trips = db.relay.round_trips() - before;
    assert_eq!(
        trips,
        3 * writes,
        "round trips for {writes} writes (BEGIN + lock + floor read, UPDATE, COMMIT each)"
    );
    let queries = db.relay.queries();
    // The refusal count did not move since the warm-up write found no refused writer: no
    // scan of pg_locks.
    assert!(
        queries.iter().all(|q| !q.contains("pg_locks")),
        "{queries:?}"
    );
    let starts: Vec<&String> = queries.iter().filter(|q| q.starts_with("BEGIN")).collect();
    assert_eq!(starts.len(), writes as usize, "{queries:?}");
    for q in starts {
        assert!(
            q.starts_with("BEGIN; SELECT pg_advisory_xact_lock(1279607879); SELECT (SELECT version FROM writer_floor WHERE name = 'ledger')"),
            "{q}"
        );
    }
}

/// A cancelled wait (55P03) rolls back and asks again, each time with the lock as the
/// transaction's first statement, and the third gives the ledger spec's message.
#[test]
fn pg_cancelled_lock_wait_rolls_back_and_asks_again_in_one_message() {
    let db = WireDb::new("retry");
    let mut settings = Settings::new();
    settings.lock_wait(Duration::from_millis(100));
    let mut conn = Connection::connect(&db.relayed, &settings).expect("connect");
    setup_schema(&mut conn, None).expect("setup");
    let mut holder = Connection::connect(&db.url, &Settings::new()).expect("holder");
    holder.lock_writer().expect("the holder takes the lock");
    db.relay.clear();
    let err = conn.write().map(|_| ()).unwrap_err();
    assert!(
        matches!(err, Error::LockNotGranted { tries: 3, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the ledger writer lock was not granted in 3 waits of 0.1 seconds"
    );
    assert!(!conn.in_transaction());
    let queries = db.relay.queries();
    let expected_start = "BEGIN; SELECT pg_advisory_xact_lock(1279607879); ";
    assert_eq!(queries.len(), 6, "{queries:?}");
    for pair in queries.chunks(2) {
        assert!(pair[0].starts_with(expected_start), "{pair:?}");
        assert_eq!(pair[1], "ROLLBACK", "{pair:?}");
    }
    holder.rollback().expect("release");
    update(&mut conn, "x").expect("a write after the holder released");
}

/// A writer that found no refused writer skips the `pg_locks` scan while the refusal count
/// stays; every refusal (by the floor trigger or by a writer's own floor check) moves the
/// count after taking its lock, so the next write still names the refused writer.
#[test]
fn pg_a_writer_that_saw_no_refusal_still_sees_the_next_ones() {
    let db = WireDb::new("refusals");
    let mut conn = Connection::connect(&db.url, &Settings::new()).expect("connect");
    setup_schema(&mut conn, None).expect("setup");
    conn.execute("INSERT INTO ledgers (slug) VALUES ('a')", &[])
        .expect("insert");
    update(&mut conn, "a").expect("a write that finds no refused writer");
    update(&mut conn, "a").expect("a write at the same count");

    // Code older than the floor (no writer version) bumps a generation: the trigger refuses
    // it and its session stays connected.
    let mut old = postgres::Client::connect(&db.url, postgres::NoTls).expect("old writer");
    let err = old
        .batch_execute("UPDATE ledgers SET generation = generation + 1 WHERE slug = 'a'")
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("LW001"), "{err}");
    let start = conn.begin_write().expect("the next write");
    assert_eq!(start.refused().len(), 1, "{:?}", start.refused());
    assert_eq!(start.refused()[0].version, 0);
    conn.rollback().expect("rollback");

    // Once it is gone, writes find nobody again; then a writer refused by its own floor
    // check is named too.
    drop(old);
    let mut gone = false;
    for _ in 0..100 {
        let start = conn.begin_write().expect("write");
        conn.rollback().expect("rollback");
        if start.refused().is_empty() {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone, "the old writer's refusal lock outlived its session");
    update(&mut conn, "a").expect("a write at the new count");
    let mut low = Settings::new();
    low.version(0).required(0);
    let mut refused = Connection::connect(&db.url, &low).expect("a version 0 writer");
    let err = refused.write().map(|_| ()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Refused {
                version: 0,
                floor: 1
            }
        ),
        "{err:?}"
    );
    let start = conn.begin_write().expect("the next write");
    assert_eq!(start.refused().len(), 1, "{:?}", start.refused());
    assert_eq!(start.refused()[0].pid, refused.pid());
    conn.rollback().expect("rollback");
}
