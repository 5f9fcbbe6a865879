//! The session's own connections over TLS, against a real server that admits TCP sessions
//! only over TLS (started here by `tests/pg-tls-cluster.sh`, with a certificate authority
//! and certificates made by `openssl` for this run), and against the plain server of
//! `TEST_DATABASE_URL` for `prefer` and `require` without TLS.
//!
//! One cluster for all cases, so the cases run one after another on the main thread.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use writerlock::pg::environment::Environment;
use writerlock::pg::{Address, Connection, Error, Pool, Settings, Value};

struct Cluster {
    dir: PathBuf,
    port: u16,
    certs: PathBuf,
}

impl Cluster {
    fn start() -> Cluster {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pg-tls-cluster.sh");
        let dir = std::env::temp_dir().join(format!("writerlock-tls.{}", std::process::id()));
        let out = Command::new(&script)
            .arg("start")
            .arg(&dir)
            .output()
            .expect("run tests/pg-tls-cluster.sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the TLS cluster did not start: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = stdout
            .lines()
            .find_map(|l| l.strip_prefix("TLS_PG_PORT="))
            .and_then(|p| p.trim().parse().ok())
            .expect("TLS_PG_PORT in the script's output");
        Cluster {
            certs: dir.join("certs"),
            dir,
            port,
        }
    }

    fn cert(&self, name: &str) -> String {
        self.certs.join(name).display().to_string()
    }

    /// key=value pairs for `user` at `host`, then `extra`.
    fn pairs(&self, host: &str, user: &str, extra: &str) -> String {
        format!(
            "host={host} port={} user={user} dbname=postgres {extra}",
            self.port
        )
    }
}

impl Cluster {
    fn restart(&self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pg-tls-cluster.sh");
        let ok = Command::new(script)
            .arg("restart")
            .arg(&self.dir)
            .arg("fast")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "the TLS cluster did not restart");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pg-tls-cluster.sh");
        let _ = Command::new(script).arg("stop").arg(&self.dir).status();
    }
}

/// An environment with only these variables and `home` (an empty directory unless a case
/// puts libpq's default files there), so the runner's own ~/.postgresql plays no part.
fn environment(vars: &[(&str, &str)], home: &Path) -> Environment {
    Environment::new(
        vars.iter().copied(),
        Some(home.to_path_buf()),
        Some("postgres".to_string()),
    )
}

fn connect_in(url: &str, env: &Environment) -> Result<Connection, Error> {
    let address = Address::parse_in(url, env)?;
    Connection::open(&address, &Settings::new(), true)
}

/// Whether the session is encrypted, as the server sees it.
fn ssl_in_use(conn: &mut Connection) -> bool {
    let rows = conn
        .execute(
            "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
            &[],
        )
        .expect("read pg_stat_ssl");
    rows.first()
        .and_then(|r| r.get(0))
        .and_then(Value::as_bool)
        .expect("a boolean")
}

fn current_user(conn: &mut Connection) -> String {
    let rows = conn
        .execute("SELECT current_user::text", &[])
        .expect("current_user");
    rows.first()
        .and_then(|r| r.get(0))
        .and_then(Value::as_str)
        .expect("text")
        .to_string()
}

type Case = fn(&Cluster, &Path) -> Result<(), String>;

fn must_connect(url: &str, env: &Environment) -> Result<Connection, String> {
    connect_in(url, env).map_err(|e| format!("{url}: {e}"))
}

fn must_fail(url: &str, env: &Environment, words: &[&str]) -> Result<String, String> {
    match connect_in(url, env) {
        Ok(_) => Err(format!("{url}: connected, but must be refused")),
        Err(e) => {
            let text = e.to_string();
            if !matches!(e, Error::Connect { .. }) {
                return Err(format!("{url}: not a connect error: {e:?}"));
            }
            for w in words {
                if !text.contains(w) {
                    return Err(format!("{url}: the message lacks {w:?}: {text}"));
                }
            }
            if std::env::var_os("SHOW_TLS_ERRORS").is_some() {
                eprintln!("{text}\n");
            }
            Ok(text)
        }
    }
}

fn disable_is_refused_with_a_hint(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let text = must_fail(
        &c.pairs("localhost", "postgres", "sslmode=disable"),
        &env,
        &["no encryption", "sslmode=prefer", "instead of disable"],
    )?;
    if text.contains("speak no TLS") {
        return Err(format!("the hint still says there is no TLS: {text}"));
    }
    Ok(())
}

