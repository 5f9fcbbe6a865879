//! A database address: the parsed connection string completed as libpq completes it (the
//! `PG*` environment variables, the password file, libpq's defaults), a display form
//! without the password, and redaction of the password from any text.

use std::path::Path;
use std::str::FromStr;

use postgres::config::{Host, TargetSessionAttrs};

use super::environment::{password_from_file, Environment, DEFAULT_PORT, DEFAULT_SOCKET_DIR};
use super::error::{describe, Error};
use super::tls::{take_params, Tls};

/// A parsed database address (a `postgresql://` URL or libpq `key=value` pairs).
///
/// Its [`Display`](std::fmt::Display) form never contains the password.
#[derive(Clone)]
pub struct Address {
    config: postgres::Config,
    target: TargetSession,
    display: String,
    secrets: Vec<String>,
    notes: Vec<String>,
    tls: Tls,
}

/// The kind of server a session must reach, libpq's `target_session_attrs` (or
/// `PGTARGETSESSIONATTRS`): the hosts of the address are tried in order until one fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetSession {
    /// Any server (`any`, the default).
    Any,
    /// One that accepts writes: `transaction_read_only` is off (`read-write`).
    ReadWrite,
    /// One that does not: `transaction_read_only` is on (`read-only`).
    ReadOnly,
    /// A server not in recovery (`primary`).
    Primary,
    /// A hot standby (`standby`).
    Standby,
    /// A hot standby if any host is one, else any server (`prefer-standby`).
    PreferStandby,
}

impl TargetSession {
    /// Reads libpq's value; `None` for anything else.
    pub fn from_libpq(value: &str) -> Option<TargetSession> {
        Some(match value {
            "any" => TargetSession::Any,
            "read-write" => TargetSession::ReadWrite,
            "read-only" => TargetSession::ReadOnly,
            "primary" => TargetSession::Primary,
            "standby" => TargetSession::Standby,
            "prefer-standby" => TargetSession::PreferStandby,
            _ => return None,
        })
    }

    /// libpq's name for it.
    pub fn name(self) -> &'static str {
        match self {
            TargetSession::Any => "any",
            TargetSession::ReadWrite => "read-write",
            TargetSession::ReadOnly => "read-only",
            TargetSession::Primary => "primary",
            TargetSession::Standby => "standby",
            TargetSession::PreferStandby => "prefer-standby",
        }
    }

    /// Whether a server in recovery (`Some(true)`) or not fits: `None` when this kind is
    /// decided by the driver (any, read-write, read-only), or on the last pass of
    /// `prefer-standby`.
    pub fn wants_standby(self) -> Option<bool> {
        match self {
            TargetSession::Primary => Some(false),
            TargetSession::Standby | TargetSession::PreferStandby => Some(true),
            _ => None,
        }
    }
}

/// The values libpq accepts for `target_session_attrs`.
const TARGET_VALUES: &str = "any, read-write, read-only, primary, standby or prefer-standby";

/// Takes `target_session_attrs` out of a connection string (the driver reads only `any`,
/// `read-write` and `read-only`): returns the string with the value the driver reads in its
/// place (`any` for the kinds this crate decides itself) and the kind, when named.
fn take_target(url: &str) -> Result<(String, Option<TargetSession>), Error> {
    const KEY: &str = "target_session_attrs";
    let Some(at) = url.find(KEY) else {
        return Ok((url.to_string(), None));
    };
    let after = &url[at + KEY.len()..];
    let trimmed = after.trim_start();
    let Some(value_part) = trimmed.strip_prefix('=') else {
        return Ok((url.to_string(), None));
    };
    let value_start = at + KEY.len() + (after.len() - trimmed.len()) + 1;
    let rest = value_part.trim_start();
    let value_start = value_start + (value_part.len() - rest.len());
    let (value, len) = if let Some(quoted) = rest.strip_prefix('\'') {
        let end = quoted.find('\'').unwrap_or(quoted.len());
        (quoted[..end].to_string(), (end + 2).min(rest.len()))
    } else {
        let end = rest
            .find(|c: char| c == '&' || c == '#' || c.is_whitespace())
            .unwrap_or(rest.len());
        (percent_decode(&rest[..end]), end)
    };
    let target = TargetSession::from_libpq(&value).ok_or_else(|| Error::InvalidUrl {
        reason: format!("target_session_attrs is {value:?}; use {TARGET_VALUES}"),
    })?;
    let driver_value = match target {
        TargetSession::ReadWrite | TargetSession::ReadOnly => target.name(),
        _ => "any",
    };
    let mut out = url[..value_start].to_string();
    out.push_str(driver_value);
    out.push_str(&url[value_start + len..]);
    Ok((out, Some(target)))
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Address").field(&self.display).finish()
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display)
    }
}

