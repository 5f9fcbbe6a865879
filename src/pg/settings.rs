//! The constants of the writer session and the [`Settings`] every connection sends.
//!
//! The values are the ledger spec's: a lock wait of 10 seconds asked three times, an idle limit of
//! 15 seconds inside a transaction, a statement limit of 60 seconds, writer version 1 and a
//! required floor of 1, and client TCP keepalives (probe after 30 idle seconds, then every
//! 10 seconds, give up after 3). Beyond the spec the server is also asked to probe the
//! client (`tcp_keepalives_*`) and to give up on unacknowledged data (`tcp_user_timeout`),
//! so the server notices a vanished client and frees its locks.
//!
//! Hosts change these only in code, through the setters of [`Settings`]; nothing here reads
//! the environment.

use std::time::Duration;

use super::error::Error;
use super::value::Value;

/// The writer lock key: `SELECT pg_advisory_xact_lock(1279607879)` (0x4C454447, "LEDG").
pub const WRITER_LOCK: i64 = 0x4C45_4447;

/// How long one wait for the writer lock may last before the server cancels it
/// (`lock_timeout`): 10 seconds.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How many waits for the writer lock a write makes before it gives up: 3.
pub const LOCK_TRIES: u32 = 3;

/// How long a session may sit idle inside an open transaction before the server ends it
/// (`idle_in_transaction_session_timeout`): 15 seconds.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(15);

/// How long one statement may run before the server cancels it (`statement_timeout`):
/// 60 seconds.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// The writer version this code writes as. Version 1 is the first writer that records the
/// rows it changed in `row_changes`. Raise it together with [`REQUIRED`].
pub const VERSION: u16 = 1;

/// The writer floor this code stores at schema setup: the oldest writer version the
/// database allows. Never above [`VERSION`]: that code would refuse its own writes.
pub const REQUIRED: u16 = 1;

/// The highest writer version or floor the refusal lock key can carry
/// (`version * 65536 + floor` must fit a 32-bit object id).
pub const MAX_VERSION: u16 = 32_767;

/// The session setting that carries the writer version: `agentihooks.ledger_writer_version`.
pub const VERSION_SETTING: &str = "agentihooks.ledger_writer_version";

/// Client TCP keepalives are on by default.
pub const KEEPALIVES: bool = true;

/// Client keepalive idle time: the first probe after 30 idle seconds.
pub const KEEPALIVES_IDLE: Duration = Duration::from_secs(30);

/// Client keepalive interval: a probe every 10 seconds after the first.
pub const KEEPALIVES_INTERVAL: Duration = Duration::from_secs(10);

/// Client keepalive count: give up after 3 unanswered probes.
pub const KEEPALIVES_COUNT: u32 = 3;

/// Server-side `tcp_user_timeout` default: 60 seconds (the keepalive idle time plus its
/// probes), after which the server gives up on data the client never acknowledged.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(60);

/// How long opening a connection may take before it fails: 10 seconds. It covers the whole
/// set-up: TCP, TLS, authentication and the settings check.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest time limit a session accepts: 1 ms. Postgres reads a limit of 0 (and a
/// value under 1 ms, which it rounds to 0) as no limit at all.
pub const MIN_LIMIT: Duration = Duration::from_millis(1);

/// The longest time limit a session accepts: 2,147,483,647 ms (about 24.8 days), the
/// largest value Postgres accepts for its time limits.
pub const MAX_LIMIT: Duration = Duration::from_millis(i32::MAX as u64);

/// Checks one time limit: it must lie between [`MIN_LIMIT`] and [`MAX_LIMIT`]. `setting`
/// names it as the host's argument does (`lock_wait`, `idle_in_transaction`,
/// `statement_timeout`, `tcp_user_timeout`, `connect_timeout`).
pub fn check_limit(setting: &'static str, value: Duration) -> Result<(), Error> {
    if value < MIN_LIMIT || value > MAX_LIMIT {
        return Err(Error::LimitOutOfRange {
            setting,
            value,
            min: MIN_LIMIT,
            max: MAX_LIMIT,
        });
    }
    Ok(())
}

/// The startup settings the ledger spec lists (its `SESSION`), as sent by default.
pub const SESSION: &[(&str, &str)] = &[
    ("lock_timeout", "10s"),
    ("idle_in_transaction_session_timeout", "15s"),
    ("statement_timeout", "60s"),
    (VERSION_SETTING, "1"),
];

