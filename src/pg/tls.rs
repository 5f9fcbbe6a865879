//! TLS for the session's own connections, read as libpq reads it, spoken with the system's
//! OpenSSL (the `libssl` PHP and Python already load).
//!
//! - `sslmode` (or `PGSSLMODE`): `disable` never uses TLS; `allow` connects without TLS and
//!   tries again with TLS when the server refuses that; `prefer` (the default) uses TLS when
//!   the server offers it and tries again without TLS when the TLS attempt is refused;
//!   `require` never falls back to clear text; `verify-ca` also checks that the server's
//!   certificate chains to a trusted root; `verify-full` also checks that the certificate
//!   names the host connected to. As libpq does, `allow`, `prefer` and `require` check the
//!   chain too when a root certificate file exists. Unix sockets never use TLS.
//! - `sslrootcert` (`PGSSLROOTCERT`, else `~/.postgresql/root.crt`): the trusted roots; the
//!   word `system` means the system's store, and then `sslmode` defaults to (and must be)
//!   `verify-full`.
//! - `sslcert` and `sslkey` (`PGSSLCERT`, `PGSSLKEY`, else `~/.postgresql/postgresql.crt`
//!   and `~/.postgresql/postgresql.key`): a client certificate, sent when the file exists;
//!   `sslpassword` decrypts an encrypted key.
//! - `sslcrl` and `sslcrldir` (`PGSSLCRL`, else `~/.postgresql/root.crl`; `PGSSLCRLDIR`):
//!   revoked certificates.
//! - `sslsni` (`PGSSLSNI`, default `1`): send the host name (Server Name Indication).
//! - `ssl_min_protocol_version` (default `TLSv1.2`) and `ssl_max_protocol_version`
//!   (`PGSSLMINPROTOCOLVERSION`, `PGSSLMAXPROTOCOLVERSION`).
//! - `sslcompression` is accepted and ignored, as by libpq since compression was removed.
//!
//! SCRAM channel binding (`channel_binding=require`) uses the server certificate's hash
//! (`tls-server-end-point`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openssl::pkey::PKey;
use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode, SslVersion};
use openssl::x509::store::{X509Lookup, X509StoreBuilder};
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509StoreContextRef, X509};
use postgres_openssl::MakeTlsConnector;

use super::environment::Environment;
use super::error::Error;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// Without TLS first, with TLS when the server refuses that.
    Allow,
    /// With TLS when the server offers it, without when it does not (the default).
    Prefer,
    /// Always TLS.
    Require,
    /// TLS with a server certificate that chains to a trusted root.
    VerifyCa,
    /// Like `VerifyCa`, and the certificate names the host.
    VerifyFull,
}

/// The values libpq accepts for `sslmode`.
const MODE_VALUES: &str = "disable, allow, prefer, require, verify-ca or verify-full";

