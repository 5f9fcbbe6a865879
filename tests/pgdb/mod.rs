//! A throwaway Postgres database per test, shared by the Postgres test
//! binaries (`pg_writer`, `pg_wire`): created on the server named by
//! `TEST_DATABASE_URL` and dropped when the test ends.
#![allow(dead_code)] // each test binary uses a part

use std::sync::atomic::{AtomicUsize, Ordering};

use writerlock::pg::{Connection, Settings};

/// The server the tests run against (`TEST_DATABASE_URL`).
pub fn admin_url() -> String {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "TEST_DATABASE_URL is not set: the Postgres tests need a real server. Start a \
             throwaway one with `tests/pg-cluster.sh start` and export the \
             TEST_DATABASE_URL=... line it prints, or run `make test`"
        ),
    }
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match base[after_scheme..].find('/') {
        Some(slash) => &base[..after_scheme + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A database of its own for one test, dropped at the end.
pub struct TestDb {
    /// The database's name, `wl_<tag>_<pid>_<n>`.
    pub name: String,
    /// Its address.
    pub url: String,
    admin: postgres::Client,
}

impl TestDb {
    /// Creates a fresh database named after `tag`.
    pub fn new(tag: &str) -> TestDb {
        let admin_url = admin_url();
        let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach TEST_DATABASE_URL {admin_url}: {e}"));
        let name = format!(
            "wl_{tag}_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("drop a leftover test database");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create the test database");
        let url = with_database(&admin_url, &name);
        TestDb { name, url, admin }
    }

    /// A writer session on the test database.
    pub fn connect(&self, settings: &Settings) -> Connection {
        Connection::connect(&self.url, settings).expect("connect")
    }

    /// A second, plain admin session on the test database (no writer settings).
    pub fn plain(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("plain connect")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = self.admin.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// `url` (`postgresql://user@host...`) with its user replaced by `user`.
pub fn with_user(url: &str, user: &str) -> String {
    let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0);
    match url[after_scheme..].find('@') {
        Some(at) => format!(
            "{}{user}{}",
            &url[..after_scheme],
            &url[after_scheme + at..]
        ),
        None => format!("{}{user}@{}", &url[..after_scheme], &url[after_scheme..]),
    }
}

/// A login role of the cluster's own for one test, dropped (with what it owns and its
/// grants) when the guard goes; make it before the [`TestDb`] it is granted on, so the
/// database goes first.
pub struct TestRole {
    /// The role's name, `wl_<tag>_<pid>_<n>`.
    pub name: String,
    admin: postgres::Client,
}

impl TestRole {
    /// Creates a login role named after `tag`, with no privileges.
    pub fn new(tag: &str) -> TestRole {
        let mut admin = postgres::Client::connect(&admin_url(), postgres::NoTls)
            .expect("reach TEST_DATABASE_URL");
        let name = format!(
            "wl_{tag}_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        admin
            .batch_execute(&format!(
                "DROP ROLE IF EXISTS {name}; CREATE ROLE {name} LOGIN"
            ))
            .expect("create the test role");
        TestRole { name, admin }
    }
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let _ = self
            .admin
            .batch_execute(&format!("DROP ROLE IF EXISTS {}", self.name));
    }
}