/// The settings of a writer session: time limits, writer version and floor, and keepalives.
///
/// Build one with [`Settings::new`] (or `Default`), change what the host needs with the
/// setters, and hand it to [`Connection::connect`](super::Connection::connect) or
/// [`Pool::new`](super::Pool::new), which reject settings that fail [`Settings::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    lock_wait: Duration,
    lock_tries: u32,
    idle_in_transaction: Duration,
    statement_timeout: Duration,
    version: u16,
    required: u16,
    keepalives: bool,
    keepalives_idle: Duration,
    keepalives_interval: Duration,
    keepalives_count: u32,
    server_keepalives_idle: Duration,
    server_keepalives_interval: Duration,
    server_keepalives_count: u32,
    tcp_user_timeout: Duration,
    connect_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::new()
    }
}

impl Settings {
    /// The ledger spec's settings: every value at its documented default.
    pub fn new() -> Settings {
        Settings {
            lock_wait: LOCK_WAIT,
            lock_tries: LOCK_TRIES,
            idle_in_transaction: IDLE_IN_TRANSACTION,
            statement_timeout: STATEMENT_TIMEOUT,
            version: VERSION,
            required: REQUIRED,
            keepalives: KEEPALIVES,
            keepalives_idle: KEEPALIVES_IDLE,
            keepalives_interval: KEEPALIVES_INTERVAL,
            keepalives_count: KEEPALIVES_COUNT,
            server_keepalives_idle: KEEPALIVES_IDLE,
            server_keepalives_interval: KEEPALIVES_INTERVAL,
            server_keepalives_count: KEEPALIVES_COUNT,
            tcp_user_timeout: TCP_USER_TIMEOUT,
            connect_timeout: CONNECT_TIMEOUT,
        }
    }

    /// Sets how long one wait for the writer lock may last (`lock_timeout`).
    ///
    /// Defaults to 10 seconds. Sent in whole milliseconds.
    pub fn lock_wait(&mut self, wait: Duration) -> &mut Settings {
        self.lock_wait = wait;
        self
    }

    /// Sets how many waits for the writer lock a write makes before it fails.
    ///
    /// Defaults to 3. Zero counts as one.
    pub fn lock_tries(&mut self, tries: u32) -> &mut Settings {
        self.lock_tries = tries;
        self
    }

    /// Sets how long a session may sit idle in an open transaction before the server ends it
    /// (`idle_in_transaction_session_timeout`).
    ///
    /// Defaults to 15 seconds. Keep it below `lock_wait * lock_tries`, so a waiting writer
    /// outlasts an idle holder.
    pub fn idle_in_transaction(&mut self, limit: Duration) -> &mut Settings {
        self.idle_in_transaction = limit;
        self
    }

    /// Sets how long one statement may run before the server cancels it (`statement_timeout`).
    ///
    /// Defaults to 60 seconds.
    pub fn statement_timeout(&mut self, limit: Duration) -> &mut Settings {
        self.statement_timeout = limit;
        self
    }

    /// Sets the writer version this code writes as
    /// (`agentihooks.ledger_writer_version`).
    ///
    /// Defaults to [`VERSION`] (1). At most [`MAX_VERSION`].
    pub fn version(&mut self, version: u16) -> &mut Settings {
        self.version = version;
        self
    }

    /// Sets the writer floor this code stores at schema setup.
    ///
    /// Defaults to [`REQUIRED`] (1). Must not exceed the version: that code would refuse its
    /// own writes.
    pub fn required(&mut self, required: u16) -> &mut Settings {
        self.required = required;
        self
    }

    /// Turns client TCP keepalives on or off.
    ///
    /// Defaults to on.
    pub fn keepalives(&mut self, on: bool) -> &mut Settings {
        self.keepalives = on;
        self
    }

    /// Sets the client keepalive idle time before the first probe.
    ///
    /// Defaults to 30 seconds. The driver uses whole seconds.
    pub fn keepalives_idle(&mut self, idle: Duration) -> &mut Settings {
        self.keepalives_idle = idle;
        self
    }

    /// Sets the interval between client keepalive probes.
    ///
    /// Defaults to 10 seconds. The driver uses whole seconds.
    pub fn keepalives_interval(&mut self, interval: Duration) -> &mut Settings {
        self.keepalives_interval = interval;
        self
    }

    /// Sets how many unanswered client keepalive probes close the connection.
    ///
    /// Defaults to 3.
    pub fn keepalives_count(&mut self, count: u32) -> &mut Settings {
        self.keepalives_count = count;
        self
    }

