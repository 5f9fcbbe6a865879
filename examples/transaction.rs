//! The smallest use of the SQLite write queue from Rust: one transaction in turn.
//!
//! Run it with `cargo run --example transaction [DATABASE]` (default `site.db`).

use std::time::Duration;
use writerlock::{Wait, WriterQueue};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "site.db".into());
    let conn = rusqlite::Connection::open(&path)?;
    let queue = WriterQueue::for_connection(&conn)?; // the connection's own database file

    // The writer turn (25 s at most: Error::Busy, nothing written), then BEGIN IMMEDIATE.
    queue.begin(&conn, &Wait::transaction(Duration::from_secs(25)))?;
    match conn.execute_batch("CREATE TABLE IF NOT EXISTS t (x INTEGER); INSERT INTO t VALUES (1)") {
        Ok(()) => queue.commit(&conn)?, // COMMIT, then the next writer's turn
        Err(err) => {
            queue.rollback(&conn)?; // ROLLBACK, then the next writer's turn
            return Err(err.into());
        }
    }
    println!("committed one row to {path}");
    Ok(())
}
