//! `writerlock check --site DIR`: the checklist of Exponential's SQLite write queue, worked
//! through automatically for one site.
//!
//! The checklist an administrator otherwise works through by hand:
//!
//! 0. the site's SQLite driver is the queued `eZSQLite3QueuedDB`, not the stock `eZSQLite3DB`;
//! 1. `SQLiteTransactionWait` is below PHP's `max_execution_time`, PHP-FPM's
//!    `request_terminate_timeout` and Velocity's `requestTimeout`, so a waiting request fails
//!    with a clear message instead of being killed;
//! 2. no settings override still sets the old value 60;
//! 3. VACUUM and large imports run in maintenance mode, not from cronjobs while editors work;
//! 4. `grep -c "database is busy" var/log/error.log` is 0 (or explained).
//!
//! It also reports the database's journal mode and whether the lock files are on a local file
//! system. Each item is `pass`, `fail` or `cannot tell`, with the reason and the files it read.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use crate::error::CliError;
use crate::output::{print_json, print_line};
use crate::status::{filesystem, FileSystemStatus, FsKind};

/// The long help of the subcommand.
pub const CHECK_HELP: &str = "\
Works through the checklist of Exponential's SQLite write queue for one site, and prints \
each item with pass, fail or cannot tell, and why:

  queued-driver      [DatabaseSettings] DatabaseImplementation loads the queued driver \
eZSQLite3QueuedDB (the writerlock extension), not Exponential's stock eZSQLite3DB, which has no \
write queue
  transaction-wait   [DatabaseSettings] SQLiteTransactionWait (default 25 s) is below \
PHP's max_execution_time (the pool's php_value or php_admin_value, or the php.ini beside \
pool.d/), PHP-FPM's request_terminate_timeout and Velocity's requestTimeout, so a waiting \
request fails with a clear message instead of being killed
  old-value-60       no settings override still sets SQLiteTransactionWait=60 (the value \
releases before 6.0.15 shipped)
  maintenance        VACUUM and large imports do not run from cronjobs while editors work \
(var/log/cronjob.log): they hold the write lock for their whole run
  busy-log           grep -c \"database is busy\" var/log/error.log is 0
  journal-mode       the database's journal mode (WAL lets readers work while one writes)
  local-filesystem   the lock files are on a local file system: flock() does not exclude \
writers on other machines

