//! Queries an administrator runs against the shared database: who holds or waits for the
//! writer lock, holders stuck idle in a transaction, unrecorded generation bumps, the stored
//! floor and the refused writers still connected. The statements are in [`sql`](super::sql).

use std::time::Duration;

use super::alerts::{read_refused_writers, RefusedWriter};
use super::connection::Connection;
use super::error::Error;
use super::floor::read_stored_floor;
use super::sql::{FLOOR_TABLE_SQL, REFUSED_WRITERS_SQL, STORED_FLOOR_SQL};
pub use super::sql::{HOLDERS_SQL, UNRECORDED_BUMPS_SQL};
use super::value::{Row, Rows, Value};

/// A session holding or waiting for the writer lock.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// Its server process id.
    pub pid: i32,
    /// Whether it holds the lock (`false`: it is queued).
    pub granted: bool,
    /// Its state, such as `idle in transaction` or `active` (`None` when not visible).
    pub state: Option<String>,
    /// How long it has been in that state.
    pub in_state: Option<Duration>,
    /// Its client address (`None` for a local socket or when not visible).
    pub client_addr: Option<String>,
    /// The `application_name` it connected with (`None` when empty or not visible); a
    /// writerlock session names its program by default.
    pub application_name: Option<String>,
}

impl Holder {
    /// Whether it holds the lock while idle in its transaction.
    pub fn is_idle_holder(&self) -> bool {
        self.granted && self.state.as_deref() == Some("idle in transaction")
    }
}

/// A ledger whose newest generation has no recorded changed rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnrecordedBump {
    /// The ledger's slug.
    pub slug: String,
    /// Its generation.
    pub generation: i64,
}

fn holder(r: &Row) -> Holder {
    Holder {
        pid: r
            .get(0)
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(0),
        granted: r.get(1).and_then(Value::as_bool).unwrap_or(false),
        state: r.get(2).and_then(Value::as_str).map(str::to_string),
        in_state: match r.get(3) {
            Some(Value::Float(s)) if s.is_finite() => Some(Duration::from_secs_f64(s.max(0.0))),
            _ => None,
        },
        client_addr: r.get(4).and_then(Value::as_str).map(str::to_string),
        application_name: r
            .get(5)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string),
    }
}

/// Lists the sessions holding or waiting for the writer lock in the current database.
pub fn holders(conn: &mut Connection) -> Result<Vec<Holder>, Error> {
    let rows = conn.execute(HOLDERS_SQL, &[])?;
    Ok(rows.rows().iter().map(holder).collect())
}

/// Lists the holders of the writer lock idle in their transaction for longer than `over`
/// (the ledger spec samples with 30 seconds).
pub fn idle_holders(conn: &mut Connection, over: Duration) -> Result<Vec<Holder>, Error> {
    Ok(holders(conn)?
        .into_iter()
        .filter(|h| h.is_idle_holder() && h.in_state.is_some_and(|d| d > over))
        .collect())
}

/// Lists the ledgers whose newest generation has no `row_changes` row.
pub fn unrecorded_bumps(conn: &mut Connection) -> Result<Vec<UnrecordedBump>, Error> {
    let rows = conn.execute(UNRECORDED_BUMPS_SQL, &[])?;
    Ok(rows
        .rows()
        .iter()
        .map(|r| UnrecordedBump {
            slug: r
                .get(0)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            generation: r.get(1).and_then(Value::as_i64).unwrap_or(0),
        })
        .collect())
}

/// The rows of `rows`, each as its values.
fn values(rows: Rows) -> Vec<Vec<Value>> {
    rows.into_rows()
        .into_iter()
        .map(|r| r.into_values())
        .collect()
}

/// Lists the refused writers still connected to the current database (the ledger spec's
/// query, [`REFUSED_WRITERS_SQL`]).
pub fn refused_writers(conn: &mut Connection) -> Result<Vec<RefusedWriter>, Error> {
    let rows = conn.execute(REFUSED_WRITERS_SQL, &[])?;
    Ok(read_refused_writers(&values(rows)))
}

/// Reads the stored floor; `None` when the table or its row does not exist (no writer on
/// floor code set the database up yet).
pub fn stored_floor(conn: &mut Connection) -> Result<Option<i64>, Error> {
    let rows = conn.execute(FLOOR_TABLE_SQL, &[])?;
    if rows
        .first()
        .and_then(|r| r.get(0))
        .and_then(Value::read_bool)
        != Some(true)
    {
        return Ok(None);
    }
    let rows = conn.execute(STORED_FLOOR_SQL, &[])?;
    Ok(read_stored_floor(&values(rows)))
}
