//! Errors are one clear line with a non-zero exit, and passwords never appear in output.
//! These need no server: the addresses point where nothing listens.

mod common;

use common::*;

const SECRET: &str = "Sup3rSecretPw";

fn assert_secret_hidden(out: &std::process::Output) {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(SECRET), "the password leaked: {all}");
}

#[test]
fn an_unreachable_server_is_one_line_without_the_password() {
    let url = format!("postgresql://ledger:{SECRET}@127.0.0.1:1/ledger");
    for sub in [
        "settings",
        "holders",
        "floor",
        "refused",
        "setup",
        "watch-bumps",
    ] {
        let out = run(&["pg", sub, "--url", &url]);
        let line = assert_one_line_error(&out);
        assert!(
            line.contains(
                "could not connect to the database at postgresql://ledger@127.0.0.1:1/ledger"
            ),
            "{line}"
        );
        assert_secret_hidden(&out);
    }
    // From the environment, in --json mode, the same.
    let out = command(&["pg", "holders", "--json"])
        .env("WRITERLOCK_DATABASE_URL", &url)
        .output()
        .expect("run");
    // --json: the same text as a JSON error object on stdout.
    let (_, doc) = assert_json_error(&out);
    assert_eq!(doc["error"]["exit_status"], 1);
    assert_secret_hidden(&out);
}

#[test]
fn a_bad_address_is_one_line_without_the_password() {
    for url in [
        format!("postgresql://ledger:{SECRET}@127.0.0.1:notaport/ledger"),
        format!("host=127.0.0.1 port=1 user=ledger password={SECRET} dbname=ledger"),
        format!("postgresql://ledger:{SECRET}@/ledger?host="),
    ] {
        let out = run(&["pg", "floor", "--url", &url]);
        assert_one_line_error(&out);
        assert_secret_hidden(&out);
    }
}

#[test]
fn no_address_says_how_to_give_one() {
    let out = run(&["pg", "holders"]);
    let line = assert_one_line_error(&out);
    assert!(
        line.contains("--url") && line.contains("WRITERLOCK_DATABASE_URL"),
        "{line}"
    );
}

#[test]
fn help_never_shows_the_address_from_the_environment() {
    let url = format!("postgresql://ledger:{SECRET}@db.example:5432/ledger");
    for args in [&["pg", "--help"][..], &["pg", "holders", "--help"][..]] {
        let out = command(args)
            .env("WRITERLOCK_DATABASE_URL", &url)
            .output()
            .expect("run");
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("WRITERLOCK_DATABASE_URL"));
        assert_secret_hidden(&out);
        assert!(!String::from_utf8_lossy(&out.stdout).contains("db.example"));
    }
}

#[test]
fn bad_durations_are_refused() {
    let out = run(&[
        "pg",
        "watch-idle",
        "--interval",
        "soon",
        "--url",
        "postgresql://x@127.0.0.1:1/x",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a duration"));
    let out = run(&[
        "pg",
        "watch-idle",
        "--interval",
        "0",
        "--url",
        "postgresql://x@127.0.0.1:1/x",
    ]);
    let line = assert_one_line_error(&out);
    assert!(line.contains("--interval"), "{line}");
}

#[test]
fn a_mistyped_subcommand_or_flag_gets_a_suggestion_and_the_right_help() {
    // (arguments, what clap suggests, the help the message points to)
    let cases: &[(&[&str], &str, &str)] = &[
        (&["stauts", "x"], "'status'", "see writerlock --help"),
        (&["pg", "sttings"], "'settings'", "see writerlock pg --help"),
        (
            &["status", "--jsno", "x"],
            "'--json'",
            "see writerlock status --help",
        ),
        (
            &["check", "--sit", "x"],
            "'--site'",
            "see writerlock check --help",
        ),
        (
            &["pg", "watch-idle", "--intervall", "5s"],
            "'--interval'",
            "see writerlock pg watch-idle --help",
        ),
    ];
    for (args, suggestion, help) in cases {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let line = assert_one_line_error(&out);
        assert!(
            line.contains(&format!("did you mean {suggestion}?")),
            "{args:?}: {line}"
        );
        assert!(line.ends_with(help), "{args:?}: {line}");
    }
    // With --json, the same line is also the JSON error object.
    let out = run(&["--json", "stauts", "x"]);
    let (line, doc) = assert_json_error(&out);
    assert!(line.contains("did you mean 'status'?"), "{line}");
    assert_eq!(doc["error"]["exit_status"], 2);
}

#[test]
fn json_is_accepted_before_or_after_the_subcommand() {
    let dir = TempDir::new("json-anywhere");
    let db = dir.file("site.db");
    rusqlite::Connection::open(&db)
        .and_then(|c| c.execute_batch("CREATE TABLE t (x INTEGER)"))
        .expect("a SQLite database");
    let mut docs = Vec::new();
    for args in [
        &["--json", "status", &db][..],
        &["status", "--json", &db][..],
        &["status", &db, "--json"][..],
    ] {
        let mut doc = run_json(args);
        doc["filesystem"]["magic"] = serde_json::Value::Null;
        docs.push((args.to_vec(), doc));
    }
    for (args, doc) in &docs[1..] {
        assert_eq!(doc, &docs[0].1, "{args:?} differs from {:?}", docs[0].0);
    }
    // pg subcommands too, and errors: a JSON error object either way.
    let url = "postgresql://ledger@127.0.0.1:1/ledger";
    for args in [
        &["--json", "pg", "floor", "--url", url][..],
        &["pg", "--json", "floor", "--url", url][..],
        &["pg", "floor", "--url", url, "--json"][..],
    ] {
        let (_, doc) = assert_json_error(&run(args));
        assert_eq!(doc["error"]["exit_status"], 1, "{args:?}");
    }
}
