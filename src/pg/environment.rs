//! What an address leaves out, taken where libpq takes it: the `PG*` environment variables,
//! the password file (`~/.pgpass` or `PGPASSFILE`), and libpq's defaults (the Unix socket
//! in `/var/run/postgresql`, port 5432, the operating-system user name).
//!
//! Only parts the address does not name are filled in, as libpq does: `PGHOST`, `PGPORT`,
//! `PGUSER`, `PGDATABASE`, `PGPASSWORD`, `PGPASSFILE`, `PGAPPNAME`, `PGOPTIONS`,
//! `PGTARGETSESSIONATTRS`, and for TLS `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`,
//! `PGSSLKEY`, `PGSSLCRL`, `PGSSLCRLDIR`, `PGSSLSNI` and the protocol-version bounds (see
//! [`super::tls`]). A
//! password file that group or others can read is not used (libpq refuses it too); the
//! reason is kept as a note for the connection error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The default Unix socket directory of Debian's libpq.
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// The default port: 5432.
pub const DEFAULT_PORT: u16 = 5432;

/// The environment an address is completed from.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    vars: HashMap<String, String>,
    home: Option<PathBuf>,
    os_user: Option<String>,
}

impl Environment {
    /// This process's environment, home directory and user name.
    pub fn current() -> Environment {
        let vars: HashMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .filter(|(k, _)| k.starts_with("PG") || k == "HOME")
            .collect();
        let (pw_name, pw_dir) = passwd_entry();
        let home = vars.get("HOME").map(PathBuf::from).or(pw_dir);
        Environment {
            vars,
            home,
            os_user: pw_name,
        }
    }

    /// An environment with these variables, home directory and user name (for tests and
    /// hosts that keep their own).
    pub fn new<I, K, V>(vars: I, home: Option<PathBuf>, os_user: Option<String>) -> Environment
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Environment {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            home,
            os_user,
        }
    }

    /// A variable, when set and not empty (libpq ignores empty ones).
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The operating-system user name (libpq's default user).
    pub fn os_user(&self) -> Option<&str> {
        self.os_user.as_deref()
    }

    /// The home directory (`HOME`, else the password database's), where libpq's default
    /// files live (`~/.pgpass`, `~/.postgresql/root.crt`, ...).
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The password file: `PGPASSFILE`, else `~/.pgpass`.
    pub fn password_file(&self) -> Option<PathBuf> {
        match self.var("PGPASSFILE") {
            Some(path) => Some(PathBuf::from(path)),
            None => self.home.as_ref().map(|h| h.join(".pgpass")),
        }
    }
}

/// The current user's name and home directory from the password database.
fn passwd_entry() -> (Option<String>, Option<PathBuf>) {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; getpwuid_r writes only into `pwd` and
    // `buf`, and `result` is either null or points at `pwd`.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::geteuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return (None, None);
    }
    // SAFETY: on success pw_name and pw_dir point at NUL-terminated strings inside `buf`.
    let text = |p: *const libc::c_char| {
        (!p.is_null()).then(|| {
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        })
    };
    (text(pwd.pw_name), text(pwd.pw_dir).map(PathBuf::from))
}

/// The password for `host:port:database:user` in a password file's `text` (the first
/// matching line; `*` matches anything; `\:` and `\\` escape; `#` starts a comment line).
pub fn lookup_password(
    text: &str,
    host: &str,
    port: &str,
    database: &str,
    user: &str,
) -> Option<String> {
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = split_fields(line);
        if fields.len() < 5 {
            continue;
        }
        let wanted = [host, port, database, user];
        if fields[..4]
            .iter()
            .zip(wanted)
            .all(|(f, w)| f == "*" || f == w)
        {
            return Some(fields[4..].join(":"));
        }
    }
    None
}

fn split_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(next);
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c)
                }
            }
        }
    }
    fields
}

/// Reads the password file at `path` for the given key. `Err` carries why the file was not
/// used (group or others can read it); a missing file is `Ok(None)`.
pub fn password_from_file(
    path: &Path,
    host: &str,
    port: &str,
    database: &str,
    user: &str,
) -> Result<Option<String>, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Err(format!(
            "the password file {} was not used because it is not a plain file",
            path.display()
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "the password file {} was not used because group or others can read it; \
             make it private with chmod 0600 {}",
            path.display(),
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "the password file {} could not be read: {e}",
            path.display()
        )
    })?;
    Ok(lookup_password(&text, host, port, database, user))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_lines_match_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db.example:5432:ledger:alice:first\n\
                    *:*:*:bob:pa\\:ss\\\\word\n\
                    localhost:6543:*:*:local:with:colons\n";
        assert_eq!(
            lookup_password(text, "db.example", "5432", "ledger", "alice").as_deref(),
            Some("first")
        );
        assert_eq!(
            lookup_password(text, "anywhere", "1", "x", "bob").as_deref(),
            Some("pa:ss\\word")
        );
        assert_eq!(
            lookup_password(text, "localhost", "6543", "d", "carol").as_deref(),
            Some("local:with:colons")
        );
        assert_eq!(
            lookup_password(text, "db.example", "5433", "ledger", "alice"),
            None
        );
    }

    #[test]
    fn a_readable_password_file_is_not_used_and_says_why() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pgpass");
        std::fs::write(&path, "*:*:*:*:secret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = password_from_file(&path, "h", "1", "d", "u").unwrap_err();
        assert!(err.contains("chmod 0600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            password_from_file(&path, "h", "1", "d", "u")
                .unwrap()
                .as_deref(),
            Some("secret")
        );
        assert_eq!(
            password_from_file(&dir.path().join("missing"), "h", "1", "d", "u").unwrap(),
            None
        );
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let env = Environment::new([("PGHOST", ""), ("PGPORT", "6000")], None, None);
        assert_eq!(env.var("PGHOST"), None);
        assert_eq!(env.var("PGPORT"), Some("6000"));
        let env = Environment::new(
            [("PGPASSFILE", "/x/pw")],
            Some(PathBuf::from("/home/a")),
            None,
        );
        assert_eq!(env.password_file(), Some(PathBuf::from("/x/pw")));
        let env = Environment::new(
            Vec::<(String, String)>::new(),
            Some(PathBuf::from("/home/a")),
            None,
        );
        assert_eq!(env.password_file(), Some(PathBuf::from("/home/a/.pgpass")));
        assert!(Environment::current().os_user().is_some());
    }
}