fn allow_prefer_require_encrypt(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    for mode in ["allow", "prefer", "require"] {
        let url = c.pairs("localhost", "postgres", &format!("sslmode={mode}"));
        let mut conn = must_connect(&url, &env)?;
        if !ssl_in_use(&mut conn) {
            return Err(format!("{url}: the session is not encrypted"));
        }
    }
    // prefer is the default, in both forms of address.
    let mut conn = must_connect(&c.pairs("127.0.0.1", "postgres", ""), &env)?;
    if !ssl_in_use(&mut conn) {
        return Err("the default sslmode did not use TLS".into());
    }
    let url = format!(
        "postgresql://postgres@127.0.0.1:{}/postgres?sslmode=allow",
        c.port
    );
    let mut conn = must_connect(&url, &env)?;
    if !ssl_in_use(&mut conn) {
        return Err(format!("{url}: not encrypted"));
    }
    Ok(())
}

/// `prefer` falls back to clear text when the server refuses the TLS session (its
/// pg_hba.conf admits tls_plain_user only without TLS) or the TLS handshake fails; `require`
/// never does.
fn prefer_falls_back_when_tls_is_refused(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    for extra in [
        String::new(),
        format!("sslrootcert={}", c.cert("other-ca.crt")),
    ] {
        let url = c.pairs(
            "localhost",
            "tls_plain_user",
            &format!("sslmode=prefer {extra}"),
        );
        let mut conn = must_connect(&url, &env)?;
        if ssl_in_use(&mut conn) {
            return Err(format!(
                "{url}: encrypted, though the server admits it only without"
            ));
        }
    }
    let url = c.pairs("localhost", "tls_plain_user", "sslmode=require");
    must_fail(
        &url,
        &env,
        &[
            "rejects connection",
            "SSL encryption",
            "refuses this client over TLS",
        ],
    )?;
    Ok(())
}

fn verify_ca_and_verify_full_with_the_right_ca(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let ca = c.cert("ca.crt");
    for url in [
        c.pairs(
            "localhost",
            "postgres",
            &format!("sslmode=verify-ca sslrootcert={ca}"),
        ),
        c.pairs(
            "localhost",
            "postgres",
            &format!("sslmode=verify-full sslrootcert='{ca}'"),
        ),
        c.pairs(
            "127.0.0.1",
            "postgres",
            &format!("sslmode=verify-full sslrootcert={ca} sslsni=0"),
        ),
        format!(
            "postgresql://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
            c.port,
            ca.replace('/', "%2F")
        ),
        // verify-ca checks the signer only, so another name is fine.
        c.pairs(
            "db.invalid",
            "postgres",
            &format!("hostaddr=127.0.0.1 sslmode=verify-ca sslrootcert={ca}"),
        ),
    ] {
        let mut conn = must_connect(&url, &env)?;
        if !ssl_in_use(&mut conn) {
            return Err(format!("{url}: not encrypted"));
        }
    }
    Ok(())
}

fn wrong_host_name_is_refused_under_verify_full(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let url = c.pairs(
        "db.invalid",
        "postgres",
        &format!(
            "hostaddr=127.0.0.1 sslmode=verify-full sslrootcert={}",
            c.cert("ca.crt")
        ),
    );
    must_fail(
        &url,
        &env,
        &[
            "host name mismatch",
            "localhost, 127.0.0.1",
            "db.invalid",
            "connect with a host name the certificate names",
        ],
    )?;
    Ok(())
}

fn untrusted_ca_is_refused(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let other = c.cert("other-ca.crt");
    for mode in ["verify-full", "verify-ca", "require"] {
        // require checks the chain too when a root certificate file is there, as libpq.
        let url = c.pairs(
            "localhost",
            "postgres",
            &format!("sslmode={mode} sslrootcert={other}"),
        );
        must_fail(
            &url,
            &env,
            &[
                "server certificate not verified",
                "not signed by a certificate authority this client trusts",
                "sslrootcert",
            ],
        )?;
    }
    // The system's store does not hold this run's authority either.
    let url = c.pairs("localhost", "postgres", "sslrootcert=system");
    must_fail(
        &url,
        &env,
        &["not signed by a certificate authority this client trusts"],
    )?;
    // verify-full without any root certificate says where it looked.
    let url = c.pairs("localhost", "postgres", "sslmode=verify-full");
    let expected = home.join(".postgresql/root.crt").display().to_string();
    must_fail(
        &url,
        &env,
        &["does not exist", &expected, "sslrootcert=system"],
    )?;
    Ok(())
}