impl Address {
    /// Parses `url` and completes what it leaves out from this process's environment, as
    /// libpq does (see [`Address::parse_in`]); the error names what is wrong without the
    /// password.
    pub fn parse(url: &str) -> Result<Address, Error> {
        Address::parse_in(url, &Environment::current())
    }

    /// Parses `url` and completes what it leaves out from `env`, as libpq does: the host
    /// from `PGHOST` (else the Unix socket in `/var/run/postgresql`), the port from `PGPORT`
    /// (else 5432), the user from `PGUSER` (else the operating-system user), the database
    /// from `PGDATABASE`, the password from `PGPASSWORD` or the password file (`PGPASSFILE`,
    /// else `~/.pgpass`), the application name from `PGAPPNAME` and the options from
    /// `PGOPTIONS`. What the address names always wins.
    pub fn parse_in(url: &str, env: &Environment) -> Result<Address, Error> {
        let mut secrets = raw_passwords(url);
        if url.trim().is_empty() {
            return Err(Error::InvalidUrl {
                reason: "it is empty".to_string(),
            });
        }
        let (url, tls_params) = take_params(url);
        secrets.extend(
            tls_params
                .iter()
                .filter(|(k, _)| k == "sslpassword")
                .map(|(_, v)| v.clone()),
        );
        let (url, named_target) = take_target(&url)?;
        let url = url.as_str();
        let mut config = match postgres::Config::from_str(url) {
            Ok(config) => config,
            Err(err) => {
                return Err(Error::InvalidUrl {
                    reason: redact(&describe(&err), &secrets),
                })
            }
        };
        let notes = complete(&mut config, env)?;
        let tls = Tls::resolve(&tls_params, env)?;
        config.ssl_mode(tls.mode().driver());
        let target = match named_target {
            Some(target) => target,
            None => match env.var("PGTARGETSESSIONATTRS") {
                None => TargetSession::Any,
                Some(value) => {
                    let target =
                        TargetSession::from_libpq(value).ok_or_else(|| Error::InvalidUrl {
                            reason: format!(
                                "the environment variable PGTARGETSESSIONATTRS is {value:?}; \
                                 use {TARGET_VALUES}"
                            ),
                        })?;
                    match target {
                        TargetSession::ReadWrite => {
                            config.target_session_attrs(TargetSessionAttrs::ReadWrite);
                        }
                        TargetSession::ReadOnly => {
                            config.target_session_attrs(TargetSessionAttrs::ReadOnly);
                        }
                        _ => {}
                    }
                    target
                }
            },
        };
        if let Some(pw) = config.get_password() {
            secrets.push(String::from_utf8_lossy(pw).into_owned());
        }
        if config.get_hosts().is_empty() {
            return Err(Error::InvalidUrl {
                reason: "it names no host".to_string(),
            });
        }
        secrets.retain(|s| !s.is_empty());
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        // Built from the parsed parts, which leave the password out: nothing to replace, so a
        // password equal to the user or database name cannot mangle it.
        let display = display_of(&config);
        Ok(Address {
            config,
            target,
            display,
            secrets,
            notes,
            tls,
        })
    }

