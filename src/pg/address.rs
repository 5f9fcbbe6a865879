//! A database address: the parsed connection string, a display form without the password,
//! and redaction of the password from any text.

use std::str::FromStr;

use postgres::config::Host;

use super::error::{describe, Error};

/// A parsed database address (a `postgresql://` URL or libpq `key=value` pairs).
///
/// Its [`Display`](std::fmt::Display) form never contains the password.
#[derive(Clone)]
pub struct Address {
    config: postgres::Config,
    display: String,
    secrets: Vec<String>,
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
    /// Parses `url`; the error names what is wrong without the password.
    pub fn parse(url: &str) -> Result<Address, Error> {
        let mut secrets = raw_passwords(url);
        if url.trim().is_empty() {
            return Err(Error::InvalidUrl {
                reason: "it is empty".to_string(),
            });
        }
        let config = match postgres::Config::from_str(url) {
            Ok(config) => config,
            Err(err) => {
                return Err(Error::InvalidUrl {
                    reason: redact(&describe(&err), &secrets),
                })
            }
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
        let display = display_of(&config);
        Ok(Address {
            config,
            display: redact(&display, &secrets),
            secrets,
        })
    }

    /// The driver configuration.
    pub fn config(&self) -> &postgres::Config {
        &self.config
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

fn percent_decode(s: &str) -> String {
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

    #[test]
    fn bad_urls_do_not_echo_the_password() {
        for url in [
            "postgresql://alice:hunter2@db:notaport/x",
            "postgresql://alice:hunter2@db:5432/x?sslmode=bogus",
            "host=db password=hunter2 port=nope",
            "",
        ] {
            let err = Address::parse(url).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::InvalidUrl { .. }), "{url}");
            assert!(!text.contains("hunter2"), "{text}");
        }
    }
}