fn client_certificate_login(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let url = c.pairs(
        "localhost",
        "tls_cert_user",
        &format!(
            "sslmode=verify-full sslrootcert={} sslcert={} sslkey={}",
            c.cert("ca.crt"),
            c.cert("client.crt"),
            c.cert("client.key")
        ),
    );
    let mut conn = must_connect(&url, &env)?;
    if current_user(&mut conn) != "tls_cert_user" {
        return Err("not logged in as tls_cert_user".into());
    }
    // Without the certificate the server says what it wants, and so does the hint.
    let url = c.pairs(
        "localhost",
        "tls_cert_user",
        &format!("sslmode=verify-full sslrootcert={}", c.cert("ca.crt")),
    );
    must_fail(
        &url,
        &env,
        &["requires a valid client certificate", "sslcert"],
    )?;
    Ok(())
}

/// An encrypted client key opens with `sslpassword`; without it the error says so.
fn an_encrypted_client_key_and_sslpassword(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let base = format!(
        "sslmode=verify-full sslrootcert={} sslcert={} sslkey={}",
        c.cert("ca.crt"),
        c.cert("client.crt"),
        c.cert("client-encrypted.key")
    );
    let url = c.pairs(
        "localhost",
        "tls_cert_user",
        &format!("{base} sslpassword=tls-key-pass"),
    );
    let mut conn = must_connect(&url, &env)?;
    if current_user(&mut conn) != "tls_cert_user" {
        return Err("not logged in by the encrypted key's certificate".into());
    }
    let url = c.pairs("localhost", "tls_cert_user", &base);
    // Refused with the reason: never OpenSSL's passphrase prompt on the terminal.
    must_fail(
        &url,
        &env,
        &[
            "is encrypted",
            "sslpassword gives no passphrase",
            "give the private key's passphrase",
        ],
    )?;
    let url = c.pairs(
        "localhost",
        "tls_cert_user",
        &format!("{base} sslpassword=wrong-pass"),
    );
    let text = must_fail(&url, &env, &["does not decrypt it"])?;
    if text.contains("wrong-pass") {
        return Err(format!("the passphrase is in the message: {text}"));
    }
    Ok(())
}

/// A revocation list (sslcrl) that revokes the server's certificate refuses it; one that
/// revokes nothing does not.
fn a_revoked_server_certificate_is_refused(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let with_crl = |crl: &str| {
        c.pairs(
            "localhost",
            "postgres",
            &format!(
                "sslmode=verify-full sslrootcert={} sslcrl={}",
                c.cert("ca.crt"),
                c.cert(crl)
            ),
        )
    };
    must_connect(&with_crl("empty.crl"), &env)?;
    must_fail(
        &with_crl("revoked.crl"),
        &env,
        &["certificate revoked", "revocation list"],
    )?;
    // PGSSLCRL names it too.
    let env = environment(&[("PGSSLCRL", &c.cert("revoked.crl"))], home);
    let url = c.pairs(
        "localhost",
        "postgres",
        &format!("sslmode=verify-ca sslrootcert={}", c.cert("ca.crt")),
    );
    must_fail(&url, &env, &["certificate revoked"])?;
    Ok(())
}

fn the_environment_variables(c: &Cluster, home: &Path) -> Result<(), String> {
    let (ca, crt, key) = (c.cert("ca.crt"), c.cert("client.crt"), c.cert("client.key"));
    let env = environment(
        &[
            ("PGSSLMODE", "verify-full"),
            ("PGSSLROOTCERT", &ca),
            ("PGSSLCERT", &crt),
            ("PGSSLKEY", &key),
            ("PGSSLSNI", "0"),
            ("PGHOST", "localhost"),
            ("PGPORT", &c.port.to_string()),
            ("PGUSER", "tls_cert_user"),
            ("PGDATABASE", "postgres"),
        ],
        home,
    );
    let mut conn = must_connect("postgresql://", &env)?;
    if current_user(&mut conn) != "tls_cert_user" || !ssl_in_use(&mut conn) {
        return Err("PGSSL* variables not used".into());
    }
    // PGSSLMODE=verify-full with the wrong authority refuses.
    let env = environment(
        &[
            ("PGSSLMODE", "verify-full"),
            ("PGSSLROOTCERT", &c.cert("other-ca.crt")),
        ],
        home,
    );
    must_fail(
        &c.pairs("localhost", "postgres", ""),
        &env,
        &["server certificate not verified"],
    )?;
    // PGSSLMODE=disable is refused by the TLS-only server.
    let env = environment(&[("PGSSLMODE", "disable")], home);
    must_fail(
        &c.pairs("localhost", "postgres", ""),
        &env,
        &["no encryption"],
    )?;
    Ok(())
}