    /// The TLS options (`sslmode`, `sslrootcert`, ...), completed as libpq completes them.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// What completing the address noticed that may explain a failed connection, such as a
    /// password file that was not used because others can read it.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The driver configuration.
    pub fn config(&self) -> &postgres::Config {
        &self.config
    }

    /// The kind of server a session must reach (`target_session_attrs`).
    pub fn target(&self) -> TargetSession {
        self.target
    }

    /// One driver configuration per host of the address, in order, each with its own port
    /// (and `hostaddr`), for trying hosts one at a time as libpq does when the kind of
    /// server matters ([`TargetSession::wants_standby`]); with its display form.
    pub fn per_host(&self) -> Vec<(String, postgres::Config)> {
        let c = &self.config;
        let hosts = c.get_hosts();
        (0..hosts.len())
            .map(|i| {
                let mut one = postgres::Config::new();
                match &hosts[i] {
                    Host::Tcp(name) => one.host(name),
                    Host::Unix(path) => one.host_path(path),
                };
                if let Some(addr) = c.get_hostaddrs().get(i) {
                    one.hostaddr(*addr);
                }
                let port = c
                    .get_ports()
                    .get(i)
                    .or_else(|| c.get_ports().first())
                    .copied();
                if let Some(port) = port {
                    one.port(port);
                }
                if let Some(user) = c.get_user() {
                    one.user(user);
                }
                if let Some(pw) = c.get_password() {
                    one.password(pw);
                }
                if let Some(db) = c.get_dbname() {
                    one.dbname(db);
                }
                if let Some(options) = c.get_options() {
                    one.options(options);
                }
                if let Some(name) = c.get_application_name() {
                    one.application_name(name);
                }
                one.ssl_mode(c.get_ssl_mode())
                    .ssl_negotiation(c.get_ssl_negotiation())
                    .channel_binding(c.get_channel_binding())
                    .keepalives(c.get_keepalives())
                    .keepalives_idle(c.get_keepalives_idle());
                let display = match &hosts[i] {
                    Host::Tcp(name) => format!("{name}:{}", port.unwrap_or(DEFAULT_PORT)),
                    Host::Unix(path) => {
                        format!("{}:{}", path.display(), port.unwrap_or(DEFAULT_PORT))
                    }
                };
                (display, one)
            })
            .collect()
    }

    /// Removes the password from `text`.
    pub fn redact(&self, text: &str) -> String {
        redact(text, &self.secrets)
    }

    /// Whether every host of the address is a Unix socket directory.
    pub fn is_unix_socket(&self) -> bool {
        self.config
            .get_hosts()
            .iter()
            .all(|h| !matches!(h, Host::Tcp(_)))
    }
}

/// Fills in what `config` leaves out from `env`; returns notes for a failed connection.
fn complete(config: &mut postgres::Config, env: &Environment) -> Result<Vec<String>, Error> {
    let mut notes = Vec::new();
    if config.get_hosts().is_empty() {
        match env.var("PGHOST") {
            Some(hosts) => {
                for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
                    config.host(host);
                }
            }
            None => {
                config.host_path(DEFAULT_SOCKET_DIR);
            }
        }
    }
    if config.get_ports().is_empty() {
        if let Some(ports) = env.var("PGPORT") {
            for port in ports.split(',').map(str::trim) {
                let port: u16 = port.parse().map_err(|_| Error::InvalidUrl {
                    reason: format!(
                        "the environment variable PGPORT is {ports:?}, which is not a port \
                         number"
                    ),
                })?;
                config.port(port);
            }
        }
    }
    if config.get_user().is_none() {
        if let Some(user) = env.var("PGUSER").or(env.os_user()) {
            config.user(user);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(db) = env.var("PGDATABASE") {
            config.dbname(db);
        }
    }
    if config.get_application_name().is_none() {
        if let Some(name) = env.var("PGAPPNAME") {
            config.application_name(name);
        }
    }
    if config.get_options().is_none() {
        if let Some(options) = env.var("PGOPTIONS") {
            config.options(options);
        }
    }
    if config.get_password().is_none() {
        if let Some(pw) = env.var("PGPASSWORD") {
            config.password(pw);
        } else if let Some(file) = env.password_file() {
            // As libpq: a Unix socket in the default directory matches `localhost`, one in
            // any other directory matches that directory's path.
            let host = match config.get_hosts().first() {
                Some(Host::Tcp(name)) => name.clone(),
                Some(Host::Unix(path)) if path != Path::new(DEFAULT_SOCKET_DIR) => {
                    path.display().to_string()
                }
                _ => "localhost".to_string(),
            };
            let port = config
                .get_ports()
                .first()
                .copied()
                .unwrap_or(DEFAULT_PORT)
                .to_string();
            let user = config.get_user().unwrap_or_default().to_string();
            let db = config.get_dbname().unwrap_or(&user).to_string();
            match password_from_file(&file, &host, &port, &db, &user) {
                Ok(Some(pw)) => {
                    config.password(pw);
                }
                Ok(None) => {}
                Err(note) => notes.push(note),
            }
        }
    }
    Ok(notes)
}

