//! Real parts for the fault tests: a throwaway PostgreSQL cluster of a test's own (so it can
//! be restarted or frozen), a real PgBouncer in front of a server, and a cut network (an
//! `nft` table that drops a port's packets on loopback, removed afterwards and by a watchdog
//! at the latest after two minutes).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use crate::common::is_root;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn pg_bin() -> PathBuf {
    let mut found = None;
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|p| p.join("pg_ctl").exists())
            .collect();
        dirs.sort();
        found = dirs.pop();
    }
    found.unwrap_or_else(|| {
        panic!(
            "PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin; install them \
             with: apt-get install -y postgresql (or run make deps)"
        )
    })
}

/// Runs a command as the server's user when root (Postgres and PgBouncer refuse root).
fn as_server(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

fn run_quiet(cmd: &mut Command, what: &str) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

/// A throwaway cluster of one test's own, started by `tests/pg-cluster.sh` and removed when
/// dropped.
pub struct Cluster {
    pub dir: PathBuf,
    pub url: String,
    pub port: u16,
}

impl Cluster {
    pub fn start() -> Cluster {
        let env_file = tempfile::NamedTempFile::new().expect("env file");
        run_quiet(
            Command::new(repo().join("tests/pg-cluster.sh"))
                .arg("start")
                .arg("")
                .arg(env_file.path()),
            "tests/pg-cluster.sh start",
        );
        let text = std::fs::read_to_string(env_file.path()).expect("read env file");
        let mut url = String::new();
        let mut dir = String::new();
        for line in text.lines() {
            let line = line.trim_start_matches("export ");
            if let Some(v) = line.strip_prefix("TEST_DATABASE_URL=") {
                url = v.to_string();
            }
            if let Some(v) = line.strip_prefix("PG_CLUSTER_DIR=") {
                dir = v.to_string();
            }
        }
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.split('/').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {url}"));
        Cluster {
            dir: PathBuf::from(dir),
            url,
            port,
        }
    }

    /// `pg_ctl restart -m MODE`, logging to the cluster's log file (so the restarted server
    /// never holds a pipe of ours).
    pub fn restart(&self, mode: &str) {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        run_quiet(
            as_server(&pg_bin().join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-m", mode, "restart"])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            "pg_ctl restart",
        );
    }

    /// The postmaster's pid.
    pub fn postmaster_pid(&self) -> i32 {
        let text =
            std::fs::read_to_string(self.dir.join("data/postmaster.pid")).expect("postmaster.pid");
        text.lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("pid in postmaster.pid")
    }

    /// Freezes the postmaster with SIGSTOP until the guard is dropped (SIGCONT).
    pub fn freeze(&self) -> Frozen {
        let pid = self.postmaster_pid();
        // SAFETY: plain kill(2) on the server process this test started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        Frozen { pid }
    }

    /// A plain admin session (no writer settings).
    pub fn plain(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("plain connect")
    }
}

/// A hot standby of a [`Cluster`], streaming from it (`pg_basebackup -R`), stopped and
/// removed when dropped.
pub struct Standby {
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Standby {
    /// Copies `primary` with `pg_basebackup -R` and starts the copy as a hot standby on a
    /// free port; returns once it accepts sessions.
    pub fn of(primary: &Cluster) -> Standby {
        let dir = tempfile::Builder::new()
            .prefix("wl-standby.")
            .tempdir()
            .expect("standby dir");
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        std::fs::create_dir_all(&sock).expect("socket dir");
        if is_root() {
            run_quiet(
                Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(dir.path()),
                "chown the standby dir",
            );
        }
        run_quiet(
            as_server(&pg_bin().join("pg_basebackup"))
                .arg("-D")
                .arg(&data)
                .args([
                    "-R",
                    "-X",
                    "stream",
                    "-h",
                    "127.0.0.1",
                    "-U",
                    "postgres",
                    "-p",
                ])
                .arg(primary.port.to_string()),
            "pg_basebackup",
        );
        let port = free_port();
        run_quiet(
            as_server(&pg_bin().join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o"])
                .arg(format!(
                    "-p {port} -k {} -c listen_addresses=127.0.0.1 -c hot_standby=on",
                    sock.display()
                ))
                .arg("start")
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            "start the standby",
        );
        Standby { dir, port }
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        let _ = as_server(&pg_bin().join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tests/pg-cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A frozen postmaster, thawed (SIGCONT) when dropped.
pub struct Frozen {
    pid: i32,
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) on the server process this test stopped.
        unsafe { libc::kill(self.pid, libc::SIGCONT) };
    }
}

/// A real PgBouncer in front of a server, stopped when dropped.
pub struct Bouncer {
    dir: tempfile::TempDir,
    pub port: u16,
    pid: i32,
}

impl Bouncer {
    /// Starts PgBouncer on a free port in `mode` (`session` or `transaction`) for the
    /// server on 127.0.0.1:`server_port`, with trust authentication. With
    /// `ignore_options` it ignores the `options` startup parameter (the set-up an operator
    /// needs for clients that send one), otherwise it refuses such clients.
    pub fn start(server_port: u16, mode: &str, ignore_options: bool) -> Bouncer {
        let program = which("pgbouncer").unwrap_or_else(|| {
            panic!(
                "pgbouncer is not installed; install it with: apt-get install -y pgbouncer \
                 (or run make deps)"
            )
        });
        let dir = tempfile::Builder::new()
            .prefix("wl-pgbouncer.")
            .tempdir()
            .expect("pgbouncer dir");
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let ignore = if ignore_options {
                "ignore_startup_parameters = options\n"
            } else {
                ""
            };
            let config = format!(
                "[databases]\n* = host=127.0.0.1 port={server_port}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {users}\npool_mode = {mode}\n\
                 max_client_conn = 100\ndefault_pool_size = 4\n{ignore}\
                 server_connect_timeout = 3\nserver_login_retry = 1\n\
                 logfile = {log}\npidfile = {pidfile}\n",
                users = dir.path().join("users.txt").display(),
                log = dir.path().join("pgbouncer.log").display(),
                pidfile = dir.path().join("pgbouncer.pid").display(),
            );
            std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").expect("users");
            let ini = dir.path().join("pgbouncer.ini");
            std::fs::write(&ini, config).expect("pgbouncer.ini");
            if is_root() {
                let _ = Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(dir.path())
                    .status();
            }
            let status = as_server(&program)
                .arg("-d")
                .arg("-q")
                .arg(&ini)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run pgbouncer");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                let pid = std::fs::read_to_string(dir.path().join("pgbouncer.pid"))
                    .ok()
                    .and_then(|t| t.trim().parse::<i32>().ok());
                if let Some(pid) = pid {
                    if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                        return Bouncer { dir, port, pid };
                    }
                }
                if !status.success() {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
            last = std::fs::read_to_string(dir.path().join("pgbouncer.log")).unwrap_or_default();
        }
        panic!("pgbouncer did not start: {last}");
    }

    /// `postgresql://postgres@127.0.0.1:PORT/DB` through the bouncer.
    pub fn url(&self, db: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Kills PgBouncer with SIGKILL (a pooler that dies).
    pub fn kill9(&mut self) {
        // SAFETY: plain kill(2) on the PgBouncer this test started.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{}", self.pid)).exists() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        self.pid = 0; // gone: Drop must not signal a pid the system may hand out again
    }

    /// What PgBouncer logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if self.pid <= 0 {
            return;
        }
        // SAFETY: plain kill(2) on the PgBouncer this test started (its pidfile's pid).
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{}", self.pid)).exists() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        if Path::new(&format!("/proc/{}", self.pid)).exists() {
            // SAFETY: as above.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.exists())
}

/// Packets of one port dropped on loopback: an `nft` table of its own, deleted when dropped,
/// and by a watchdog process after two minutes should the test die first.
pub struct Cut {
    table: String,
}

impl Cut {
    /// Drops every packet to or from `port`.
    pub fn both(port: u16) -> Cut {
        Cut::install(port, &format!("tcp dport {port} drop"), true)
    }

    /// Drops only the server's packets (replies and acknowledgements) from `port`: what the
    /// client sends still arrives.
    pub fn replies(port: u16) -> Cut {
        Cut::install(port, "", true)
    }

    fn install(port: u16, extra: &str, replies: bool) -> Cut {
        let nft = which("nft").unwrap_or_else(|| {
            panic!("nft is not installed; install it with: apt-get install -y nftables")
        });
        let table = format!("writerlock_test_{}_{port}", std::process::id());
        let mut rules = format!(
            "table inet {table} {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n"
        );
        if replies {
            rules.push_str(&format!("  tcp sport {port} drop\n"));
        }
        if !extra.is_empty() {
            rules.push_str(&format!("  {extra}\n"));
        }
        rules.push_str(" }\n}\n");
        let file = tempfile::NamedTempFile::new().expect("nft file");
        std::fs::write(file.path(), rules).expect("write nft rules");
        run_quiet(Command::new(&nft).arg("-f").arg(file.path()), "nft -f");
        // The watchdog: removes the table within two minutes even if this process dies.
        let _ = Command::new("setsid")
            .arg("sh")
            .arg("-c")
            .arg(format!(
                "sleep 120; {} delete table inet {table} 2>/dev/null",
                nft.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        Cut { table }
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        if let Some(nft) = which("nft") {
            let _ = Command::new(nft)
                .args(["delete", "table", "inet", &self.table])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Runs `f` on a thread and waits at most `limit` for it: `None` when it is still running
/// (the thread is left to finish on its own once the fault is removed).
pub fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<(T, Duration)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    thread::spawn(move || {
        let out = f();
        let _ = tx.send((out, started.elapsed()));
    });
    rx.recv_timeout(limit).ok()
}
