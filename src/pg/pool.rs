//! A bounded pool of writer-session connections.
//!
//! [`Pool::take`] reuses an idle connection or opens one with the pool's settings.
//! [`Pool::give`] rolls back an open transaction and keeps the connection; a connection the
//! server ended, or whose rollback fails, is closed instead, so the next take opens a fresh
//! one. At most `size` idle connections are kept; more given back are closed.

use std::sync::{Mutex, MutexGuard};

use super::address::Address;
use super::connection::Connection;
use super::error::Error;
use super::settings::Settings;

/// The default number of idle connections a pool keeps: 4.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// A bounded pool of connections to one database address.
#[derive(Debug)]
pub struct Pool {
    address: Address,
    settings: Settings,
    size: usize,
    idle: Mutex<Vec<Connection>>,
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

    fn idle(&self) -> MutexGuard<'_, Vec<Connection>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands out an idle connection that is still open, or opens a new one (which checks its
    /// settings).
    pub fn take(&self) -> Result<Connection, Error> {
        loop {
            let conn = self.idle().pop();
            match conn {
                Some(conn) if conn.is_closed() => drop(conn),
                Some(conn) => return Ok(conn),
                None => break,
            }
        }
        Connection::open(&self.address, &self.settings, true)
    }

    /// Takes a connection back: rolls back its open transaction and keeps it idle, or closes
    /// it when it is closed, its rollback fails, or the pool already keeps `size` idle.
    pub fn give(&self, mut conn: Connection) {
        if conn.is_closed() {
            return;
        }
        if conn.in_transaction() && conn.rollback().is_err() {
            return;
        }
        if conn.is_closed() {
            return;
        }
        let mut idle = self.idle();
        if idle.len() < self.size {
            idle.push(conn);
        }
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
