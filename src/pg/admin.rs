//! Queries an administrator runs against the shared database: who holds or waits for the
//! writer lock, holders stuck idle in a transaction, and unrecorded generation bumps. The
//! stored floor is [`stored_floor`](super::stored_floor) and the refused writers
//! [`refused_writers`](super::refused_writers).

use std::time::Duration;

use super::connection::Connection;
use super::error::Error;
use super::value::{Row, Value};

/// The ledger spec's holder query, limited to the current database (advisory locks are
/// per database), with each session's `application_name`: sessions holding or waiting for
/// the writer lock, holder first.
pub const HOLDERS_SQL: &str = "\
SELECT a.pid, l.granted, a.state, EXTRACT(EPOCH FROM now() - a.state_change)::float8 AS in_state, \
       host(a.client_addr) AS client_addr, a.application_name \
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = 1279607879 AND l.objsubid = 1 \
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
ORDER BY l.granted DESC, a.state_change";

/// The ledger spec's unrecorded-bumps query: each ledger whose newest generation has no
/// `row_changes` row.
pub const UNRECORDED_BUMPS_SQL: &str = "\
SELECT l.slug, l.generation FROM ledgers l \
WHERE NOT EXISTS (SELECT 1 FROM row_changes r WHERE r.slug = l.slug AND r.generation = l.generation) \
ORDER BY l.slug";

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