    /// Sets the server's keepalive idle time for this session (`tcp_keepalives_idle`).
    ///
    /// Defaults to 30 seconds. Sent in whole seconds; zero leaves the server's default.
    pub fn server_keepalives_idle(&mut self, idle: Duration) -> &mut Settings {
        self.server_keepalives_idle = idle;
        self
    }

    /// Sets the server's keepalive interval for this session (`tcp_keepalives_interval`).
    ///
    /// Defaults to 10 seconds. Sent in whole seconds; zero leaves the server's default.
    pub fn server_keepalives_interval(&mut self, interval: Duration) -> &mut Settings {
        self.server_keepalives_interval = interval;
        self
    }

    /// Sets the server's keepalive probe count for this session (`tcp_keepalives_count`).
    ///
    /// Defaults to 3; zero leaves the server's default.
    pub fn server_keepalives_count(&mut self, count: u32) -> &mut Settings {
        self.server_keepalives_count = count;
        self
    }

    /// Sets the TCP user timeout of this session, on both ends: how long sent data may stay
    /// unacknowledged before the connection is given up. The client sets it on its socket,
    /// so a statement sent into a dead network fails with a lost connection after this
    /// long; the server gets it as `tcp_user_timeout`.
    ///
    /// Defaults to 60 seconds (the keepalive budget: 30 idle seconds and 3 probes 10
    /// seconds apart). Sent in whole milliseconds.
    pub fn tcp_user_timeout(&mut self, timeout: Duration) -> &mut Settings {
        self.tcp_user_timeout = timeout;
        self
    }

    /// Sets how long opening a connection may take: TCP, TLS, authentication and the
    /// settings check together.
    ///
    /// Defaults to 10 seconds.
    pub fn connect_timeout(&mut self, timeout: Duration) -> &mut Settings {
        self.connect_timeout = timeout;
        self
    }

    /// The lock wait (`lock_timeout`).
    pub fn get_lock_wait(&self) -> Duration {
        self.lock_wait
    }

    /// The number of waits for the writer lock (at least one).
    pub fn get_lock_tries(&self) -> u32 {
        self.lock_tries.max(1)
    }

    /// The idle limit inside a transaction.
    pub fn get_idle_in_transaction(&self) -> Duration {
        self.idle_in_transaction
    }

    /// The statement limit.
    pub fn get_statement_timeout(&self) -> Duration {
        self.statement_timeout
    }

    /// The writer version this code writes as.
    pub fn get_version(&self) -> u16 {
        self.version
    }

    /// The floor this code stores at schema setup.
    pub fn get_required(&self) -> u16 {
        self.required
    }

    /// Whether client keepalives are on.
    pub fn get_keepalives(&self) -> bool {
        self.keepalives
    }

    /// The client keepalive idle time.
    pub fn get_keepalives_idle(&self) -> Duration {
        self.keepalives_idle
    }

    /// The client keepalive interval.
    pub fn get_keepalives_interval(&self) -> Duration {
        self.keepalives_interval
    }

    /// The client keepalive probe count.
    pub fn get_keepalives_count(&self) -> u32 {
        self.keepalives_count
    }

    /// The connect timeout.
    pub fn get_connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The TCP user timeout.
    pub fn get_tcp_user_timeout(&self) -> Duration {
        self.tcp_user_timeout
    }

    /// Checks that the settings can work: every time limit between 1 ms and 2,147,483,647
    /// ms (see [`check_limit`]), the required floor not above the version, and both fit the
    /// refusal lock key.
    pub fn validate(&self) -> Result<(), Error> {
        check_limit("lock_wait", self.lock_wait)?;
        check_limit("idle_in_transaction", self.idle_in_transaction)?;
        check_limit("statement_timeout", self.statement_timeout)?;
        check_limit("tcp_user_timeout", self.tcp_user_timeout)?;
        check_limit("connect_timeout", self.connect_timeout)?;
        for value in [self.version, self.required] {
            if value > MAX_VERSION {
                return Err(Error::VersionOutOfRange {
                    value,
                    max: MAX_VERSION,
                });
            }
        }
        if self.required > self.version {
            return Err(Error::RequiredAboveVersion {
                version: self.version,
                required: self.required,
            });
        }
        Ok(())
    }

