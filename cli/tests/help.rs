//! Help texts speak the users' words: Exponential's driver, the ledger spec, SQLite's busy
//! handler; never the project's private names for its sources or its tracker's numbers.

mod common;

use common::*;

/// Every command's help.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["demo"],
    &["status"],
    &["check"],
    &["pg"],
    &["pg", "settings"],
    &["pg", "holders"],
    &["pg", "floor"],
    &["pg", "refused"],
    &["pg", "watch-idle"],
    &["pg", "watch-bumps"],
    &["pg", "setup"],
];

fn private_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    if lower.contains("seed") {
        found.push("seed".to_string());
    }
    let bytes = lower.as_bytes();
    for (i, _) in lower.match_indices("issue") {
        let rest = &bytes[i + 5..];
        let digits = rest.iter().skip_while(|b| **b == b' ' || **b == b'#');
        if digits.take(1).any(u8::is_ascii_digit) {
            found.push(lower[i..(i + 9).min(lower.len())].to_string());
        }
    }
    found
}

#[test]
fn no_help_text_names_private_sources_or_issue_numbers() {
    for command in COMMANDS {
        for flag in ["--help", "-h"] {
            let mut args = command.to_vec();
            args.push(flag);
            let help = run_ok(&args);
            assert!(help.len() > 100, "{args:?} printed no help: {help}");
            let found = private_words(&help);
            assert!(
                found.is_empty(),
                "writerlock {args:?} says {found:?}:\n{help}"
            );
        }
    }
}

#[test]
fn the_word_check_finds_what_it_looks_for() {
    assert_eq!(private_words("the Seed's text"), vec!["seed"]);
    assert_eq!(private_words("targets of issue 7"), vec!["issue 7"]);
    assert!(private_words("an issue with the lock; issues arise").is_empty());
}
