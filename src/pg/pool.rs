//! A bounded pool of writer-session connections.
//!
//! [`Pool::take`] hands out only live connections: it drops closed ones, those of another
//! process (after `fork()`) and those the server already ended while they were idle (a
//! restart or failover: its termination notice or end of file waits on the socket, seen
//! without a round trip), checks with one round trip a connection idle for longer than
//! [`CHECK_IDLE_AFTER`] (a cut network says nothing), and otherwise opens one with the
//! pool's settings. So the first write after a restart goes to a fresh connection: nothing
//! of it reached the server before, so nothing is written twice. [`Pool::give`]
//! rolls back an open transaction and keeps the connection; a connection the server ended,
//! or whose rollback fails, is closed instead, so the next take opens a fresh one. At most
//! `size` idle connections are kept; more given back are closed. A connection to another
//! address or with other settings is refused.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::address::Address;
use super::connection::Connection;
use super::error::Error;
use super::settings::Settings;

/// The default number of idle connections a pool keeps: 4.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// A connection idle for longer than this is checked with one round trip before
/// [`Pool::take`] hands it out: 1 second. A server restart or a cut network ends idle
/// connections without the client noticing until it talks.
pub const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// The longest the check of an idle connection may take: 5 seconds (or the connect timeout,
/// if shorter).
pub const CHECK_LIMIT: Duration = Duration::from_secs(5);

/// A bounded pool of connections to one database address.
#[derive(Debug)]
pub struct Pool {
    address: Address,
    settings: Settings,
    size: usize,
    idle: Mutex<Vec<(Connection, Instant)>>,
}

impl Pool {
    /// A pool for `url` with `settings` that keeps up to `size` idle connections. Checks the
    /// address and the settings now; opens no connection until [`Pool::take`].
    pub fn new(url: &str, settings: Settings, size: usize) -> Result<Pool, Error> {
        let address = Address::parse(url)?;
        settings.validate()?;
        Ok(Pool {
            address,
            settings,
            size,
            idle: Mutex::new(Vec::new()),
        })
    }

    fn idle(&self) -> MutexGuard<'_, Vec<(Connection, Instant)>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands out a live idle connection, or opens a new one (which checks its settings).
    /// Closed connections and those of another process are dropped; one idle for longer
    /// than [`CHECK_IDLE_AFTER`] is checked with one round trip first.
    pub fn take(&self) -> Result<Connection, Error> {
        let limit = CHECK_LIMIT.min(self.settings.get_connect_timeout());
        loop {
            let Some((mut conn, since)) = self.idle().pop() else {
                break;
            };
            if conn.is_closed() || !conn.is_own() {
                continue;
            }
            // Ended by the server while idle (a restart): seen on its socket, no round trip;
            // the write goes to a fresh connection instead.
            if conn.ended_while_idle().is_some() {
                continue;
            }
            if since.elapsed() > CHECK_IDLE_AFTER && conn.check_alive(limit).is_err() {
                continue;
            }
            return Ok(conn);
        }
        Connection::open(&self.address, &self.settings, true)
    }

    /// Takes a connection back: rolls back its open transaction and keeps it idle, or closes
    /// it when it is closed, its rollback fails, or the pool already keeps `size` idle.
    ///
    /// Fails with [`Error::ForeignConnection`] (closing the connection) when the connection goes to another address or has other settings, such as another
    /// writer version: the pool would hand it out later as one of its own.
    pub fn give(&self, mut conn: Connection) -> Result<(), Error> {
        if conn.address().to_string() != self.address.to_string() {
            return Err(Error::ForeignConnection {
                reason: format!(
                    "it goes to {}, and this pool to {}",
                    conn.address(),
                    self.address
                ),
            });
        }
        // The display form leaves the TLS options out: a connection opened with another
        // sslmode or other certificates is not one this pool would have opened.
        if conn.address().tls() != self.address.tls() {
            return Err(Error::ForeignConnection {
                reason: format!(
                    "it goes to {} with other TLS options (sslmode, certificates) than this \
                     pool's",
                    conn.address()
                ),
            });
        }
        if conn.settings() != &self.settings {
            return Err(Error::ForeignConnection {
                reason: format!(
                    "its settings ({}, writer version {}) differ from the pool's ({}, writer \
                     version {})",
                    conn.settings().startup_options(),
                    conn.settings().get_version(),
                    self.settings.startup_options(),
                    self.settings.get_version()
                ),
            });
        }
        if conn.is_closed() || !conn.is_own() {
            return Ok(());
        }
        if conn.in_transaction() && conn.rollback().is_err() {
            return Ok(());
        }
        if conn.is_closed() {
            return Ok(());
        }
        let mut idle = self.idle();
        if idle.len() < self.size {
            idle.push((conn, Instant::now()));
        }
        Ok(())
    }

    /// How many idle connections the pool keeps right now.
    pub fn idle_count(&self) -> usize {
        self.idle().len()
    }

    /// The most idle connections it keeps.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Its settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Its address (the display form has no password).
    pub fn address(&self) -> &Address {
        &self.address
    }
}
