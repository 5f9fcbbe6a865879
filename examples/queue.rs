//! The SQLite write queue from Rust: one transaction in turn, then one
//! queued statement outside a transaction.
//!
//! Run it with `cargo run --example queue [DATABASE]` (default `site.db` in
//! the current directory).

use std::time::Duration;
use writerlock::{Wait, WriterQueue};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "site.db".into());
    let conn = rusqlite::Connection::open(&path)?;
    let queue = WriterQueue::new(&path); // lock files open at the first turn
    queue.execute(
        &conn,
        "CREATE TABLE IF NOT EXISTS ezcontentobject (id INTEGER PRIMARY KEY, modified INTEGER);
         CREATE TABLE IF NOT EXISTS ezurl (id INTEGER PRIMARY KEY, url TEXT);
         INSERT OR IGNORE INTO ezcontentobject (id, modified) VALUES (1, 0)",
        &Wait::statement(Duration::from_millis(5000)),
    )?;

    queue.begin(&conn, &Wait::transaction(Duration::from_secs(25)))?; // turn, busy timeout, BEGIN IMMEDIATE
    match conn.execute(
        "UPDATE ezcontentobject SET modified = ?1 WHERE id = 1",
        [1_700_000_000],
    ) {
        Ok(_) => queue.commit(&conn)?, // COMMIT, then the turn passes on
        Err(err) => {
            queue.rollback(&conn)?; // ROLLBACK, then the turn passes on
            return Err(err.into());
        }
    }

    // One write statement outside a transaction, in turn, within its busy timeout:
    queue.execute(
        &conn,
        "INSERT INTO ezurl (url) VALUES ('https://example.org')",
        &Wait::statement(Duration::from_millis(5000)),
    )?;

    let urls: i64 = conn.query_row("SELECT count(*) FROM ezurl", [], |row| row.get(0))?;
    println!("committed; {path} has {urls} link(s)");
    Ok(())
}
