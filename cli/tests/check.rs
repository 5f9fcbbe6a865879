//! `writerlock check --site DIR`: the SQLite queue's checklist against fixture site trees
//! written here (settings, overrides, a PHP-FPM pool, logs and a real SQLite database), one
//! where every item passes and one where every item it can fail fails.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("a parent")).expect("create the directory");
    fs::write(path, text).expect("write the fixture file");
}

/// An `.append.php` override as Exponential writes them.
fn append_php(body: &str) -> String {
    format!("<?php /* #?ini charset=\"utf-8\"?\n\n{body}\n*/ ?>\n")
}

/// A site tree: site.ini, a global override, a siteaccess override, a Velocity setting, a
/// PHP-FPM pool outside the site, both logs and a WAL database named by the settings.
struct Site {
    _dir: TempDir,
    root: PathBuf,
    pool: PathBuf,
}

fn site(override_wait: &str, fpm_timeout: &str, error_log: &str, cron_log: &str) -> Site {
    let dir = TempDir::new("check-site");
    let root = dir.path().join("exponential");
    write(
        &root.join("settings/site.ini"),
        "[DatabaseSettings]\nDatabaseImplementation=ezsqlite3\nDatabase=exponential\n\
         SQLiteTransactionWait=25\nSQLiteBusyTimeout=5000\n",
    );
    write(
        &root.join("settings/override/site.ini.append.php"),
        &append_php(&format!(
            "[DatabaseSettings]\nDatabaseImplementation=sqlite3\n\
             ImplementationAlias[sqlite3]=eZSQLite3QueuedDB\nSQLiteTransactionWait={override_wait}"
        )),
    );
    write(
        &root.join("settings/siteaccess/admin/site.ini.append.php"),
        &append_php("[SiteSettings]\nSiteName=Admin"),
    );
    write(
        &root.join("settings/override/velocity.ini.append.php"),
        &append_php("[WorkerSettings]\nrequestTimeout=45"),
    );
    let pool = dir.path().join("www.conf");
    write(
        &pool,
        &format!(
            "[www]\nuser = www-data\npm = dynamic\nrequest_terminate_timeout = {fpm_timeout}\n"
        ),
    );
    write(&root.join("var/log/error.log"), error_log);
    write(&root.join("var/log/cronjob.log"), cron_log);
    let db = root.join("var/storage/sqlite3/exponential.db");
    fs::create_dir_all(db.parent().expect("parent")).expect("mkdir");
    let conn = rusqlite::Connection::open(&db).expect("open the fixture database");
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        .expect("WAL");
    conn.execute_batch("CREATE TABLE ezcontentobject (id INTEGER PRIMARY KEY)")
        .expect("a table");
    Site {
        _dir: dir,
        root,
        pool,
    }
}

/// Runs `writerlock check --site ROOT --fpm-pool POOL`, with `--json` when asked.
fn check(site: &Site, json: bool) -> std::process::Output {
    let mut args = vec![
        "check",
        "--site",
        site.root.to_str().expect("utf-8"),
        "--fpm-pool",
        site.pool.to_str().expect("utf-8"),
    ];
    if json {
        args.push("--json");
    }
    run(&args)
}

fn check_json(site: &Site) -> (Option<i32>, serde_json::Value) {
    let out = check(site, true);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

fn item<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no item {name} in {report}"))
}

fn result_of(report: &serde_json::Value, name: &str) -> String {
    item(report, name)["result"]
        .as_str()
        .expect("a result")
        .to_string()
}

/// The item's `why`.
fn why(report: &serde_json::Value, name: &str) -> String {
    item(report, name)["why"].as_str().expect("why").to_string()
}

/// Every item of the checklist, in the report's order.
const ITEMS: [&str; 7] = [
    "queued-driver",
    "transaction-wait",
    "old-value-60",
    "maintenance",
    "busy-log",
    "journal-mode",
    "local-filesystem",
];

/// Asserts that each named item has this result.
fn assert_results(report: &serde_json::Value, names: &[&str], expected: &str) {
    for name in names {
        assert_eq!(result_of(report, name), expected, "{name}: {report:#}");
    }
}

const QUIET_ERRORS: &str = "[ Mar 01 2026 10:00:00 ] [127.0.0.1] eZTemplate:\n\
                            unknown template variable 'node'\n";
const QUIET_CRON: &str = "[ Mar 01 2026 03:00:00 ] Running cronjob part: indexcontent\n\
                          [ Mar 01 2026 03:00:02 ] Running cronjob part: unpublish\n";