fn libpqs_default_files(c: &Cluster, _: &Path) -> Result<(), String> {
    let home = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dot = home.path().join(".postgresql");
    std::fs::create_dir(&dot).map_err(|e| e.to_string())?;
    for (from, to) in [
        ("ca.crt", "root.crt"),
        ("client.crt", "postgresql.crt"),
        ("client.key", "postgresql.key"),
    ] {
        std::fs::copy(c.certs.join(from), dot.join(to)).map_err(|e| e.to_string())?;
    }
    let env = environment(&[], home.path());
    let url = c.pairs("localhost", "tls_cert_user", "sslmode=verify-full");
    let mut conn = must_connect(&url, &env)?;
    if current_user(&mut conn) != "tls_cert_user" {
        return Err("the default files were not used".into());
    }
    // A key others can read is refused, as libpq refuses it.
    std::fs::set_permissions(
        dot.join("postgresql.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .map_err(|e| e.to_string())?;
    must_fail(&url, &env, &["has group or world access", "chmod 0600"])?;
    Ok(())
}

fn channel_binding_over_tls(c: &Cluster, home: &Path) -> Result<(), String> {
    let env = environment(&[], home);
    let url = c.pairs(
        "localhost",
        "tls_scram_user",
        &format!(
            "password=tls-scram-pw sslmode=verify-full sslrootcert={} channel_binding=require",
            c.cert("ca.crt")
        ),
    );
    let mut conn = must_connect(&url, &env)?;
    if current_user(&mut conn) != "tls_scram_user" || !ssl_in_use(&mut conn) {
        return Err("not the SCRAM user over TLS".into());
    }
    let url = format!(
        "postgresql://tls_scram_user:tls-scram-pw@localhost:{}/postgres?sslmode=require&channel_binding=require",
        c.port
    );
    must_connect(&url, &env)?;
    Ok(())
}

fn a_pooled_tls_connection_is_reused(c: &Cluster, home: &Path) -> Result<(), String> {
    // The pool's no-round-trip check of an idle session reads the socket: TLS must not make
    // a live session look ended.
    let url = format!(
        "postgresql://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
        c.port,
        c.cert("ca.crt")
    );
    let pool = Pool::new(&url, Settings::new(), 2).map_err(|e| e.to_string())?;
    let conn = pool.take().map_err(|e| e.to_string())?;
    let pid = conn.pid();
    pool.give(conn).map_err(|e| e.to_string())?;
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut again = pool.take().map_err(|e| e.to_string())?;
    if again.pid() != pid {
        return Err(format!(
            "the pool opened a new session ({}) instead of reusing {pid}",
            again.pid()
        ));
    }
    if !ssl_in_use(&mut again) {
        return Err("not encrypted".into());
    }
    pool.give(again).map_err(|e| e.to_string())?;
    // A connection to the same place with other TLS options (here: none) is not one this
    // pool opened: given to it, it is refused, so a later take() never hands out a session
    // without the pool's verify-full.
    let plain = format!(
        "postgresql://postgres@localhost:{}/postgres?sslmode=require&sslrootcert={}",
        c.port,
        c.cert("ca.crt")
    );
    let other = connect_in(&plain, &environment(&[], home)).map_err(|e| e.to_string())?;
    match pool.give(other) {
        Err(Error::ForeignConnection { reason }) if reason.contains("TLS options") => Ok(()),
        Err(other) => Err(format!("refused for another reason: {other}")),
        Ok(()) => Err("a connection with other TLS options was taken into the pool".into()),
    }
}

/// A restart costs no write over TLS either: each pooled TLS session the server ended is
/// recognised on its socket (the termination notice arrives encrypted, but arrives), and the
/// writes right after the restart go to fresh sessions and commit.
fn pooled_tls_writes_right_after_a_restart_commit(c: &Cluster, _: &Path) -> Result<(), String> {
    let url = format!(
        "postgresql://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
        c.port,
        c.cert("ca.crt")
    );
    let pool = Pool::new(&url, Settings::new(), 3).map_err(|e| e.to_string())?;
    let write = |conn: &mut Connection, tag: &str| -> Result<(), Error> {
        let mut w = conn.write()?;
        w.execute("INSERT INTO tls_restart VALUES ($1)", &[Value::from(tag)])?;
        w.commit()
    };
    {
        let mut conn = pool.take().map_err(|e| e.to_string())?;
        conn.execute("CREATE TABLE IF NOT EXISTS tls_restart (tag text)", &[])
            .map_err(|e| e.to_string())?;
        pool.give(conn).map_err(|e| e.to_string())?;
    }
    let taken: Vec<Connection> = (0..3)
        .map(|_| pool.take())
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    for mut conn in taken {
        write(&mut conn, "before").map_err(|e| format!("before the restart: {e}"))?;
        pool.give(conn).map_err(|e| e.to_string())?;
    }
    c.restart();
    let taken: Vec<Connection> = (0..3)
        .map(|_| pool.take())
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    for mut conn in taken {
        write(&mut conn, "after")
            .map_err(|e| format!("a pooled TLS write right after the restart failed: {e}"))?;
        if !ssl_in_use(&mut conn) {
            return Err("the fresh session is not encrypted".into());
        }
        pool.give(conn).map_err(|e| e.to_string())?;
    }
    let mut conn = pool.take().map_err(|e| e.to_string())?;
    let rows = conn
        .execute("SELECT count(*) FROM tls_restart WHERE tag = 'after'", &[])
        .map_err(|e| e.to_string())?;
    let n = rows.first().and_then(|r| r.get(0)).and_then(Value::as_i64);
    if n != Some(3) {
        return Err(format!("{n:?} writes after the restart, expected 3"));
    }
    Ok(())
}

/// Against the plain server of `TEST_DATABASE_URL` (ssl off): prefer connects without TLS,
/// require is refused with a hint naming the cause.
fn prefer_and_require_against_a_server_without_tls(_: &Cluster, home: &Path) -> Result<(), String> {
    let plain = match std::env::var("TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => {
            return Err(
                "TEST_DATABASE_URL is not set: run under tests/with-postgres.sh or make test"
                    .into(),
            )
        }
    };
    let sep = if plain.contains('?') { '&' } else { '?' };
    let env = environment(&[], home);
    for url in [format!("{plain}{sep}sslmode=prefer"), plain.clone()] {
        let mut conn = must_connect(&url, &env)?;
        if ssl_in_use(&mut conn) {
            return Err(format!("{url}: encrypted on a server without TLS?"));
        }
    }
    must_fail(
        &format!("{plain}{sep}sslmode=require"),
        &env,
        &[
            "server does not support TLS",
            "ssl is off",
            "never fall back to clear text",
        ],
    )?;
    Ok(())
}

fn main() {
    let cases: &[(&str, Case)] = &[
        (
            "disable_is_refused_with_a_hint",
            disable_is_refused_with_a_hint,
        ),
        ("allow_prefer_require_encrypt", allow_prefer_require_encrypt),
        (
            "prefer_falls_back_when_tls_is_refused",
            prefer_falls_back_when_tls_is_refused,
        ),
        (
            "verify_ca_and_verify_full_with_the_right_ca",
            verify_ca_and_verify_full_with_the_right_ca,
        ),
        (
            "wrong_host_name_is_refused_under_verify_full",
            wrong_host_name_is_refused_under_verify_full,
        ),
        ("untrusted_ca_is_refused", untrusted_ca_is_refused),
        ("client_certificate_login", client_certificate_login),
        (
            "an_encrypted_client_key_and_sslpassword",
            an_encrypted_client_key_and_sslpassword,
        ),
        (
            "a_revoked_server_certificate_is_refused",
            a_revoked_server_certificate_is_refused,
        ),
        ("the_environment_variables", the_environment_variables),
        ("libpqs_default_files", libpqs_default_files),
        ("channel_binding_over_tls", channel_binding_over_tls),
        (
            "a_pooled_tls_connection_is_reused",
            a_pooled_tls_connection_is_reused,
        ),
        (
            "pooled_tls_writes_right_after_a_restart_commit",
            pooled_tls_writes_right_after_a_restart_commit,
        ),
        (
            "prefer_and_require_against_a_server_without_tls",
            prefer_and_require_against_a_server_without_tls,
        ),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let chosen: Vec<_> = cases
        .iter()
        .filter(|(name, _)| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())))
        .collect();
    if chosen.is_empty() {
        return;
    }
    let cluster = Cluster::start();
    let home = tempfile::tempdir().expect("an empty home directory");
    let mut failed = 0;
    for (name, case) in &chosen {
        match case(&cluster, home.path()) {
            Ok(()) => println!("test {name} ... ok"),
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED\n    {e}");
            }
        }
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        chosen.len() - failed
    );
    drop(cluster);
    if failed > 0 {
        std::process::exit(1);
    }
}