impl SslMode {
    /// Reads libpq's value; `None` for anything else.
    pub fn from_libpq(value: &str) -> Option<SslMode> {
        Some(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// libpq's name for it.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The driver's nearest mode, for a first attempt.
    pub(crate) fn driver(self) -> postgres::config::SslMode {
        use postgres::config::SslMode as D;
        match self {
            SslMode::Disable | SslMode::Allow => D::Disable,
            SslMode::Prefer => D::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => D::Require,
        }
    }
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A file of PEM certificates (used when it exists).
    File(PathBuf),
    /// The system's store (`sslrootcert=system`).
    System,
}

/// The TLS options of an address, completed from the environment and libpq's default
/// files. Its `Debug` form leaves out the key's passphrase.
#[derive(Clone, PartialEq, Eq)]
pub struct Tls {
    mode: SslMode,
    root: Option<RootCert>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    password: Option<String>,
    crl: Option<PathBuf>,
    crl_dir: Option<PathBuf>,
    sni: bool,
    min_version: Option<SslVersion>,
    max_version: Option<SslVersion>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("mode", &self.mode)
            .field("root", &self.root)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("crl", &self.crl)
            .field("crl_dir", &self.crl_dir)
            .field("sni", &self.sni)
            .field("min_version", &self.min_version)
            .field("max_version", &self.max_version)
            .finish()
    }
}

/// The connection-string keys read here rather than by the driver.
const KEYS: &[&str] = &[
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "sslcompression",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
];

/// Takes the TLS keys out of a connection string (a `postgresql://` URL or `key=value`
/// pairs): returns the string without them, for the driver, and the pairs taken, decoded.
pub(crate) fn take_params(url: &str) -> (String, Vec<(String, String)>) {
    let mut taken = Vec::new();
    if url.starts_with("postgresql://") || url.starts_with("postgres://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_string(), taken);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key_text = super::address::percent_decode(key);
            if KEYS.contains(&key_text.as_str()) {
                taken.push((key_text, super::address::percent_decode(value)));
            } else {
                kept.push(pair);
            }
        }
        let out = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (out, taken);
    }
    // libpq's key = value syntax: a value is quoted with ' (with \ escapes) or runs to the
    // next white space.
    let bytes = url.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let mut kept_from = 0;
    while i < bytes.len() {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'=' {
            i += 1;
        }
        let key = &url[start..i];
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'=' {
            // Not a pair: leave the rest to the driver, which says what is wrong.
            break;
        }
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = Vec::new();
        if i < bytes.len() && bytes[i] == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'\'' {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                value.push(bytes[i]);
                i += 1;
            }
            i = (i + 1).min(bytes.len());
        } else {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                value.push(bytes[i]);
                i += 1;
            }
        }
        if KEYS.contains(&key) {
            out.push_str(&url[kept_from..start]);
            kept_from = i;
            taken.push((
                key.to_string(),
                String::from_utf8_lossy(&value).into_owned(),
            ));
        }
    }
    out.push_str(&url[kept_from..]);
    (out, taken)
}

fn protocol_version(key: &str, value: &str) -> Result<SslVersion, Error> {
    Ok(match value {
        "TLSv1" => SslVersion::TLS1,
        "TLSv1.1" => SslVersion::TLS1_1,
        "TLSv1.2" => SslVersion::TLS1_2,
        "TLSv1.3" => SslVersion::TLS1_3,
        other => {
            return Err(Error::InvalidUrl {
                reason: format!("{key} is {other:?}; use TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3"),
            })
        }
    })
}