fn display_of(config: &postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]"),
                Host::Tcp(name) => name.clone(),
                Host::Unix(path) => path.display().to_string(),
            };
            let port = config
                .get_ports()
                .get(i)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or_default();
    format!("postgresql://{user}{}/{db}", hosts.join(","))
}

/// Replaces every secret in `text` with `***`.
fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if !s.is_empty() {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// Decodes `%XX` escapes (invalid ones stay as they are).
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every password-looking part of a connection string, raw and percent-decoded, found
/// without trusting the string to parse.
fn raw_passwords(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            if let Some((_, pw)) = userinfo.split_once(':') {
                found.push(pw.to_string());
                found.push(percent_decode(pw));
            }
        }
        if let Some((_, query)) = rest.split_once('?') {
            for pair in query.split('&') {
                if let Some(pw) = pair.strip_prefix("password=") {
                    found.push(pw.to_string());
                    found.push(percent_decode(pw));
                }
            }
        }
    } else {
        let mut rest = url;
        while let Some(at) = rest.find("password") {
            let after = rest[at + "password".len()..].trim_start();
            rest = &rest[at + "password".len()..];
            let Some(after) = after.strip_prefix('=') else {
                continue;
            };
            let after = after.trim_start();
            let value = if let Some(quoted) = after.strip_prefix('\'') {
                let mut v = String::new();
                let mut chars = quoted.chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => v.extend(chars.next()),
                        '\'' => break,
                        c => v.push(c),
                    }
                }
                v
            } else {
                after
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string()
            };
            found.push(value);
        }
    }
    found.retain(|s| !s.is_empty());
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_no_password() {
        let a = Address::parse("postgresql://alice:s3cr%40t@db.example:6543/ledger").unwrap();
        assert_eq!(a.to_string(), "postgresql://alice@db.example:6543/ledger");
        assert_eq!(
            a.redact("failed for s3cr@t and s3cr%40t"),
            "failed for *** and ***"
        );
        let a = Address::parse("host=/tmp/x user=bob password='p w' dbname=d").unwrap();
        assert_eq!(a.to_string(), "postgresql://bob@/tmp/x:5432/d");
        assert!(a.is_unix_socket());
        assert_eq!(a.redact("p w"), "***");
    }

    fn env(vars: &[(&str, &str)]) -> Environment {
        Environment::new(vars.iter().copied(), None, Some("osuser".to_string()))
    }

    #[test]
    fn what_the_address_leaves_out_comes_from_the_environment() {
        let e = env(&[
            ("PGHOST", "db.example"),
            ("PGPORT", "6543"),
            ("PGUSER", "alice"),
            ("PGDATABASE", "ledger"),
            ("PGPASSWORD", "hunter2"),
            ("PGAPPNAME", "swarm"),
        ]);
        let a = Address::parse_in("postgresql://", &e).unwrap();
        assert_eq!(a.to_string(), "postgresql://alice@db.example:6543/ledger");
        assert_eq!(a.config().get_password(), Some(&b"hunter2"[..]));
        assert_eq!(a.config().get_application_name(), Some("swarm"));
        assert_eq!(a.redact("hunter2"), "***");
        // What the address names wins.
        let a = Address::parse_in("postgresql://bob:pw@other:5000/db2", &e).unwrap();
        assert_eq!(a.to_string(), "postgresql://bob@other:5000/db2");
        assert_eq!(a.config().get_password(), Some(&b"pw"[..]));
        let a = Address::parse_in("dbname=mine", &e).unwrap();
        assert_eq!(a.to_string(), "postgresql://alice@db.example:6543/mine");
    }

    #[test]
    fn libpqs_defaults_without_environment() {
        let a = Address::parse_in("postgresql:///ledger", &env(&[])).unwrap();
        assert_eq!(
            a.to_string(),
            "postgresql://osuser@/var/run/postgresql:5432/ledger"
        );
        assert!(a.is_unix_socket());
        let err = Address::parse_in("postgresql://", &env(&[("PGPORT", "x")])).unwrap_err();
        assert!(err.to_string().contains("PGPORT"), "{err}");
        let e = env(&[("PGSSLMODE", "verify-full")]);
        let a = Address::parse_in("postgresql://h/db", &e).unwrap();
        assert_eq!(a.tls().mode(), crate::pg::tls::SslMode::VerifyFull);
        let a = Address::parse_in("postgresql://h/db?sslmode=disable", &e).unwrap();
        assert_eq!(a.tls().mode(), crate::pg::tls::SslMode::Disable);
        assert_eq!(
            a.config().get_ssl_mode(),
            postgres::config::SslMode::Disable
        );
        let err = Address::parse_in("postgresql://h/db", &env(&[("PGSSLMODE", "on")])).unwrap_err();
        assert!(err.to_string().contains("PGSSLMODE"), "{err}");
    }

    #[test]
    fn password_file_is_read_for_the_address() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(
            &file,
            "db.example:6543:ledger:alice:fromfile\nlocalhost:*:*:*:socket\n\
             /tmp/sock:*:*:*:elsewhere\n",
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let path = file.to_str().unwrap();
        let e = env(&[("PGPASSFILE", path)]);
        let a = Address::parse_in("postgresql://alice@db.example:6543/ledger", &e).unwrap();
        assert_eq!(a.config().get_password(), Some(&b"fromfile"[..]));
        assert_eq!(a.redact("fromfile"), "***");
        // A Unix socket matches as libpq matches it: the default directory as `localhost`,
        // another directory as its path.
        let a = Address::parse_in("host=/var/run/postgresql dbname=x", &e).unwrap();
        assert_eq!(a.config().get_password(), Some(&b"socket"[..]));
        let a = Address::parse_in("host=/tmp/sock dbname=x", &e).unwrap();
        assert_eq!(a.config().get_password(), Some(&b"elsewhere"[..]));
        let a = Address::parse_in("host=/tmp/other dbname=x", &e).unwrap();
        assert_eq!(a.config().get_password(), None);
        // PGPASSWORD comes before the file.
        let e2 = env(&[("PGPASSFILE", path), ("PGPASSWORD", "env")]);
        let a = Address::parse_in("postgresql://alice@db.example:6543/ledger", &e2).unwrap();
        assert_eq!(a.config().get_password(), Some(&b"env"[..]));
        // A file others can read is not used, and the address says why.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let a = Address::parse_in("postgresql://alice@db.example:6543/ledger", &e).unwrap();
        assert_eq!(a.config().get_password(), None);
        assert!(a.notes()[0].contains("chmod 0600"), "{:?}", a.notes());
    }

    #[test]
    fn target_session_attrs_as_libpq_reads_them() {
        for (url, target) in [
            (
                "postgresql://h/db?target_session_attrs=primary",
                TargetSession::Primary,
            ),
            (
                "postgresql://a,b/db?sslmode=disable&target_session_attrs=standby",
                TargetSession::Standby,
            ),
            (
                "host=a,b target_session_attrs=prefer-standby dbname=x",
                TargetSession::PreferStandby,
            ),
            (
                "host=a target_session_attrs='read-write'",
                TargetSession::ReadWrite,
            ),
            (
                "postgresql://h/db?target_session_attrs=any",
                TargetSession::Any,
            ),
            ("postgresql://h/db", TargetSession::Any),
        ] {
            let a = Address::parse_in(url, &env(&[])).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(a.target(), target, "{url}");
        }
        let a = Address::parse_in(
            "postgresql://h/db?target_session_attrs=read-only",
            &env(&[]),
        )
        .unwrap();
        assert_eq!(
            a.config().get_target_session_attrs(),
            TargetSessionAttrs::ReadOnly
        );
        let a = Address::parse_in(
            "postgresql://h/db",
            &env(&[("PGTARGETSESSIONATTRS", "standby")]),
        )
        .unwrap();
        assert_eq!(a.target(), TargetSession::Standby);
        let err = Address::parse_in("postgresql://h/db?target_session_attrs=master", &env(&[]))
            .unwrap_err();
        assert!(err.to_string().contains("prefer-standby"), "{err}");
        let a = Address::parse_in("postgresql://u@a:1,b:2/db", &env(&[])).unwrap();
        let hosts: Vec<String> = a.per_host().into_iter().map(|(d, _)| d).collect();
        assert_eq!(hosts, ["a:1", "b:2"]);
    }

    #[test]
    fn tls_options_libpq_accepts_are_read() {
        use crate::pg::tls::{RootCert, SslMode};
        for (url, mode) in [
            (
                "postgresql://u@h/db?sslmode=verify-ca&sslrootcert=/etc/ca.pem",
                SslMode::VerifyCa,
            ),
            (
                "postgresql://u@h/db?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslsni=0",
                SslMode::VerifyFull,
            ),
            ("postgresql://u@h/db?sslmode=allow", SslMode::Allow),
            (
                "host=h user=u dbname=db sslmode=verify-full sslrootcert=/etc/ca.pem sslcrl=/etc/crl.pem",
                SslMode::VerifyFull,
            ),
        ] {
            let a = Address::parse_in(url, &env(&[])).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(a.tls().mode(), mode, "{url}");
            assert_eq!(
                a.tls().root_cert().cloned(),
                if url.contains("sslrootcert") {
                    Some(RootCert::File("/etc/ca.pem".into()))
                } else {
                    None
                },
                "{url}"
            );
            assert_eq!(a.to_string(), "postgresql://u@h:5432/db", "{url}");
        }
        let a = Address::parse_in(
            "host=h user=u sslcert=/c.crt sslkey=/c.key sslpassword=k3ypass",
            &env(&[]),
        )
        .unwrap();
        assert_eq!(a.tls().cert(), Some(Path::new("/c.crt")));
        assert_eq!(a.redact("bad passphrase k3ypass"), "bad passphrase ***");
        let err = Address::parse_in("postgresql://h/db?sslmode=verify", &env(&[])).unwrap_err();
        assert!(err.to_string().contains("verify-full"), "{err}");
    }

    #[test]
    fn a_password_equal_to_a_name_leaves_the_address_intact() {
        let a = Address::parse("postgresql://ledger:ledger@db:5432/ledger").unwrap();
        assert_eq!(a.to_string(), "postgresql://ledger@db:5432/ledger");
        let a = Address::parse("host=db user=x password=x dbname=x").unwrap();
        assert_eq!(a.to_string(), "postgresql://x@db:5432/x");
    }

    #[test]
    fn bad_urls_do_not_echo_the_password() {
        for url in [
            "postgresql://alice:hunter2@db:notaport/x",
            "postgresql://alice:hunter2@db:5432/x?sslmode=bogus",
            "host=db password=hunter2 port=nope",
            "",
        ] {
            let err = Address::parse_in(url, &env(&[])).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::InvalidUrl { .. }), "{url}");
            assert!(!text.contains("hunter2"), "{text}");
        }
    }
}
