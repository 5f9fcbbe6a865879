//! What a results file says about the run that made it: the machine's name,
//! the commit measured and whether the measured code had uncommitted
//! changes, and the date.

use std::process::Command;

use serde_json::{json, Value};

/// The paths whose code a run measures (the core and the bench itself).
pub const MEASURED: [&str; 2] = ["src", "bench"];

/// What under them is not measured code: the committed results, the bench's
/// documentation and the script that copies the results into docs/performance.md
/// (bench/readme.py keeps the same list).
const NOT_MEASURED: [&str; 3] = [
    ":(exclude)bench/results",
    ":(exclude)bench/README.md",
    ":(exclude)bench/readme.py",
];

/// The machine's name for its committed results file: `BENCH_MACHINE` if set,
/// otherwise the CPU count and model (`2cpu-amd-epyc`), which stays the same
/// across reboots and host names of one kind of machine.
pub fn machine(cores: usize, cpu_model: &str) -> String {
    match std::env::var("BENCH_MACHINE") {
        Ok(name) if !slug(&name).is_empty() => slug(&name),
        _ => {
            let model = slug(cpu_model);
            if model.is_empty() {
                format!("{cores}cpu")
            } else {
                format!("{cores}cpu-{model}")
            }
        }
    }
}

/// Lower-case letters, digits and single dashes: a file name on any system.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches(|c| c == '-' || c == '.').to_string()
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commit checked out in the current directory and, for each measured
/// path, whether it differs from that commit (untracked files included);
/// null fields outside a git checkout.
pub fn checkout() -> Value {
    let Some(commit) = git(&["rev-parse", "HEAD"]) else {
        return json!({"commit": null, "uncommitted_changes": null});
    };
    let mut changed = serde_json::Map::new();
    for path in MEASURED {
        let mut args = vec![
            "status",
            "--porcelain",
            "--untracked-files=normal",
            "--",
            path,
        ];
        args.extend(NOT_MEASURED);
        let status = git(&args);
        changed.insert(
            path.to_string(),
            status.map_or(Value::Null, |s| Value::Bool(!s.is_empty())),
        );
    }
    json!({"commit": commit, "uncommitted_changes": changed})
}

/// A Unix time as an ISO 8601 UTC date and time, `2026-12-01T17:18:03Z`.
pub fn iso_utc(unix: u64) -> String {
    writerlock::calendar::utc_text(i64::try_from(unix).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::{iso_utc, slug};

    #[test]
    fn formats_utc_dates() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso_utc(1_796_145_483), "2026-12-01T17:18:03Z");
    }

    #[test]
    fn machine_names_are_file_names() {
        assert_eq!(slug("AMD EPYC"), "amd-epyc");
        assert_eq!(
            slug("Intel(R) Xeon(R) CPU @ 2.20GHz"),
            "intel-r-xeon-r-cpu-2.20ghz"
        );
        assert_eq!(slug("  ../x/ "), "x");
        assert_eq!(slug("/"), "");
    }
}