It reads settings/site.ini, the site.ini.append.php overrides (settings/override, every \
siteaccess, every extension), the PHP-FPM pool files (/etc/php/*/fpm/pool.d/*.conf, or each \
--fpm-pool FILE), var/log/error.log, var/log/cronjob.log and the database named by \
[DatabaseSettings] Database (under var/storage/sqlite3, or --database FILE). It reads only.

Exit status: 0 when no item fails (pass or cannot tell), 3 when an item fails, 1 when the \
check could not run, 2 on a usage error. When the items say the queue is regularly longer \
than the wait, or writers run on several machines, see the section \"When one machine is not \
enough\" of writerlock's README: the SQLite queue is one machine's tool.";

/// Where the README section for outgrowing one machine is, named in failing items.
pub const BEYOND_ONE_MACHINE: &str =
    "see \"When one machine is not enough\" in writerlock's README: a server database with \
     row-level locking (Exponential's PostgreSQL driver, or the ledger's Postgres writer \
     session) is the path beyond one machine's SQLite queue";

/// The exit status when an item fails.
pub const EXIT_FAILED_ITEM: u8 = 3;

/// The driver's default transaction wait, in seconds: the core's
/// [`writerlock::wait::TRANSACTION_WAIT`].
const DEFAULT_WAIT: f64 = writerlock::wait::TRANSACTION_WAIT.as_secs_f64();

/// The value releases before 6.0.15 shipped.
const OLD_WAIT: f64 = 60.0;

/// Arguments of `writerlock check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The Exponential site's root directory (the one holding settings/ and var/).
    #[arg(long, value_name = "DIR")]
    pub site: PathBuf,
    /// A PHP-FPM pool file to read instead of /etc/php/*/fpm/pool.d/*.conf (repeatable).
    #[arg(long = "fpm-pool", value_name = "FILE")]
    pub fpm_pools: Vec<PathBuf>,
    /// The SQLite database, when [DatabaseSettings] Database does not lead to it.
    #[arg(long, value_name = "FILE")]
    pub database: Option<PathBuf>,
    /// Whether to print JSON: the command line's global `--json`.
    #[arg(skip)]
    pub json: bool,
}

/// The outcome of one checklist item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// The item holds.
    #[serde(rename = "pass")]
    Pass,
    /// The item does not hold: the reason says what to change.
    #[serde(rename = "fail")]
    Fail,
    /// What the item needs could not be found or read.
    #[serde(rename = "cannot tell")]
    CannotTell,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "FAIL",
            Outcome::CannotTell => "cannot tell",
        }
    }
}

/// One checklist item's result.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// The item's name, such as `transaction-wait`.
    pub name: &'static str,
    /// Pass, fail or cannot tell.
    pub result: Outcome,
    /// Why, in one sentence or two.
    pub why: String,
    /// The files the item read.
    pub sources: Vec<String>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The site's root.
    pub site: String,
    /// The items, in checklist order.
    pub items: Vec<Item>,
    /// How many items failed.
    pub failed: usize,
}

/// Runs `writerlock check`.
pub fn run(args: &CheckArgs) -> Result<ExitCode, CliError> {
    let report = check(args)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_report(&report)?;
    }
    Ok(if report.failed > 0 {
        ExitCode::from(EXIT_FAILED_ITEM)
    } else {
        ExitCode::SUCCESS
    })
}

/// Works through every item.
pub fn check(args: &CheckArgs) -> Result<Report, CliError> {
    let site = &args.site;
    if !site.is_dir() {
        return Err(CliError::InvalidArgument {
            name: "--site",
            reason: format!(
                "{} is not a directory: give the Exponential site's root (the directory \
                 holding settings/ and var/)",
                site.display()
            ),
        });
    }
    if !site.join("settings").is_dir() {
        return Err(CliError::InvalidArgument {
            name: "--site",
            reason: format!(
                "{} has no settings/ directory: give the Exponential site's root",
                site.display()
            ),
        });
    }
    let settings = Settings::read(site);
    let items = vec![
        queued_driver(&settings),
        transaction_wait(site, &settings, &args.fpm_pools),
        old_value(&settings),
        maintenance(site),
        busy_log(site),
        journal_mode(site, &settings, args.database.as_deref()),
        local_filesystem(site, &settings, args.database.as_deref()),
    ];
    let failed = items.iter().filter(|i| i.result == Outcome::Fail).count();
    Ok(Report {
        site: site.display().to_string(),
        items,
        failed,
    })
}

/// One `Key=Value` line of a settings file, with where it came from.
#[derive(Debug, Clone)]
struct Setting {
    file: PathBuf,
    line: usize,
    section: String,
    key: String,
    value: String,
}

impl Setting {
    fn place(&self, site: &Path) -> String {
        format!("{}:{}", relative(site, &self.file), self.line)
    }
}

/// The site's `site.ini` settings: the defaults and every override, in the order Exponential
/// applies them (defaults, extensions, siteaccesses, the global override).
#[derive(Debug, Default)]
struct Settings {
    site: PathBuf,
    defaults: Vec<Setting>,
    extensions: Vec<Setting>,
    siteaccesses: Vec<Setting>,
    overrides: Vec<Setting>,
    /// Every settings file read, for the report.
    files: Vec<PathBuf>,
    /// Every `requestTimeout` found in any settings file (Velocity's worker timeout).
    request_timeouts: Vec<Setting>,
    /// Settings files that exist but could not be read, with why: what they set is unknown.
    unreadable: Vec<String>,
}

impl Settings {
    fn read(site: &Path) -> Settings {
        let mut settings = Settings {
            site: site.to_path_buf(),
            ..Settings::default()
        };
        let s = site.join("settings");
        settings.defaults = settings.read_file(&s.join("site.ini"));
        for dir in sorted_dirs(&site.join("extension")) {
            for name in ["site.ini.append.php", "site.ini.append", "site.ini"] {
                let found = settings.read_file(&dir.join("settings").join(name));
                settings.extensions.extend(found);
            }
        }
        for dir in sorted_dirs(&s.join("siteaccess")) {
            for name in ["site.ini.append.php", "site.ini.append"] {
                let found = settings.read_file(&dir.join(name));
                settings.siteaccesses.extend(found);
            }
        }
        for name in ["site.ini.append.php", "site.ini.append"] {
            let found = settings.read_file(&s.join("override").join(name));
            settings.overrides.extend(found);
        }
        // Velocity's worker timeout, wherever the site sets it.
        let mut other = Vec::new();
        collect_ini_files(&s, &mut other);
        for dir in sorted_dirs(&site.join("extension")) {
            collect_ini_files(&dir.join("settings"), &mut other);
        }
        for file in other {
            // A file that cannot be read is already in `unreadable` when it is a site.ini.
            if let Ok(Some(text)) = read_settings_text(&file) {
                settings.request_timeouts.extend(
                    parse_ini(&file, &text)
                        .into_iter()
                        .filter(|s| s.key.eq_ignore_ascii_case("requestTimeout")),
                );
            }
        }
        settings
    }

    fn read_file(&mut self, file: &Path) -> Vec<Setting> {
        match read_settings_text(file) {
            Ok(Some(text)) => {
                self.files.push(file.to_path_buf());
                parse_ini(file, &text)
            }
            Ok(None) => Vec::new(),
            Err(e) => {
                self.unreadable.push(format!(
                    "{} could not be read: {e}",
                    relative(&self.site, file)
                ));
                Vec::new()
            }
        }
    }

    /// Every line that sets `[DatabaseSettings] key`, defaults first.
    fn all(&self, key: &str) -> Vec<&Setting> {
        self.defaults
            .iter()
            .chain(&self.extensions)
            .chain(&self.siteaccesses)
            .chain(&self.overrides)
            .filter(|s| s.section == "DatabaseSettings" && s.key == key)
            .collect()
    }

    /// The values `[DatabaseSettings] key` takes for some request: the global override wins
    /// everywhere; otherwise each siteaccess's value, or the extensions' or defaults' last.
    fn effective(&self, key: &str) -> Vec<&Setting> {
        fn pick<'a>(list: &'a [Setting], key: &str) -> Vec<&'a Setting> {
            list.iter()
                .filter(|s| s.section == "DatabaseSettings" && s.key == key)
                .collect()
        }
        if let Some(last) = pick(&self.overrides, key).pop() {
            return vec![last];
        }
        let mut values = pick(&self.siteaccesses, key);
        let base = pick(&self.extensions, key)
            .pop()
            .or_else(|| pick(&self.defaults, key).pop());
        values.extend(base);
        values
    }

    fn sources(&self) -> Vec<String> {
        self.files.iter().map(|f| relative(&self.site, f)).collect()
    }

    /// `[ExtensionSettings] ActiveExtensions[]` and `ActiveAccessExtensions[]`, from every
    /// settings file read (they add up).
    fn active_extensions(&self) -> Vec<String> {
        self.defaults
            .iter()
            .chain(&self.extensions)
            .chain(&self.siteaccesses)
            .chain(&self.overrides)
            .filter(|s| {
                s.section == "ExtensionSettings"
                    && (s.key == "ActiveExtensions" || s.key == "ActiveAccessExtensions")
            })
            .map(|s| s.value.clone())
            .collect()
    }
}

/// The text of a settings file, or `None` when there is none. Exponential's settings files
/// may be in another charset than UTF-8 (`#?ini charset="iso-8859-1"?`): their keys and the
/// values read here are ASCII, so other bytes are replaced rather than the file refused.
fn read_settings_text(file: &Path) -> std::io::Result<Option<String>> {
    match fs::read(file) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Parses an Exponential INI file: `[Section]`, `Key=Value`, `Key[]=Value`; `#` and `;`
/// comments; the `<?php /* ... */ ?>` wrapper of `.append.php` files.
fn parse_ini(file: &Path, text: &str) -> Vec<Setting> {
    let mut section = String::new();
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty()
            || line.starts_with('#')
            || line.starts_with(';')
            || line.starts_with("<?php")
            || line.starts_with("*/")
            || line.starts_with("?>")
        {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            out.push(Setting {
                file: file.to_path_buf(),
                line: i + 1,
                section: section.clone(),
                key: key.trim().trim_end_matches("[]").to_string(),
                value: value.trim().trim_matches('"').to_string(),
            });
        }
    }
    out
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Every `*.ini`, `*.ini.append` and `*.ini.append.php` under `dir`, at most
/// [`INI_DEPTH`] directories down (`settings/siteaccess/NAME/`), without following
/// symbolic links to directories: a site tree is not trusted to be free of link loops.
fn collect_ini_files(dir: &Path, out: &mut Vec<PathBuf>) {
    collect_ini_files_at(dir, INI_DEPTH, out);
}

/// How many directory levels below `settings/` hold settings files.
const INI_DEPTH: usize = 2;

fn collect_ini_files_at(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if out.len() >= 10_000 {
            return;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if depth > 0 {
                collect_ini_files_at(&path, depth - 1, out);
            }
        } else if name.ends_with(".ini")
            || name.ends_with(".ini.append")
            || name.ends_with(".ini.append.php")
        {
            out.push(path);
        }
    }
}

fn relative(site: &Path, file: &Path) -> String {
    file.strip_prefix(site)
        .unwrap_or(file)
        .display()
        .to_string()
}

/// Seconds from a settings value; below 1 raised to 1 as the driver does.
fn wait_seconds(value: &str) -> Option<f64> {
    let v: f64 = value.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v.max(1.0))
}

/// PHP-FPM's time syntax: a number with an optional s, m, h or d suffix.
fn fpm_seconds(value: &str) -> Option<f64> {
    let value = value.trim().trim_matches('"').trim_matches('\'');
    let (number, unit) = match value.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&value[..i], c.to_ascii_lowercase()),
        _ => (value, 's'),
    };
    let n: f64 = number.trim().parse().ok()?;
    let factor = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86_400.0,
        _ => return None,
    };
    (n.is_finite() && n >= 0.0).then_some(n * factor)
}

/// A limit some request runs under, with where it is set.
struct Limit {
    what: String,
    seconds: f64,
    place: String,
}

fn fpm_pool_files(given: &[PathBuf]) -> Vec<PathBuf> {
    if !given.is_empty() {
        return given.to_vec();
    }
    let mut files = Vec::new();
    for php in sorted_dirs(Path::new("/etc/php")) {
        let pool_d = php.join("fpm").join("pool.d");
        if let Ok(entries) = fs::read_dir(&pool_d) {
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "conf"))
                .collect();
            found.sort();
            files.extend(found);
        }
    }
    files
}

fn transaction_wait(site: &Path, settings: &Settings, pools: &[PathBuf]) -> Item {
    let name = "transaction-wait";
    let mut sources = settings.sources();
    let set = settings.effective("SQLiteTransactionWait");
    let mut waits: Vec<(f64, String)> = Vec::new();
    for s in &set {
        match wait_seconds(&s.value) {
            Some(v) => waits.push((v, format!("{} at {}", s.value, s.place(site)))),
            None => {
                return Item {
                    name,
                    result: Outcome::Fail,
                    why: format!(
                        "SQLiteTransactionWait={} at {} is not a number of seconds: the driver \
                         cannot use it; set a whole number such as 25",
                        s.value,
                        s.place(site)
                    ),
                    sources,
                }
            }
        }
    }
    if waits.is_empty() {
        waits.push((
            DEFAULT_WAIT,
            format!("{DEFAULT_WAIT} (the driver's default; no setting found)"),
        ));
    }
    let (wait, wait_from) =
        waits
            .iter()
            .cloned()
            .fold((0.0, String::new()), |a, b| if b.0 > a.0 { b } else { a });

    let mut limits: Vec<Limit> = Vec::new();
    let mut unreadable = Vec::new();
    let pool_files = fpm_pool_files(pools);
    for file in &pool_files {
        sources.push(file.display().to_string());
        let text = match fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                unreadable.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        let mut pool = String::from("pool");
        let mut timeout: Option<Setting> = None;
        let mut execution: Option<Setting> = None;
        for s in parse_ini(file, &text) {
            if s.key == "request_terminate_timeout" {
                pool.clone_from(&s.section);
                timeout = Some(s);
            } else if s.key == "php_value[max_execution_time]"
                || s.key == "php_admin_value[max_execution_time]"
            {
                pool.clone_from(&s.section);
                execution = Some(s);
            }
        }
        // PHP's own limit: the pool's php_value / php_admin_value, else the php.ini of the
        // PHP-FPM the pool belongs to (/etc/php/8.2/fpm/php.ini beside pool.d/).
        let execution = match execution {
            Some(s) => Some((format!("PHP-FPM pool [{pool}] {}", s.key), s)),
            None => fpm_php_ini(file, &mut sources, &mut unreadable)
                .map(|s| (format!("{} max_execution_time", s.file.display()), s)),
        };
        if let Some((what, s)) = execution {
            match wait_limit(&s.value) {
                Some(0.0) => {}
                Some(seconds) => limits.push(Limit {
                    what,
                    seconds,
                    place: format!("{}:{}", s.file.display(), s.line),
                }),
                None => unreadable.push(format!(
                    "{}:{}: max_execution_time = {} is not a number of seconds",
                    s.file.display(),
                    s.line,
                    s.value
                )),
            }
        }
        // Unset or 0: PHP-FPM never ends a request; the wait is the only limit.
        if let Some(s) = timeout {
            match fpm_seconds(&s.value) {
                Some(0.0) => {}
                Some(seconds) => limits.push(Limit {
                    what: format!("PHP-FPM pool [{pool}] request_terminate_timeout"),
                    seconds,
                    place: format!("{}:{}", file.display(), s.line),
                }),
                None => unreadable.push(format!(
                    "{}:{}: request_terminate_timeout = {} is not a time",
                    file.display(),
                    s.line,
                    s.value
                )),
            }
        }
    }
    for s in &settings.request_timeouts {
        match fpm_seconds(&s.value) {
            Some(seconds) if seconds > 0.0 => limits.push(Limit {
                what: format!("Velocity's [{}] requestTimeout", s.section),
                seconds,
                place: s.place(site),
            }),
            Some(_) => {}
            None => unreadable.push(format!(
                "{}: requestTimeout={} is not a number of seconds",
                s.place(site),
                s.value
            )),
        }
    }
    // A settings file that could not be read may set the wait or a worker's timeout.
    unreadable.extend(settings.unreadable.iter().cloned());
    let too_short: Vec<&Limit> = limits.iter().filter(|l| l.seconds <= wait).collect();
    if !too_short.is_empty() {
        let list: Vec<String> = too_short
            .iter()
            .map(|l| format!("{} = {} s ({})", l.what, trim(l.seconds), l.place))
            .collect();
        return Item {
            name,
            result: Outcome::Fail,
            why: format!(
                "SQLiteTransactionWait is {} s ({wait_from}), not below {}: a request waiting \
                 for its turn is ended by that limit before the queue can fail it with a clear \
                 message; lower SQLiteTransactionWait, or raise the limit, keeping the wait a \
                 few seconds below it",
                trim(wait),
                list.join(", ")
            ),
            sources,
        };
    }
    if !unreadable.is_empty() {
        return Item {
            name,
            result: Outcome::CannotTell,
            why: format!(
                "SQLiteTransactionWait is {} s ({wait_from}), but a setting or a timeout could \
                 not be read: {}",
                trim(wait),
                unreadable.join("; ")
            ),
            sources,
        };
    }
    if pool_files.is_empty() && settings.request_timeouts.is_empty() {
        return Item {
            name,
            result: Outcome::CannotTell,
            why: format!(
                "SQLiteTransactionWait is {} s ({wait_from}), but no PHP-FPM pool file \
                 (/etc/php/*/fpm/pool.d/*.conf) and no requestTimeout in the site's settings \
                 were found to compare it with: pass --fpm-pool FILE",
                trim(wait)
            ),
            sources,
        };
    }
    let below = if limits.is_empty() {
        let pools: Vec<String> = pool_files.iter().map(|p| p.display().to_string()).collect();
        format!(
            "and no PHP-FPM pool ({}) or Velocity worker sets a request timeout, so the wait \
             is the only limit",
            if pools.is_empty() {
                "none found".to_string()
            } else {
                pools.join(", ")
            }
        )
    } else {
        let list: Vec<String> = limits
            .iter()
            .map(|l| format!("{} = {} s", l.what, trim(l.seconds)))
            .collect();
        format!("and below {}", list.join(", "))
    };
    Item {
        name,
        result: Outcome::Pass,
        why: format!(
            "SQLiteTransactionWait is {} s ({wait_from}) {below}",
            trim(wait)
        ),
        sources,
    }
}

fn old_value(settings: &Settings) -> Item {
    let site = &settings.site;
    let old: Vec<String> = settings
        .all("SQLiteTransactionWait")
        .into_iter()
        .filter(|s| s.value.trim().parse::<f64>() == Ok(OLD_WAIT))
        .map(|s| s.place(site))
        .collect();
    let sources = settings.sources();
    if settings.files.is_empty() {
        return Item {
            name: "old-value-60",
            result: Outcome::CannotTell,
            why: "no site.ini or site.ini.append.php was found under settings/".into(),
            sources,
        };
    }
    if old.is_empty() && !settings.unreadable.is_empty() {
        return Item {
            name: "old-value-60",
            result: Outcome::CannotTell,
            why: format!(
                "no settings file read sets SQLiteTransactionWait=60, but {}: check it for the \
                 old value",
                settings.unreadable.join("; ")
            ),
            sources,
        };
    }
    if old.is_empty() {
        Item {
            name: "old-value-60",
            result: Outcome::Pass,
            why: format!(
                "no override sets SQLiteTransactionWait=60 ({} settings files read)",
                settings.files.len()
            ),
            sources,
        }
    } else {
        Item {
            name: "old-value-60",
            result: Outcome::Fail,
            why: format!(
                "SQLiteTransactionWait=60, the value releases before 6.0.15 shipped, is still \
                 set at {}: lower it to {DEFAULT_WAIT} (or remove the line), keeping it below \
                 the request timeout",
                old.join(", ")
            ),
            sources,
        }
    }
}

/// Calls `each` with every line of `path` (numbered from 1, invalid UTF-8 replaced), read a
/// line at a time so a log of gigabytes is not loaded whole; returns the number of lines.
fn scan_lines(path: &Path, mut each: impl FnMut(usize, &str)) -> std::io::Result<usize> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(fs::File::open(path)?);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(n);
        }
        n += 1;
        each(
            n,
            String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']),
        );
    }
}

/// Words that mark a VACUUM or a large import in a cron log line.
fn heavy_job(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.contains("vacuum") || lower.contains("import")
}

fn maintenance(site: &Path) -> Item {
    let name = "maintenance";
    let log = site.join("var/log/cronjob.log");
    let sources = vec![relative(site, &log)];
    // The first few places, and how many in all.
    let mut heavy: Vec<String> = Vec::new();
    let mut heavy_count = 0usize;
    let scanned = scan_lines(&log, |n, line| {
        if heavy_job(line) {
            heavy_count += 1;
            if heavy.len() < 5 {
                heavy.push(format!("{}:{n}", relative(site, &log)));
            }
        }
    });
    let lines = match scanned {
        Ok(lines) => lines,
        Err(e) => {
            return Item {
                name,
                result: Outcome::CannotTell,
                why: format!(
                    "{} could not be read ({e}): nothing shows whether a VACUUM or an import \
                     ran from a cronjob; check that they run only in maintenance mode",
                    relative(site, &log)
                ),
                sources,
            }
        }
    };
    if heavy.is_empty() {
        Item {
            name,
            result: Outcome::Pass,
            why: format!(
                "the cron log ({lines} lines) shows no VACUUM and no import run from a cronjob"
            ),
            sources,
        }
    } else {
        let shown: Vec<&str> = heavy.iter().take(5).map(String::as_str).collect();
        Item {
            name,
            result: Outcome::Fail,
            why: format!(
                "a VACUUM or an import ran from a cronjob while the site was open ({}{}): it \
                 holds the write lock for its whole run and every editor's save waits behind \
                 it; run it in maintenance mode",
                shown.join(", "),
                if heavy_count > shown.len() {
                    format!(" and {} more", heavy_count - shown.len())
                } else {
                    String::new()
                }
            ),
            sources,
        }
    }
}

fn busy_log(site: &Path) -> Item {
    let name = "busy-log";
    let log = site.join("var/log/error.log");
    let sources = vec![relative(site, &log)];
    // Line numbers of the busy lines; how many were transactions that waited their whole
    // limit, and single statements that waited their busy timeout.
    let mut busy: Vec<usize> = Vec::new();
    let mut whole_wait = 0usize;
    let mut statements = 0usize;
    let scanned = scan_lines(&log, |n, line| {
        if line.contains("database is busy") {
            busy.push(n);
            if line.contains("another write held the lock all that time") {
                whole_wait += 1;
            } else if line.contains("the statement waited") {
                statements += 1;
            }
        }
    });
    match scanned {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Item {
                name,
                result: Outcome::CannotTell,
                why: format!(
                    "{} does not exist: the site logs elsewhere (a [FileSettings] VarDir of its \
                     own) or has logged nothing yet; run grep -c \"database is busy\" on the \
                     error.log it writes",
                    relative(site, &log)
                ),
                sources,
            }
        }
        Err(e) => {
            return Item {
                name,
                result: Outcome::CannotTell,
                why: format!("{} could not be read: {e}", relative(site, &log)),
                sources,
            }
        }
    }
    if busy.is_empty() {
        return Item {
            name,
            result: Outcome::Pass,
            why: format!("grep -c \"database is busy\" {} is 0", relative(site, &log)),
            sources,
        };
    }
    Item {
        name,
        result: Outcome::Fail,
        why: busy_findings(&relative(site, &log), &busy, whole_wait, statements),
        sources,
    }
}

/// The site's database file: `--database`, or `[DatabaseSettings] Database` under
/// `var/storage/sqlite3/` (as given, or with `.db`), or the only `*.db` there.
fn database_file(
    site: &Path,
    settings: &Settings,
    given: Option<&Path>,
) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return Ok(path.to_path_buf());
    }
    let dir = site.join("var/storage/sqlite3");
    let named = settings.effective("Database");
    let mut tried = Vec::new();
    for s in named.iter().rev() {
        let value = Path::new(&s.value);
        let candidates = if value.is_absolute() {
            vec![value.to_path_buf()]
        } else {
            vec![dir.join(value), dir.join(format!("{}.db", s.value))]
        };
        for c in candidates {
            if c.is_file() {
                return Ok(c);
            }
            tried.push(relative(site, &c));
        }
    }
    let found: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|e| {
            e.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "db") && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    match found.as_slice() {
        [one] if tried.is_empty() => Ok(one.clone()),
        _ => Err(if tried.is_empty() {
            format!(
                "no [DatabaseSettings] Database setting and not exactly one *.db in {}: pass \
                 --database FILE",
                relative(site, &dir)
            )
        } else {
            format!(
                "the database named by [DatabaseSettings] Database is not at {}: pass \
                 --database FILE",
                tried.join(" or ")
            )
        }),
    }
}

fn journal_mode(site: &Path, settings: &Settings, given: Option<&Path>) -> Item {
    let name = "journal-mode";
    let db = match database_file(site, settings, given) {
        Ok(db) => db,
        Err(why) => {
            return Item {
                name,
                result: Outcome::CannotTell,
                why,
                sources: settings.sources(),
            }
        }
    };
    let sources = vec![relative(site, &db)];
    let mode = rusqlite::Connection::open_with_flags(
        &db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|conn| {
        conn.busy_timeout(std::time::Duration::from_millis(200))?;
        conn.query_row("PRAGMA journal_mode", [], |row| row.get::<_, String>(0))
    });
    match mode {
        Ok(mode) => {
            let mode = mode.to_ascii_lowercase();
            let (result, why) = match mode.as_str() {
                "wal" => (
                    Outcome::Pass,
                    "journal mode wal: readers keep working while one writer holds the lock"
                        .to_string(),
                ),
                "delete" | "truncate" | "persist" => (
                    Outcome::Pass,
                    format!(
                        "journal mode {mode} (a rollback journal): correct with the queue, but \
                         readers wait while a transaction commits; PRAGMA journal_mode=WAL \
                         lets them read during writes"
                    ),
                ),
                other => (
                    Outcome::Fail,
                    format!(
                        "journal mode {other}: a crash in the middle of a transaction can \
                         corrupt the database; use PRAGMA journal_mode=WAL"
                    ),
                ),
            };
            Item {
                name,
                result,
                why: format!("{}: {why}", relative(site, &db)),
                sources,
            }
        }
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) => Item {
            name,
            result: Outcome::Fail,
            why: format!(
                "{} is not a SQLite database ({e}): the file the site's settings name is \
                 damaged or is something else; restore it from a backup",
                relative(site, &db)
            ),
            sources,
        },
        Err(e) => Item {
            name,
            result: Outcome::CannotTell,
            why: format!(
                "{} could not be read as a SQLite database: {e}",
                relative(site, &db)
            ),
            sources,
        },
    }
}

fn local_filesystem(site: &Path, settings: &Settings, given: Option<&Path>) -> Item {
    // The lock files sit beside the database; without it, its directory.
    let target =
        database_file(site, settings, given).unwrap_or_else(|_| site.join("var/storage/sqlite3"));
    let target = if target.exists() {
        target
    } else {
        site.to_path_buf()
    };
    let shown = match relative(site, &target) {
        r if r.is_empty() => site.display().to_string(),
        r => r,
    };
    filesystem_item(shown, filesystem(&target))
}

/// The `local-filesystem` item for the file system `shown` is on.
fn filesystem_item(shown: String, fs: FileSystemStatus) -> Item {
    let name = "local-filesystem";
    let sources = vec![shown.clone()];
    match fs.kind {
        FsKind::Local => Item {
            name,
            result: Outcome::Pass,
            why: format!(
                "{shown} is on a local file system ({}): flock() excludes every writer on this \
                 machine",
                fs.name
            ),
            sources,
        },
        FsKind::Network => Item {
            name,
            result: Outcome::Fail,
            why: format!(
                "{shown} is on a network file system ({}): flock() does not exclude writers \
                 on other machines, so the queue cannot keep them in turn; keep the database \
                 on a local disk of the one machine that writes it, or {BEYOND_ONE_MACHINE}",
                fs.name
            ),
            sources,
        },
        FsKind::Fuse | FsKind::Unknown => Item {
            name,
            result: Outcome::CannotTell,
            why: format!(
                "{shown} is on {} ({}): whether flock() excludes every writer there is not \
                 known; the queue is only known to be correct on a local disk",
                if fs.kind == FsKind::Fuse {
                    "a FUSE file system"
                } else {
                    "a file system writerlock does not know"
                },
                if fs.magic.is_empty() {
                    fs.name
                } else {
                    fs.magic
                }
            ),
            sources,
        },
    }
}

/// What the busy lines of the error log say, in words that agree with their own counts:
/// `busy` holds their line numbers, `whole_wait` how many were transactions that waited their
/// whole limit, `statements` how many were single statements that waited their busy timeout.
fn busy_findings(log: &str, busy: &[usize], whole_wait: usize, statements: usize) -> String {
    let n = busy.len();
    let lines = match busy {
        [one] => format!("line {one}"),
        [first, .., last] => format!("lines {first} to {last}"),
        [] => "no line".to_string(),
    };
    let count = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let mut kinds = Vec::new();
    if whole_wait > 0 {
        kinds.push(count(
            whole_wait,
            "transaction waited its whole limit while one write held the lock all that time",
            "transactions waited their whole limit while one write held the lock all that time",
        ));
    }
    if statements > 0 {
        kinds.push(count(
            statements,
            "single statement waited its whole busy timeout for another write to end",
            "single statements waited their whole busy timeout for another write to end",
        ));
    }
    let others = n - whole_wait - statements;
    if others > 0 {
        kinds.push(count(
            others,
            "other line says the database was busy",
            "other lines say the database was busy",
        ));
    }
    format!(
        "grep -c \"database is busy\" {log} is {n} ({lines}): {}. Look at what ran then in \
         {log} and the cron log (a VACUUM, a large import, a script or a sqlite3 shell left \
         inside BEGIN). Raising SQLiteTransactionWait helps only when the holder was \
         legitimately long; if the queue is regularly longer than the wait during normal \
         editing, {BEYOND_ONE_MACHINE}",
        kinds.join("; ")
    )
}

/// PHP's `max_execution_time` from the php.ini of the PHP-FPM a pool file belongs to
/// (`/etc/php/8.2/fpm/php.ini` for `/etc/php/8.2/fpm/pool.d/www.conf`), when there is one.
fn fpm_php_ini(
    pool: &Path,
    sources: &mut Vec<String>,
    unreadable: &mut Vec<String>,
) -> Option<Setting> {
    let dir = pool.parent()?;
    if dir.file_name()? != "pool.d" {
        return None;
    }
    let ini = dir.parent()?.join("php.ini");
    match read_settings_text(&ini) {
        Ok(Some(text)) => {
            sources.push(ini.display().to_string());
            parse_ini(&ini, &text)
                .into_iter()
                .rfind(|s| s.key == "max_execution_time")
        }
        Ok(None) => None,
        Err(e) => {
            unreadable.push(format!("{}: {e}", ini.display()));
            None
        }
    }
}

/// Seconds of a PHP limit such as `max_execution_time` (a whole number; 0 is no limit).
fn wait_limit(value: &str) -> Option<f64> {
    let v: f64 = value.trim().trim_matches('"').parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// The class Exponential's queued driver is (`extension/writerlock` sets it as the alias).
const QUEUED_DRIVER: &str = "eZSQLite3QueuedDB";

/// Whether `[DatabaseSettings] DatabaseImplementation` loads the queued driver: through an
/// `ImplementationAlias[...]` naming `eZSQLite3QueuedDB`, set in the site's own settings or
/// by an extension the site activates (`[ExtensionSettings] ActiveExtensions[]`).
fn queued_driver(settings: &Settings) -> Item {
    let name = "queued-driver";
    let site = &settings.site;
    let sources = settings.sources();
    let Some(implementation) = settings.effective("DatabaseImplementation").pop() else {
        return Item {
            name,
            result: Outcome::CannotTell,
            why: "no settings file read sets [DatabaseSettings] DatabaseImplementation: which \
                  driver the site loads is not known"
                .into(),
            sources,
        };
    };
    let chosen = implementation.value.to_ascii_lowercase();
    let alias = settings
        .effective(&format!("ImplementationAlias[{}]", implementation.value))
        .pop()
        .filter(|a| a.value.eq_ignore_ascii_case(QUEUED_DRIVER));
    let setup = "install writerlock.so, copy the queued driver's folder to extension/writerlock, \
                 add [ExtensionSettings] ActiveExtensions[]=writerlock and \
                 DatabaseImplementation=sqlite3 to settings/override/site.ini.append.php, and run \
                 php bin/php/ezpgenerateautoloads.php --extension";
    let Some(alias) = alias else {
        let why = if chosen.contains("sqlite") {
            format!(
                "DatabaseImplementation={} at {} loads Exponential's stock eZSQLite3DB: writers \
                 are not queued, and a transaction that reads and then writes fails with \
                 \"database is locked\"; {setup}",
                implementation.value,
                implementation.place(site)
            )
        } else {
            format!(
                "DatabaseImplementation={} at {} is not Exponential's SQLite driver: the queue's \
                 checklist is for sites on SQLite; for SQLite, {setup}",
                implementation.value,
                implementation.place(site)
            )
        };
        return Item {
            name,
            result: Outcome::Fail,
            why,
            sources,
        };
    };
    // An alias from an extension's settings counts only while the extension is active.
    if let Some(extension) = extension_of(site, &alias.file) {
        let active = settings.active_extensions();
        if !active.iter().any(|a| a == &extension) {
            return Item {
                name,
                result: Outcome::Fail,
                why: format!(
                    "ImplementationAlias[{}]={} at {} belongs to extension/{extension}, which \
                     the site does not activate: the stock eZSQLite3DB is loaded; add \
                     [ExtensionSettings] ActiveExtensions[]={extension} to \
                     settings/override/site.ini.append.php",
                    implementation.value,
                    alias.value,
                    alias.place(site)
                ),
                sources,
            };
        }
    }
    Item {
        name,
        result: Outcome::Pass,
        why: format!(
            "DatabaseImplementation={} loads the queued driver ({} at {})",
            implementation.value,
            alias.value,
            alias.place(site)
        ),
        sources,
    }
}

/// The extension a settings file belongs to (`extension/NAME/settings/...`), if any.
fn extension_of(site: &Path, file: &Path) -> Option<String> {
    let rest = file.strip_prefix(site.join("extension")).ok()?;
    rest.components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
}

fn trim(seconds: f64) -> String {
    if seconds.fract() == 0.0 {
        format!("{seconds:.0}")
    } else {
        format!("{seconds:.1}")
    }
}

fn print_report(report: &Report) -> Result<(), CliError> {
    let mut out = format!("checklist for {}\n", report.site);
    let width = report.items.iter().map(|i| i.name.len()).max().unwrap_or(0);
    for item in &report.items {
        out.push_str(&format!(
            "{:<width$}  {:<11}  {}\n",
            item.name,
            item.result.label(),
            item.why
        ));
    }
    out.push_str(&match report.failed {
        0 => "no item failed".to_string(),
        1 => "1 item failed".to_string(),
        n => format!("{n} items failed"),
    });
    print_line(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use writerlock::filesystem::classify;

    /// A network file system cannot be mounted in a test; the item's decision is checked on
    /// the classification `writerlock status` uses for it.
    #[test]
    fn a_network_file_system_fails_and_points_beyond_one_machine() {
        for (magic, expected) in [
            (0x6969, Outcome::Fail),
            (0xFF53_4D42, Outcome::Fail),
            (0xEF53, Outcome::Pass),
            (0x6573_5546, Outcome::CannotTell),
        ] {
            let (name, kind) = classify(magic);
            let fs = FileSystemStatus {
                name: name.to_string(),
                magic: format!("0x{magic:x}"),
                kind,
                warning: None,
            };
            let item = filesystem_item("var/storage/sqlite3/site.db".into(), fs);
            assert_eq!(item.result, expected, "{name}: {}", item.why);
            if expected == Outcome::Fail {
                assert!(
                    item.why.contains("When one machine is not enough"),
                    "{}",
                    item.why
                );
            }
        }
    }

    /// The messages quote the core's default as the driver's setting is written: `25`.
    #[test]
    fn the_default_wait_is_quoted_as_a_whole_number() {
        assert_eq!(format!("{DEFAULT_WAIT}"), "25");
        assert_eq!(
            DEFAULT_WAIT,
            writerlock::wait::TRANSACTION_WAIT.as_secs_f64()
        );
    }

    #[test]
    fn fpm_times() {
        assert_eq!(fpm_seconds("30"), Some(30.0));
        assert_eq!(fpm_seconds("30s"), Some(30.0));
        assert_eq!(fpm_seconds("2m"), Some(120.0));
        assert_eq!(fpm_seconds("1h"), Some(3600.0));
        assert_eq!(fpm_seconds("x"), None);
    }

    #[test]
    fn append_php_wrapper_is_skipped() {
        let text = "<?php /* #?ini charset=\"utf-8\"?\n\n[DatabaseSettings]\nSQLiteTransactionWait=60\n*/ ?>\n";
        let parsed = parse_ini(Path::new("x"), text);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].section, "DatabaseSettings");
        assert_eq!(parsed[0].value, "60");
        assert_eq!(parsed[0].line, 4);
    }
}
