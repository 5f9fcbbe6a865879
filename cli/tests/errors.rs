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