#[test]
fn a_healthy_site_passes_every_item() {
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    let (code, report) = check_json(&site);
    let names: Vec<&str> = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ITEMS, "every item, in order");
    assert_results(&report, &ITEMS, "pass");
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["failed"], 0);
    let wait = why(&report, "transaction-wait");
    assert!(wait.contains("SQLiteTransactionWait is 20 s"), "{wait}");
    assert!(wait.contains("request_terminate_timeout = 30 s"), "{wait}");
    assert!(wait.contains("requestTimeout = 45 s"), "{wait}");
    assert!(why(&report, "journal-mode").contains("journal mode wal"));

    // The text report: one line per item, and the same outcome.
    let out = check(&site, false);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("transaction-wait"), "{text}");
    assert!(text.ends_with("no item failed\n"), "{text}");
}

#[test]
fn a_site_with_every_problem_fails_each_item_and_exits_3() {
    let busy = "database is busy: the transaction could not start within 60 s (waited 60.0 s, \
                [DatabaseSettings] SQLiteTransactionWait), another write held the lock all \
                that time; nothing was written\n";
    let errors = format!("{QUIET_ERRORS}{busy}{busy}{busy}");
    let cron = format!(
        "{QUIET_CRON}[ Mar 01 2026 03:10:00 ] Running cronjob part: sqlite_vacuum (VACUUM)\n"
    );
    let site = site("60", "30s", &errors, &cron);
    // Still on the stock driver: no alias to the queued one.
    stock_driver(&site, "60");
    // The database file holds something that is not SQLite.
    fs::write(
        site.root.join("var/storage/sqlite3/exponential.db"),
        b"this is not a database, just bytes that fill the header",
    )
    .expect("overwrite");
    let (code, report) = check_json(&site);
    // Every item but local-filesystem, which a fixture on this machine's disk cannot fail
    // (the unit tests of the command fail it from a network file system's magic number).
    assert_results(&report, &ITEMS[..6], "fail");
    assert_eq!(code, Some(3), "a failed item exits 3: {report:#}");
    assert_eq!(report["failed"], 6);
    let why = |name| why(&report, name);
    assert!(
        why("old-value-60").contains("settings/override/site.ini.append.php:5"),
        "{}",
        why("old-value-60")
    );
    assert!(
        why("old-value-60").contains(": lower it to 25 (or remove the line), keeping it below"),
        "{}",
        why("old-value-60")
    );
    assert!(
        why("transaction-wait").contains("60 s"),
        "{}",
        why("transaction-wait")
    );
    assert!(why("busy-log").contains("is 3"), "{}", why("busy-log"));
    assert!(
        why("busy-log").contains("When one machine is not enough"),
        "a busy log points to the README section: {}",
        why("busy-log")
    );
    assert!(
        why("maintenance").contains("var/log/cronjob.log:3"),
        "{}",
        why("maintenance")
    );
}

#[test]
fn a_short_fpm_timeout_alone_fails_the_wait() {
    let site = site("25", "20", QUIET_ERRORS, QUIET_CRON);
    let (code, report) = check_json(&site);
    assert_eq!(result_of(&report, "transaction-wait"), "fail", "{report:#}");
    assert_eq!(result_of(&report, "old-value-60"), "pass", "{report:#}");
    assert_eq!(code, Some(3));
}

#[test]
fn what_cannot_be_found_is_cannot_tell_not_pass() {
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    fs::remove_file(site.root.join("var/log/cronjob.log")).expect("rm");
    fs::remove_file(site.root.join("var/storage/sqlite3/exponential.db")).expect("rm");
    let (code, report) = check_json(&site);
    assert_eq!(
        result_of(&report, "maintenance"),
        "cannot tell",
        "{report:#}"
    );
    assert_eq!(
        result_of(&report, "journal-mode"),
        "cannot tell",
        "{report:#}"
    );
    assert_eq!(code, Some(0), "cannot tell is not a failure: {report:#}");
}

#[test]
fn a_directory_that_is_not_a_site_is_one_line_and_a_json_error() {
    let dir = TempDir::new("check-empty");
    let out = run(&["check", "--site", dir.path().to_str().expect("utf-8")]);
    let line = assert_one_line_error(&out);
    assert!(line.contains("has no settings/ directory"), "{line}");
    let out = run(&[
        "check",
        "--site",
        dir.path().to_str().expect("utf-8"),
        "--json",
    ]);
    assert_json_error(&out);
}