impl Tls {
    /// Completes the TLS keys named in an address (`params`, as [`take_params`] took them)
    /// from `env` and libpq's default files, as libpq does.
    pub(crate) fn resolve(params: &[(String, String)], env: &Environment) -> Result<Tls, Error> {
        // The last value named wins, as in libpq; then the variable; empty means unset.
        let named = |key: &str| {
            params
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        let pick = |key: &str, var: &str| -> Option<(String, String)> {
            match named(key) {
                Some(v) => Some((v.to_string(), key.to_string())),
                None => env
                    .var(var)
                    .map(|v| (v.to_string(), format!("the environment variable {var}"))),
            }
        };
        let home_file = |name: &str| env.home().map(|h| h.join(".postgresql").join(name));

        let root = match pick("sslrootcert", "PGSSLROOTCERT") {
            Some((v, _)) if v == "system" => Some(RootCert::System),
            Some((v, _)) => Some(RootCert::File(PathBuf::from(v))),
            None => home_file("root.crt").map(RootCert::File),
        };
        let mode = match pick("sslmode", "PGSSLMODE") {
            Some((value, from)) => {
                let mode = SslMode::from_libpq(&value).ok_or_else(|| Error::InvalidUrl {
                    reason: format!("{from} is {value:?}; use {MODE_VALUES}"),
                })?;
                if root == Some(RootCert::System) && mode != SslMode::VerifyFull {
                    return Err(Error::InvalidUrl {
                        reason: format!(
                            "sslmode {value:?} may not be used with sslrootcert=system, which \
                             trusts every certificate authority of the system: use \
                             sslmode=verify-full (the default with sslrootcert=system)"
                        ),
                    });
                }
                mode
            }
            None if root == Some(RootCert::System) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        let sni = match pick("sslsni", "PGSSLSNI") {
            None => true,
            Some((v, _)) if v == "1" => true,
            Some((v, _)) if v == "0" => false,
            Some((v, from)) => {
                return Err(Error::InvalidUrl {
                    reason: format!("{from} is {v:?}; use 1 (send the host name) or 0"),
                })
            }
        };
        let min_version = match pick("ssl_min_protocol_version", "PGSSLMINPROTOCOLVERSION") {
            Some((v, from)) => Some(protocol_version(&from, &v)?),
            None => Some(SslVersion::TLS1_2),
        };
        let max_version = match pick("ssl_max_protocol_version", "PGSSLMAXPROTOCOLVERSION") {
            Some((v, from)) => Some(protocol_version(&from, &v)?),
            None => None,
        };
        if let Some((v, from)) = pick("sslcompression", "PGSSLCOMPRESSION") {
            if v != "0" && v != "1" {
                return Err(Error::InvalidUrl {
                    reason: format!("{from} is {v:?}; use 0 or 1"),
                });
            }
        }
        Ok(Tls {
            mode,
            root,
            cert: pick("sslcert", "PGSSLCERT")
                .map(|(v, _)| PathBuf::from(v))
                .or_else(|| home_file("postgresql.crt")),
            key: pick("sslkey", "PGSSLKEY")
                .map(|(v, _)| PathBuf::from(v))
                .or_else(|| home_file("postgresql.key")),
            password: named("sslpassword").map(str::to_string),
            crl: pick("sslcrl", "PGSSLCRL")
                .map(|(v, _)| PathBuf::from(v))
                .or_else(|| home_file("root.crl")),
            crl_dir: pick("sslcrldir", "PGSSLCRLDIR").map(|(v, _)| PathBuf::from(v)),
            sni,
            min_version,
            max_version,
        })
    }

    /// The `sslmode`.
    pub fn mode(&self) -> SslMode {
        self.mode
    }

    /// The trusted roots: `None` when no file is named and there is no home directory.
    pub fn root_cert(&self) -> Option<&RootCert> {
        self.root.as_ref()
    }

    /// The client certificate file (sent when it exists).
    pub fn cert(&self) -> Option<&Path> {
        self.cert.as_deref()
    }

    /// The client key file.
    pub fn key(&self) -> Option<&Path> {
        self.key.as_deref()
    }

    /// Whether the host name goes to the server (`sslsni`).
    pub fn sni(&self) -> bool {
        self.sni
    }

    /// An OpenSSL connector for one connection attempt, with `verify_failure` receiving why
    /// the server's certificate was not accepted; an error (the reason) when the files
    /// cannot be used.
    pub(crate) fn connector(
        &self,
        direct: bool,
        verify_failure: Arc<Mutex<Option<String>>>,
    ) -> Result<MakeTlsConnector, String> {
        let ssl = |what: &str, e: openssl::error::ErrorStack| format!("{what}: {e}");
        let mut builder = SslConnector::builder(SslMethod::tls_client())
            .map_err(|e| ssl("could not set up TLS", e))?;
        builder
            .set_min_proto_version(self.min_version)
            .map_err(|e| ssl("ssl_min_protocol_version", e))?;
        builder
            .set_max_proto_version(self.max_version)
            .map_err(|e| ssl("ssl_max_protocol_version", e))?;
        if direct {
            postgres_openssl::set_postgresql_alpn(&mut builder)
                .map_err(|e| ssl("sslnegotiation=direct", e))?;
        }
        // Only the roots named here are trusted: the connector's default store (the
        // system's) is replaced unless sslrootcert=system.
        let verifies = match &self.root {
            Some(RootCert::System) => true,
            Some(RootCert::File(path)) if path.exists() => {
                let mut store =
                    X509StoreBuilder::new().map_err(|e| ssl("could not set up TLS", e))?;
                regular_file(path, "root certificate file")?;
                let pem = std::fs::read(path).map_err(|e| {
                    format!(
                        "could not read the root certificate file \"{}\": {e}",
                        path.display()
                    )
                })?;
                let certs = X509::stack_from_pem(&pem).map_err(|e| {
                    format!(
                        "could not read the root certificate file \"{}\": {e}",
                        path.display()
                    )
                })?;
                for cert in certs {
                    store.add_cert(cert).map_err(|e| {
                        ssl(&format!("root certificate file \"{}\"", path.display()), e)
                    })?;
                }
                let mut crl_flags = false;
                if let Some(crl) = self.crl.as_deref().filter(|p| p.exists()) {
                    regular_file(crl, "SSL CRL file")?;
                    store
                        .add_lookup(X509Lookup::file())
                        .and_then(|l| l.load_crl_file(crl, SslFiletype::PEM).map(|_| ()))
                        .map_err(|e| ssl(&format!("SSL CRL file \"{}\"", crl.display()), e))?;
                    crl_flags = true;
                }
                if let Some(dir) = self.crl_dir.as_deref() {
                    let name = dir.to_string_lossy().into_owned();
                    store
                        .add_lookup(X509Lookup::hash_dir())
                        .and_then(|l| l.add_dir(&name, SslFiletype::PEM))
                        .map_err(|e| ssl(&format!("SSL CRL directory \"{name}\""), e))?;
                    crl_flags = true;
                }
                if crl_flags {
                    store
                        .set_flags(X509VerifyFlags::CRL_CHECK | X509VerifyFlags::CRL_CHECK_ALL)
                        .map_err(|e| ssl("could not set up TLS", e))?;
                }
                builder.set_cert_store(store.build());
                true
            }
            root => {
                if matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull) {
                    let file = match root {
                        Some(RootCert::File(path)) => {
                            format!(" \"{}\"", path.display())
                        }
                        _ => String::new(),
                    };
                    return Err(format!(
                        "root certificate file{file} does not exist, and sslmode={} checks \
                         the server's certificate against it",
                        self.mode.name()
                    ));
                }
                false
            }
        };
        if let Some(cert) = self.cert.as_deref().filter(|p| p.exists()) {
            regular_file(cert, "client certificate file")?;
            builder.set_certificate_chain_file(cert).map_err(|e| {
                ssl(
                    &format!(
                        "could not load the client certificate file \"{}\"",
                        cert.display()
                    ),
                    e,
                )
            })?;
            let key = self.key.as_deref().filter(|p| p.exists()).ok_or_else(|| {
                format!(
                    "the client certificate \"{}\" is present, but not its private key file{}",
                    cert.display(),
                    self.key
                        .as_deref()
                        .map(|k| format!(" \"{}\"", k.display()))
                        .unwrap_or_default()
                )
            })?;
            check_key_permissions(key)?;
            let pem = std::fs::read(key).map_err(|e| {
                format!(
                    "could not read the private key file \"{}\": {e}",
                    key.display()
                )
            })?;
            // Never OpenSSL's default passphrase prompt on the terminal: the passphrase is
            // sslpassword's or none.
            let pkey = match &self.password {
                Some(pw) => PKey::private_key_from_pem_passphrase(&pem, pw.as_bytes()),
                None => PKey::private_key_from_pem_callback(&pem, |_| Ok(0)),
            }
            .map_err(|e| {
                let encrypted = pem.windows(9).any(|w| w == b"ENCRYPTED");
                match (&self.password, encrypted) {
                    (None, true) => format!(
                        "could not load the private key file \"{}\": it is encrypted, and \
                         sslpassword gives no passphrase for it",
                        key.display()
                    ),
                    (Some(_), true) => format!(
                        "could not load the private key file \"{}\": the passphrase in \
                         sslpassword does not decrypt it",
                        key.display()
                    ),
                    _ => format!(
                        "could not load the private key file \"{}\" (a PEM private key): {e}",
                        key.display()
                    ),
                }
            })?;
            builder.set_private_key(&pkey).map_err(|e| {
                ssl(
                    &format!("could not use the private key file \"{}\"", key.display()),
                    e,
                )
            })?;
            builder.check_private_key().map_err(|e| {
                ssl(
                    &format!(
                        "the private key file \"{}\" does not match the client certificate \"{}\"",
                        key.display(),
                        cert.display()
                    ),
                    e,
                )
            })?;
        }
        let mode = if verifies {
            SslVerifyMode::PEER
        } else {
            SslVerifyMode::NONE
        };
        builder.set_verify(mode);
        let mut connector = MakeTlsConnector::new(builder.build());
        let full = self.mode == SslMode::VerifyFull;
        let sni = self.sni;
        connector.set_callback(move |config, host| {
            config.set_verify_hostname(full);
            config.set_use_server_name_indication(sni);
            if !verifies {
                // Nothing is checked, so nothing can be refused: no reason to keep.
                return Ok(());
            }
            let slot = Arc::clone(&verify_failure);
            let host = host.to_string();
            config.set_verify_callback(mode, move |ok, ctx| {
                if !ok {
                    if let Ok(mut slot) = slot.lock() {
                        slot.get_or_insert_with(|| why_not_verified(ctx, &host));
                    }
                }
                ok
            });
            Ok(())
        });
        Ok(connector)
    }
}

/// Why a server certificate failed verification, in words that name the cause.
fn why_not_verified(ctx: &X509StoreContextRef, host: &str) -> String {
    use openssl::x509::X509VerifyResult as R;
    let err = ctx.error();
    let names = ctx
        .current_cert()
        .map(|cert| {
            let mut names: Vec<String> = cert
                .subject_alt_names()
                .map(|sans| {
                    sans.iter()
                        .filter_map(|n| {
                            n.dnsname().map(str::to_string).or_else(|| {
                                n.ipaddress().and_then(|ip| match ip.len() {
                                    4 => <[u8; 4]>::try_from(ip)
                                        .ok()
                                        .map(|b| std::net::Ipv4Addr::from(b).to_string()),
                                    16 => <[u8; 16]>::try_from(ip)
                                        .ok()
                                        .map(|b| std::net::Ipv6Addr::from(b).to_string()),
                                    _ => None,
                                })
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            if names.is_empty() {
                names.extend(
                    cert.subject_name()
                        .entries_by_nid(openssl::nid::Nid::COMMONNAME)
                        .filter_map(|e| e.data().to_string().ok()),
                );
            }
            names
        })
        .unwrap_or_default();
    // X509_V_ERR_HOSTNAME_MISMATCH (62) and X509_V_ERR_IP_ADDRESS_MISMATCH (64).
    if err.as_raw() == 62 || err.as_raw() == 64 {
        return format!(
            "server certificate host name mismatch: the certificate is for {}, not for \
             host \"{host}\"",
            if names.is_empty() {
                "no host name".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    if err == R::OK {
        return "server certificate not verified".to_string();
    }
    let subject = ctx
        .current_cert()
        .map(|c| {
            c.subject_name()
                .entries()
                .filter_map(|e| e.data().to_string().ok())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    format!(
        "server certificate not verified: {} (certificate \"{subject}\")",
        err.error_string()
    )
}

/// Refuses a TLS file that is not a regular file (a FIFO or a device would block the
/// connect, or feed it something else), before anything opens it.
fn regular_file(path: &Path, what: &str) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(format!(
            "{what} \"{}\" is not a regular file; name a PEM file",
            path.display()
        )),
        Err(e) => Err(format!(
            "could not read the {what} \"{}\": {e}",
            path.display()
        )),
    }
}

/// libpq's rule for a private key file: no access for others, and none for the group
/// unless root owns it (then the group may read).
fn check_key_permissions(key: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(key).map_err(|e| {
        format!(
            "could not read the private key file \"{}\": {e}",
            key.display()
        )
    })?;
    if !meta.is_file() {
        return Err(format!(
            "private key file \"{}\" is not a regular file",
            key.display()
        ));
    }
    let mode = meta.mode();
    let bad = if meta.uid() == 0 {
        mode & 0o137 != 0
    } else {
        mode & 0o077 != 0
    };
    if bad {
        return Err(format!(
            "private key file \"{}\" has group or world access; it must have permissions \
             u=rw (0600) or less if owned by the current user, or u=rw,g=r (0640) or less if \
             owned by root: chmod 0600 it",
            key.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Environment {
        Environment::new(
            vars.iter().copied(),
            Some(PathBuf::from("/home/u")),
            Some("u".to_string()),
        )
    }

    #[test]
    fn tls_keys_are_taken_out_of_urls_and_pairs() {
        let (rest, taken) = take_params(
            "postgresql://u@h/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem",
        );
        assert_eq!(rest, "postgresql://u@h/db?application_name=x");
        assert_eq!(
            taken,
            [
                ("sslmode".to_string(), "verify-full".to_string()),
                ("sslrootcert".to_string(), "/tmp/ca.pem".to_string())
            ]
        );
        let (rest, _) = take_params("postgresql://u@h/db?sslmode=allow");
        assert_eq!(rest, "postgresql://u@h/db");
        let (rest, taken) =
            take_params("host=h sslmode = verify-ca sslcert='/a b/c.crt' dbname=d sslsni=0");
        assert_eq!(
            rest.split_whitespace().collect::<Vec<_>>(),
            ["host=h", "dbname=d"]
        );
        assert_eq!(taken[1], ("sslcert".to_string(), "/a b/c.crt".to_string()));
        assert_eq!(taken.len(), 3);
    }

    #[test]
    fn libpqs_defaults_and_variables() {
        let t = Tls::resolve(&[], &env(&[])).unwrap();
        assert_eq!(t.mode(), SslMode::Prefer);
        assert_eq!(
            t.root_cert(),
            Some(&RootCert::File(PathBuf::from(
                "/home/u/.postgresql/root.crt"
            )))
        );
        assert_eq!(
            t.cert(),
            Some(Path::new("/home/u/.postgresql/postgresql.crt"))
        );
        assert_eq!(
            t.key(),
            Some(Path::new("/home/u/.postgresql/postgresql.key"))
        );
        assert!(t.sni());
        let e = env(&[
            ("PGSSLMODE", "verify-ca"),
            ("PGSSLROOTCERT", "/etc/ca.pem"),
            ("PGSSLCERT", "/c.crt"),
            ("PGSSLKEY", "/c.key"),
            ("PGSSLSNI", "0"),
        ]);
        let t = Tls::resolve(&[], &e).unwrap();
        assert_eq!(t.mode(), SslMode::VerifyCa);
        assert_eq!(t.root_cert(), Some(&RootCert::File("/etc/ca.pem".into())));
        assert_eq!(t.cert(), Some(Path::new("/c.crt")));
        assert_eq!(t.key(), Some(Path::new("/c.key")));
        assert!(!t.sni());
        // What the address names wins.
        let t = Tls::resolve(&[("sslmode".into(), "require".into())], &e).unwrap();
        assert_eq!(t.mode(), SslMode::Require);
        // sslrootcert=system means verify-full, and nothing weaker.
        let sys = [("sslrootcert".to_string(), "system".to_string())];
        let t = Tls::resolve(&sys, &env(&[])).unwrap();
        assert_eq!(t.mode(), SslMode::VerifyFull);
        assert_eq!(t.root_cert(), Some(&RootCert::System));
        let err = Tls::resolve(&sys, &env(&[("PGSSLMODE", "require")])).unwrap_err();
        assert!(err.to_string().contains("verify-full"), "{err}");
        let err = Tls::resolve(&[], &env(&[("PGSSLMODE", "on")])).unwrap_err();
        assert!(err.to_string().contains("PGSSLMODE"), "{err}");
        let t = Tls::resolve(&[("sslpassword".into(), "s3cret".into())], &env(&[])).unwrap();
        assert!(!format!("{t:?}").contains("s3cret"));
        let err = Tls::resolve(&[("sslsni".into(), "yes".into())], &env(&[])).unwrap_err();
        assert!(err.to_string().contains("sslsni"), "{err}");
    }

    #[test]
    fn verify_modes_need_a_root_certificate() {
        let t = Tls::resolve(
            &[
                ("sslmode".into(), "verify-full".into()),
                ("sslrootcert".into(), "/nonexistent/ca.pem".into()),
            ],
            &env(&[]),
        )
        .unwrap();
        let err = t
            .connector(false, Arc::new(Mutex::new(None)))
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("root certificate file \"/nonexistent/ca.pem\" does not exist"),
            "{err}"
        );
        // require without the file encrypts without checking.
        let t = Tls::resolve(
            &[
                ("sslmode".into(), "require".into()),
                ("sslrootcert".into(), "/nonexistent/ca.pem".into()),
            ],
            &env(&[]),
        )
        .unwrap();
        assert!(t.connector(false, Arc::new(Mutex::new(None))).is_ok());
    }

    #[test]
    fn a_tls_file_that_is_not_a_regular_file_is_refused_without_opening_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("ca.pem");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a NUL-terminated path; the result is checked.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening a FIFO with nobody writing would block the connect for ever.
        let t = Tls::resolve(
            &[
                ("sslmode".into(), "verify-full".into()),
                ("sslrootcert".into(), fifo.to_string_lossy().into_owned()),
            ],
            &env(&[]),
        )
        .unwrap();
        let err = t
            .connector(false, Arc::new(Mutex::new(None)))
            .err()
            .unwrap_or_default();
        assert!(err.contains("is not a regular file"), "{err}");
        let err = check_key_permissions(dir.path()).unwrap_err();
        assert!(err.contains("is not a regular file"), "{err}");
    }
}