    /// The server settings this session sends as `-c` startup options, in order, each as
    /// the name, the value sent, and the value `pg_settings.setting` reports in its base
    /// unit once it took effect. `tcp` marks settings the server cannot apply on a Unix
    /// socket.
    pub fn startup_settings(&self) -> Vec<StartupSetting> {
        let mut out = vec![
            StartupSetting::millis("lock_timeout", self.lock_wait, false),
            StartupSetting::millis(
                "idle_in_transaction_session_timeout",
                self.idle_in_transaction,
                false,
            ),
            StartupSetting::millis("statement_timeout", self.statement_timeout, false),
            StartupSetting {
                name: VERSION_SETTING,
                value: self.version.to_string(),
                base: self.version.to_string(),
                tcp: false,
            },
        ];
        if self.server_keepalives_idle.as_secs() > 0 {
            out.push(StartupSetting::seconds(
                "tcp_keepalives_idle",
                self.server_keepalives_idle,
            ));
        }
        if self.server_keepalives_interval.as_secs() > 0 {
            out.push(StartupSetting::seconds(
                "tcp_keepalives_interval",
                self.server_keepalives_interval,
            ));
        }
        if self.server_keepalives_count > 0 {
            out.push(StartupSetting {
                name: "tcp_keepalives_count",
                value: self.server_keepalives_count.to_string(),
                base: self.server_keepalives_count.to_string(),
                tcp: true,
            });
        }
        out.push(StartupSetting::millis(
            "tcp_user_timeout",
            self.tcp_user_timeout,
            true,
        ));
        out
    }

    /// The libpq connection keywords that open a session with these settings through a
    /// driver of the host's own (psycopg, PDO, libpq): `options` (the startup settings),
    /// `keepalives`, `keepalives_idle`, `keepalives_interval`, `keepalives_count` (seconds),
    /// `tcp_user_timeout` (milliseconds, the client side's) and `connect_timeout` (whole
    /// seconds, at least 2 as libpq counts it). The host adds `application_name` (this
    /// crate's connections use
    /// [`default_application_name`](super::connection::default_application_name)).
    pub fn libpq_keywords(&self) -> Vec<(&'static str, String)> {
        vec![
            ("options", self.startup_options()),
            ("keepalives", u8::from(self.keepalives).to_string()),
            (
                "keepalives_idle",
                self.keepalives_idle.as_secs().to_string(),
            ),
            (
                "keepalives_interval",
                self.keepalives_interval.as_secs().to_string(),
            ),
            ("keepalives_count", self.keepalives_count.to_string()),
            (
                "tcp_user_timeout",
                self.tcp_user_timeout.as_millis().to_string(),
            ),
            (
                "connect_timeout",
                self.connect_timeout
                    .as_secs_f64()
                    .ceil()
                    .max(2.0)
                    .to_string(),
            ),
        ]
    }

    /// The libpq `options` string: one `-c name=value` per startup setting, for example
    /// `-c lock_timeout=10s -c idle_in_transaction_session_timeout=15s -c statement_timeout=60s
    /// -c agentihooks.ledger_writer_version=1 ...`.
    pub fn startup_options(&self) -> String {
        self.startup_settings()
            .iter()
            .map(|s| format!("-c {}={}", s.name, s.value))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Whether a startup setting took effect on a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingStatus {
    /// The server reports the value sent.
    InEffect,
    /// The server reports another value: the option was dropped or overridden.
    NotInEffect,
    /// The server cannot apply it on this kind of connection (a `tcp_*` setting on a Unix
    /// socket), so it was not checked.
    NotApplicable,
}

/// One startup setting as sent and as the server reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingCheck {
    /// The setting's name, such as `lock_timeout`.
    pub name: String,
    /// The value sent, such as `10s`.
    pub sent: String,
    /// What `SHOW` prints for it on this session (`None` when the server has no value).
    pub shown: Option<String>,
    /// Whether it took effect.
    pub status: SettingStatus,
}

impl Settings {
    /// The statement that reports how every startup setting stands on a session: the
    /// setting's name, its value in `pg_settings` (in its base unit), what
    /// `current_setting` shows, and whether the session came through a Unix socket. It has
    /// no parameters, so any driver can run it; read its rows with [`Settings::read_checks`].
    pub fn check_sql(&self) -> String {
        let names: Vec<String> = self
            .startup_settings()
            .iter()
            .map(|s| format!("'{}'", s.name))
            .collect();
        format!(
            "SELECT n, (SELECT setting FROM pg_settings WHERE name = n), \
             current_setting(n, true), inet_client_addr() IS NULL \
             FROM unnest(ARRAY[{}]::text[]) WITH ORDINALITY AS t(n, i) ORDER BY i",
            names.join(", ")
        )
    }