#[test]
fn a_symlink_loop_in_the_settings_is_not_followed() {
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    std::os::unix::fs::symlink("..", site.root.join("settings/override/loop"))
        .expect("a symlink loop");
    let (code, report) = check_json(&site);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(result_of(&report, "transaction-wait"), "pass", "{report:#}");
    // Read once, not once per trip around the loop.
    let wait = why(&report, "transaction-wait");
    assert_eq!(wait.matches("requestTimeout = 45 s").count(), 1, "{wait}");
}

#[test]
fn a_latin1_override_is_read_not_skipped() {
    // Exponential's settings files may be in ISO-8859-1: a byte that is not UTF-8 must not
    // hide the old value 60 (read as text, such a file used to be skipped: a false pass).
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    let mut text =
        b"<?php /* #?ini charset=\"iso-8859-1\"?\n\n[SiteSettings]\nSiteName=Caf\xe9\n\n\
                     [DatabaseSettings]\nSQLiteTransactionWait=60\n*/ ?>\n"
            .to_vec();
    text.extend_from_slice(b"\n");
    fs::write(
        site.root
            .join("settings/siteaccess/admin/site.ini.append.php"),
        text,
    )
    .expect("write the Latin-1 override");
    let (code, report) = check_json(&site);
    assert_eq!(result_of(&report, "old-value-60"), "fail", "{report:#}");
    assert!(
        why(&report, "old-value-60").contains("settings/siteaccess/admin/site.ini.append.php:7"),
        "{report:#}"
    );
    assert_eq!(code, Some(3), "{report:#}");
}

#[test]
fn an_unreadable_settings_file_is_cannot_tell_not_pass() {
    // A settings file that exists but cannot be read (here a directory where the override
    // should be; as root, permissions would not stop the read) may set anything.
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    let admin = site
        .root
        .join("settings/siteaccess/admin/site.ini.append.php");
    fs::remove_file(&admin).expect("rm");
    fs::create_dir(&admin).expect("a directory in its place");
    let (code, report) = check_json(&site);
    assert_results(
        &report,
        &["old-value-60", "transaction-wait"],
        "cannot tell",
    );
    assert!(
        why(&report, "old-value-60").contains("site.ini.append.php could not be read"),
        "{report:#}"
    );
    assert_eq!(code, Some(0), "cannot tell is not a failure: {report:#}");
}

#[test]
fn a_missing_error_log_is_cannot_tell_not_pass() {
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    fs::remove_file(site.root.join("var/log/error.log")).expect("rm");
    let (_, report) = check_json(&site);
    assert_eq!(result_of(&report, "busy-log"), "cannot tell", "{report:#}");
    assert!(why(&report, "busy-log").contains("VarDir"), "{report:#}");
}

/// Rewrites the global override without the alias to the queued driver: the site loads
/// Exponential's stock eZSQLite3DB.
fn stock_driver(site: &Site, wait: &str) {
    write(
        &site.root.join("settings/override/site.ini.append.php"),
        &append_php(&format!(
            "[DatabaseSettings]\nDatabaseImplementation=sqlite3\nSQLiteTransactionWait={wait}"
        )),
    );
}

#[test]
fn a_site_still_on_the_stock_driver_fails() {
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    stock_driver(&site, "20");
    let (code, report) = check_json(&site);
    assert_eq!(result_of(&report, "queued-driver"), "fail", "{report:#}");
    let why = why(&report, "queued-driver");
    assert!(
        why.contains("DatabaseImplementation=sqlite3 at settings/override/site.ini.append.php:4")
            && why.contains("stock eZSQLite3DB")
            && why.contains("ActiveExtensions[]=writerlock"),
        "{why}"
    );
    assert_eq!(code, Some(3), "{report:#}");
    assert_eq!(report["failed"], 1, "only the driver: {report:#}");
    let text = String::from_utf8_lossy(&check(&site, false).stdout).into_owned();
    assert!(text.ends_with("1 item failed\n"), "{text}");
}

#[test]
fn the_queued_drivers_extension_folder_counts_only_when_active() {
    let site = site("20", "30s", QUIET_ERRORS, QUIET_CRON);
    stock_driver(&site, "20");
    // The folder as shipped, with its own settings setting the alias.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../php-ext/driver/writerlock/settings/site.ini.append.php");
    let ext = site
        .root
        .join("extension/writerlock/settings/site.ini.append.php");
    write(
        &ext,
        &fs::read_to_string(&shipped).expect("the shipped settings"),
    );
    let (_, report) = check_json(&site);
    assert_eq!(result_of(&report, "queued-driver"), "fail", "{report:#}");
    assert!(
        why(&report, "queued-driver").contains("does not activate"),
        "{report:#}"
    );
    write(
        &site.root.join("settings/override/site.ini.append.php"),
        &append_php(
            "[ExtensionSettings]\nActiveExtensions[]=writerlock\n\n[DatabaseSettings]\n\
             DatabaseImplementation=sqlite3\nSQLiteTransactionWait=20",
        ),
    );
    let (code, report) = check_json(&site);
    assert_eq!(result_of(&report, "queued-driver"), "pass", "{report:#}");
    assert!(
        why(&report, "queued-driver").contains("eZSQLite3QueuedDB"),
        "{report:#}"
    );
    assert_eq!(code, Some(0), "{report:#}");
}

