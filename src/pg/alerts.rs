//! Refused writers still connected, and the ledger alerts that name them.
//!
//! A refused session holds the refusal lock (class 1280788050, object
//! `version * 65536 + floor`, sub id 2) until it closes. Every allowed write lists those
//! locks with each session's client address and offers one alert per refused writer:
//! `The ledger writer at 10.0.0.5 was refused: ledger writer version 0 is below version 1,
//! the oldest the shared database allows; update its code and restart it`. [`new_alerts`]
//! applies the ledger spec's rules against the ledger's current alerts.

use std::collections::HashSet;

use super::error::refusal_message;
pub use super::sql::REFUSED_WRITERS_SQL;
use super::value::Value;

/// How many closed alerts a ledger's alert list keeps; a closed alert older than these no
/// longer stops the same refusal from raising a new one.
pub const KEPT_CLOSED_ALERTS: usize = 200;

/// How a refused session without a client address (a local socket) is named.
pub const UNSEEN_CLIENT: &str = "an unseen client";

/// A refused writer still connected.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefusedWriter {
    /// Its client address, or `an unseen client`.
    pub writer: String,
    /// Its server process id.
    pub pid: i32,
    /// The writer version it sent (0 when none).
    pub version: i64,
    /// The floor it hit.
    pub floor: i64,
}

impl RefusedWriter {
    /// Reads one row of [`REFUSED_WRITERS_SQL`] (writer, pid, version, floor); integers may
    /// come as numbers or as text. A missing address is `an unseen client`.
    pub fn from_row(row: &[Value]) -> RefusedWriter {
        RefusedWriter {
            writer: row
                .first()
                .and_then(Value::read_text)
                .unwrap_or_else(|| UNSEEN_CLIENT.to_string()),
            pid: row
                .get(1)
                .and_then(Value::read_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            version: row.get(2).and_then(Value::read_i64).unwrap_or(0),
            floor: row.get(3).and_then(Value::read_i64).unwrap_or(0),
        }
    }

    /// The refusal it got: `ledger writer version 0 is below version 1, ...`.
    pub fn refusal(&self) -> String {
        refusal_message(self.version, self.floor)
    }

    /// Its alert text: `The ledger writer at 10.0.0.5 was refused: <refusal>`.
    pub fn alert_text(&self) -> String {
        alert_text(&self.writer, self.version, self.floor)
    }
}

/// The alert text for a refused writer at `writer` (a client address or `an unseen
/// client`).
pub fn alert_text(writer: &str, version: i64, floor: i64) -> String {
    format!(
        "The ledger writer at {writer} was refused: {}",
        refusal_message(version, floor)
    )
}

/// An alert already in a ledger's alert list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// Its text.
    pub text: String,
    /// Whether it is still open.
    pub open: bool,
}

impl Alert {
    /// An open alert.
    pub fn open(text: impl Into<String>) -> Alert {
        Alert {
            text: text.into(),
            open: true,
        }
    }

    /// A closed alert.
    pub fn closed(text: impl Into<String>) -> Alert {
        Alert {
            text: text.into(),
            open: false,
        }
    }
}

/// The alert texts to raise on a ledger, given the refused writers and the ledger's current
/// alerts (oldest first):
///
/// - one alert per refused writer (same address, version and floor give one text);
/// - an open alert with the same text is not raised twice;
/// - a closed one is not raised again while it stays in the list; only the newest
///   [`KEPT_CLOSED_ALERTS`] closed alerts count, since older ones are dropped from the list;
/// - a different address, version or floor is a different text, so a new alert.
pub fn new_alerts(refused: &[RefusedWriter], existing: &[Alert]) -> Vec<String> {
    let mut taken: HashSet<&str> = existing
        .iter()
        .filter(|a| a.open)
        .map(|a| a.text.as_str())
        .collect();
    taken.extend(
        existing
            .iter()
            .rev()
            .filter(|a| !a.open)
            .take(KEPT_CLOSED_ALERTS)
            .map(|a| a.text.as_str()),
    );
    let mut out: Vec<String> = Vec::new();
    for writer in refused {
        let text = writer.alert_text();
        if !taken.contains(text.as_str()) && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// Reads the rows of the refused-writers query ([`REFUSED_WRITERS_SQL`]).
pub fn read_refused_writers(rows: &[Vec<Value>]) -> Vec<RefusedWriter> {
    rows.iter().map(|r| RefusedWriter::from_row(r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(writer: &str, pid: i32, version: i64, floor: i64) -> RefusedWriter {
        RefusedWriter {
            writer: writer.to_string(),
            pid,
            version,
            floor,
        }
    }

    #[test]
    fn alert_text_is_the_ledger_specs() {
        assert_eq!(
            refused("10.0.0.5", 1, 0, 1).alert_text(),
            "The ledger writer at 10.0.0.5 was refused: ledger writer version 0 is below \
             version 1, the oldest the shared database allows; update its code and restart it"
        );
        assert!(refused(UNSEEN_CLIENT, 1, 0, 1)
            .alert_text()
            .starts_with("The ledger writer at an unseen client was refused: "));
    }

    #[test]
    fn one_alert_per_refused_writer() {
        let a = refused("10.0.0.5", 1, 0, 1);
        let b = refused("10.0.0.6", 2, 0, 1);
        let a_again = refused("10.0.0.5", 3, 0, 1);
        let out = new_alerts(&[a.clone(), b.clone(), a_again], &[]);
        assert_eq!(out, vec![a.alert_text(), b.alert_text()]);
        assert!(new_alerts(&[], &[]).is_empty());
    }

    #[test]
    fn open_alert_is_not_raised_twice() {
        let a = refused("10.0.0.5", 1, 0, 1);
        assert!(new_alerts(std::slice::from_ref(&a), &[Alert::open(a.alert_text())]).is_empty());
    }

    #[test]
    fn closed_alert_in_the_list_is_not_raised_again() {
        let a = refused("10.0.0.5", 1, 0, 1);
        assert!(new_alerts(std::slice::from_ref(&a), &[Alert::closed(a.alert_text())]).is_empty());
    }

    #[test]
    fn different_address_version_or_floor_is_a_new_alert() {
        let a = refused("10.0.0.5", 1, 0, 1);
        let existing = [Alert::closed(a.alert_text())];
        for other in [
            refused("10.0.0.7", 1, 0, 1),
            refused("10.0.0.5", 1, 1, 2),
            refused("10.0.0.5", 1, 0, 2),
        ] {
            assert_eq!(
                new_alerts(std::slice::from_ref(&other), &existing),
                vec![other.alert_text()]
            );
        }
    }

    #[test]
    fn closed_alert_beyond_the_kept_200_no_longer_blocks() {
        let a = refused("10.0.0.5", 1, 0, 1);
        let mut existing = vec![Alert::closed(a.alert_text())];
        existing.extend((0..KEPT_CLOSED_ALERTS - 1).map(|i| Alert::closed(format!("other {i}"))));
        assert!(new_alerts(std::slice::from_ref(&a), &existing).is_empty());
        existing.push(Alert::closed("one more"));
        assert_eq!(
            new_alerts(std::slice::from_ref(&a), &existing),
            vec![a.alert_text()]
        );
        // Open alerts never age out.
        existing[0].open = true;
        assert!(new_alerts(&[a], &existing).is_empty());
    }
}