    /// Reads the rows of [`Settings::check_sql`]: for every startup setting, the value sent
    /// and whether the server applied it. The writer version is compared as the session
    /// shows it, the rest in their base units; a `tcp_*` setting on a Unix socket is not
    /// applicable. A setting without its row is not in effect.
    pub fn read_checks(&self, rows: &[Vec<Value>]) -> Vec<SettingCheck> {
        let mut out = Vec::new();
        for (i, setting) in self.startup_settings().iter().enumerate() {
            let row = rows.get(i);
            let cell = |n: usize| row.and_then(|r| r.get(n));
            let base = cell(1).and_then(Value::read_text);
            let shown = cell(2).and_then(Value::read_text);
            let local = cell(3).and_then(Value::read_bool).unwrap_or(false);
            let reported = if setting.name == VERSION_SETTING {
                shown.as_deref().map(str::trim).map(str::to_string)
            } else {
                base
            };
            let status = if setting.tcp && local {
                SettingStatus::NotApplicable
            } else if reported.as_deref() == Some(setting.base.as_str()) {
                SettingStatus::InEffect
            } else {
                SettingStatus::NotInEffect
            };
            out.push(SettingCheck {
                name: setting.name.to_string(),
                sent: setting.value.clone(),
                shown,
                status,
            });
        }
        out
    }
}

/// Fails with [`Error::SettingNotInEffect`] naming the first setting of `checks` that is not
/// in effect.
pub fn verify_checks(checks: Vec<SettingCheck>) -> Result<(), Error> {
    for check in checks {
        if check.status == SettingStatus::NotInEffect {
            return Err(Error::SettingNotInEffect {
                setting: check.name,
                expected: check.sent,
                actual: check.shown.unwrap_or_else(|| "unset".to_string()),
            });
        }
    }
    Ok(())
}

/// One server setting a session sends at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupSetting {
    /// The setting's name, such as `lock_timeout`.
    pub name: &'static str,
    /// The value sent, such as `10s`.
    pub value: String,
    /// The value `pg_settings.setting` shows when it took effect, in the setting's base unit
    /// (milliseconds for `lock_timeout`, seconds for `tcp_keepalives_idle`).
    pub base: String,
    /// Whether the server can apply it only on a TCP connection (not on a Unix socket).
    pub tcp: bool,
}

impl StartupSetting {
    fn millis(name: &'static str, value: Duration, tcp: bool) -> StartupSetting {
        StartupSetting {
            name,
            value: guc_duration(value),
            base: value.as_millis().to_string(),
            tcp,
        }
    }

    fn seconds(name: &'static str, value: Duration) -> StartupSetting {
        StartupSetting {
            name,
            value: format!("{}s", value.as_secs()),
            base: value.as_secs().to_string(),
            tcp: true,
        }
    }
}