#[test]
fn a_max_execution_time_below_the_wait_fails() {
    // In the pool file.
    let site = site("25", "30s", QUIET_ERRORS, QUIET_CRON);
    write(
        &site.pool,
        "[www]\nuser = www-data\nrequest_terminate_timeout = 30s\n\
         php_admin_value[max_execution_time] = 5\n",
    );
    let (code, report) = check_json(&site);
    assert_eq!(result_of(&report, "transaction-wait"), "fail", "{report:#}");
    let wait = why(&report, "transaction-wait");
    assert!(
        wait.contains("SQLiteTransactionWait is 25 s")
            && wait.contains("php_admin_value[max_execution_time] = 5 s"),
        "{wait}"
    );
    assert_eq!(code, Some(3), "{report:#}");

    // In the php.ini of the PHP-FPM the pool belongs to (fpm/php.ini beside fpm/pool.d/).
    let site = self::site("25", "30s", QUIET_ERRORS, QUIET_CRON);
    let fpm = site.pool.parent().expect("a parent").join("php/8.2/fpm");
    let pool = fpm.join("pool.d/www.conf");
    write(&pool, "[www]\nrequest_terminate_timeout = 30s\n");
    write(
        &fpm.join("php.ini"),
        "[PHP]\nengine = On\nmax_execution_time = 5\nmemory_limit = 128M\n",
    );
    let args = [
        "check",
        "--site",
        site.root.to_str().expect("utf-8"),
        "--fpm-pool",
        pool.to_str().expect("utf-8"),
        "--json",
    ];
    let out = run(&args);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(result_of(&report, "transaction-wait"), "fail", "{report:#}");
    let wait = why(&report, "transaction-wait");
    assert!(
        wait.contains("php.ini max_execution_time = 5 s") && wait.contains("php.ini:3"),
        "{wait}"
    );
    assert_eq!(out.status.code(), Some(3));

    // 0 is no limit, and 30 is above the wait: both pass.
    for value in ["0", "30"] {
        write(
            &fpm.join("php.ini"),
            &format!("[PHP]\nmax_execution_time = {value}\n"),
        );
        let out = run(&args);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            result_of(&report, "transaction-wait"),
            "pass",
            "{value}: {report:#}"
        );
    }
}

#[test]
fn busy_log_findings_agree_with_their_figures() {
    let statement = "database is busy: the statement waited 5.0 s for another write to end \
                     (limit 5 s, [DatabaseSettings] SQLiteBusyTimeout) and was not run; \
                     nothing was written\n";
    let site = site(
        "20",
        "30s",
        &format!("{QUIET_ERRORS}{statement}"),
        QUIET_CRON,
    );
    let (_, report) = check_json(&site);
    let busy = why(&report, "busy-log");
    assert_eq!(result_of(&report, "busy-log"), "fail", "{report:#}");
    // One line: "line 3", not "lines 3..3"; and no claim of a transaction that waited its
    // whole limit when none did.
    assert!(busy.contains("is 1 (line 3)"), "{busy}");
    assert!(
        busy.contains("1 single statement waited its whole busy timeout"),
        "{busy}"
    );
    assert!(!busy.contains("transaction"), "{busy}");

    let transaction = "database is busy: the transaction could not start within 25 s (waited \
                       25.0 s, [DatabaseSettings] SQLiteTransactionWait), another write held the \
                       lock all that time; nothing was written\n";
    let site = self::site(
        "20",
        "30s",
        &format!("{QUIET_ERRORS}{transaction}{statement}{transaction}"),
        QUIET_CRON,
    );
    let (_, report) = check_json(&site);
    let busy = why(&report, "busy-log");
    assert!(busy.contains("is 3 (lines 3 to 5)"), "{busy}");
    assert!(
        busy.contains("2 transactions waited their whole limit")
            && busy.contains("1 single statement waited"),
        "{busy}"
    );
}