/// A duration as a Postgres setting value: whole seconds as `10s`, otherwise milliseconds
/// as `1500ms`.
pub(crate) fn guc_duration(value: Duration) -> String {
    let ms = value.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A duration in seconds for messages: `10` for whole seconds, `0.5` otherwise.
pub(crate) fn seconds_text(value: Duration) -> String {
    let ms = value.as_millis();
    if ms % 1000 == 0 {
        (ms / 1000).to_string()
    } else {
        let text = format!("{:.3}", value.as_secs_f64());
        text.trim_end_matches('0').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_ledger_specs() {
        let s = Settings::new();
        assert_eq!(s.get_lock_wait(), Duration::from_secs(10));
        assert_eq!(s.get_lock_tries(), 3);
        assert_eq!(s.get_idle_in_transaction(), Duration::from_secs(15));
        assert_eq!(s.get_statement_timeout(), Duration::from_secs(60));
        assert_eq!((s.get_version(), s.get_required()), (1, 1));
        assert!(s.get_keepalives());
        assert_eq!(s.get_keepalives_idle(), Duration::from_secs(30));
        assert_eq!(s.get_keepalives_interval(), Duration::from_secs(10));
        assert_eq!(s.get_keepalives_count(), 3);
        assert_eq!(WRITER_LOCK, 1_279_607_879);
        assert_eq!(Settings::default(), s);
    }

    #[test]
    fn options_string() {
        assert_eq!(
            Settings::new().startup_options(),
            "-c lock_timeout=10s -c idle_in_transaction_session_timeout=15s \
             -c statement_timeout=60s -c agentihooks.ledger_writer_version=1 \
             -c tcp_keepalives_idle=30s -c tcp_keepalives_interval=10s \
             -c tcp_keepalives_count=3 -c tcp_user_timeout=60s"
        );
        let mut s = Settings::new();
        s.lock_wait(Duration::from_millis(1500))
            .version(4)
            .server_keepalives_idle(Duration::ZERO)
            .server_keepalives_interval(Duration::ZERO)
            .server_keepalives_count(0)
            .tcp_user_timeout(Duration::from_millis(2500));
        assert_eq!(
            s.startup_options(),
            "-c lock_timeout=1500ms -c idle_in_transaction_session_timeout=15s \
             -c statement_timeout=60s -c agentihooks.ledger_writer_version=4 \
             -c tcp_user_timeout=2500ms"
        );
    }

    #[test]
    fn libpq_keywords_carry_the_settings() {
        let kw = Settings::new().libpq_keywords();
        let get = |k: &str| kw.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(
            get("options"),
            Some(Settings::new().startup_options().as_str())
        );
        assert_eq!(get("keepalives"), Some("1"));
        assert_eq!(get("keepalives_idle"), Some("30"));
        assert_eq!(get("keepalives_interval"), Some("10"));
        assert_eq!(get("keepalives_count"), Some("3"));
        assert_eq!(get("tcp_user_timeout"), Some("60000"));
        assert_eq!(get("connect_timeout"), Some("10"));
        assert_eq!(get("application_name"), None);
    }

    #[test]
    fn session_constant_matches_defaults() {
        let sent = Settings::new().startup_settings();
        for (name, value) in SESSION {
            let s = sent.iter().find(|s| s.name == *name);
            assert_eq!(s.map(|s| s.value.as_str()), Some(*value), "{name}");
        }
    }

    #[test]
    fn required_above_version_is_rejected() {
        let mut s = Settings::new();
        s.required(2);
        let err = s.validate().unwrap_err();
        assert!(matches!(
            err,
            Error::RequiredAboveVersion {
                version: 1,
                required: 2
            }
        ));
        assert!(err
            .to_string()
            .contains("that code would refuse its own writes"));
        s.version(2);
        assert!(s.validate().is_ok());
        s.version(MAX_VERSION + 1);
        assert!(matches!(s.validate(), Err(Error::VersionOutOfRange { .. })));
    }

    #[test]
    fn limits_of_zero_under_a_millisecond_or_too_long_are_refused() {
        type Set = fn(&mut Settings, Duration) -> &mut Settings;
        let setters: [(&str, Set); 5] = [
            ("lock_wait", Settings::lock_wait),
            ("idle_in_transaction", Settings::idle_in_transaction),
            ("statement_timeout", Settings::statement_timeout),
            ("tcp_user_timeout", Settings::tcp_user_timeout),
            ("connect_timeout", Settings::connect_timeout),
        ];
        for (name, set) in setters {
            for bad in [
                Duration::ZERO,
                Duration::from_micros(999),
                MAX_LIMIT + Duration::from_millis(1),
            ] {
                let mut s = Settings::new();
                set(&mut s, bad);
                let err = s.validate().unwrap_err();
                assert!(
                    matches!(err, Error::LimitOutOfRange { setting, .. } if setting == name),
                    "{name} {bad:?}: {err}"
                );
                let text = err.to_string();
                assert!(text.starts_with(&format!("{name} is ")), "{text}");
                assert!(
                    text.contains("between 0.001 and 2147483.647 seconds"),
                    "{text}"
                );
            }
            for good in [MIN_LIMIT, Duration::from_millis(1500), MAX_LIMIT] {
                let mut s = Settings::new();
                set(&mut s, good);
                assert!(s.validate().is_ok(), "{name} {good:?}");
            }
        }
        let mut s = Settings::new();
        s.lock_wait(Duration::ZERO);
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("no limit at all"));
    }

    #[test]
    fn seconds_for_messages() {
        assert_eq!(seconds_text(Duration::from_secs(10)), "10");
        assert_eq!(seconds_text(Duration::from_millis(500)), "0.5");
        assert_eq!(seconds_text(Duration::from_millis(1250)), "1.25");
    }
}
