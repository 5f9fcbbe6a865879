//! Tables, targets, the JSON file and the chart's data.

use serde_json::{json, Map, Value};

/// A plain-text table.
#[derive(Debug, Clone)]
pub struct Table {
    title: String,
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: Vec<String>,
}

impl Table {
    /// A table with a title and column headers.
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Table {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Adds a line printed under the table.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// The table as text.
    pub fn render(&self) -> String {
        let cols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = w - c.chars().count();
                if i > 0 {
                    s.push_str(" | ");
                }
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            }
            s.trim_end().to_string()
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&"=".repeat(self.title.chars().count()));
        out.push('\n');
        out.push_str(&line(&self.headers));
        out.push('\n');
        out.push_str(
            &widths
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("-+-"),
        );
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str("  ");
            out.push_str(n);
            out.push('\n');
        }
        out
    }
}

/// A target, measured: for the library's default mode, or for a baseline
/// (the alternatives it is compared with), whose misses are expected.
#[derive(Debug, Clone)]
pub struct Target {
    /// Scenario and what is measured.
    pub what: String,
    /// Which mode the figure belongs to.
    pub mode: String,
    /// The target, as text.
    pub goal: String,
    /// The figure, as text.
    pub measured: String,
    /// Met, missed, or not measured in this run.
    pub met: Option<bool>,
    /// How far from the target.
    pub distance: String,
}

impl Target {
    /// A target "at most `limit`" measured as `value`; `fmt` formats both.
    pub fn at_most(
        what: &str,
        mode: &str,
        value: f64,
        limit: f64,
        fmt: impl Fn(f64) -> String,
    ) -> Target {
        Target::bound(what, mode, value, limit, fmt, true)
    }

    /// A target "at least `limit`" measured as `value`.
    pub fn at_least(
        what: &str,
        mode: &str,
        value: f64,
        limit: f64,
        fmt: impl Fn(f64) -> String,
    ) -> Target {
        Target::bound(what, mode, value, limit, fmt, false)
    }

    /// A bound either way: the distance says by how much it was met or
    /// missed, and how many times off a figure is when it is far off.
    fn bound(
        what: &str,
        mode: &str,
        value: f64,
        limit: f64,
        fmt: impl Fn(f64) -> String,
        at_most: bool,
    ) -> Target {
        let (met, short, times) = if at_most {
            (
                value <= limit,
                value - limit,
                (limit > 0.0).then(|| value / limit),
            )
        } else {
            (
                value >= limit,
                limit - value,
                (value > 0.0).then(|| limit / value),
            )
        };
        let distance = match times.filter(|&t| t >= 1.5) {
            _ if met => format!("met, {} to spare", fmt(-short)),
            Some(t) if at_most => format!("misses by {} ({t:.1}× the target)", fmt(short)),
            Some(t) => format!(
                "misses by {} (the target is {t:.0}× the figure)",
                fmt(short)
            ),
            None => format!("misses by {}", fmt(short)),
        };
        Target {
            what: what.into(),
            mode: mode.into(),
            goal: format!("{} {}", if at_most { "≤" } else { "≥" }, fmt(limit)),
            measured: fmt(value),
            met: Some(met),
            distance,
        }
    }

    /// A yes/no target.
    pub fn check(what: &str, mode: &str, goal: &str, ok: bool, measured: String) -> Target {
        Target {
            what: what.into(),
            mode: mode.into(),
            goal: goal.into(),
            distance: if ok {
                "met".into()
            } else {
                format!("missed: {measured}")
            },
            measured,
            met: Some(ok),
        }
    }

    /// A target this run left out on purpose (a QUICK run skips it by
    /// design): reported, but not a failure of the run.
    pub fn omitted(what: &str, mode: &str, goal: &str, why: &str) -> Target {
        Target {
            what: what.into(),
            mode: mode.into(),
            goal: goal.into(),
            measured: "-".into(),
            met: None,
            distance: format!("left out: {why}"),
        }
    }

    /// Whether this run left the figure out on purpose ([`Target::omitted`]).
    pub fn is_left_out(&self) -> bool {
        self.met.is_none() && self.distance.starts_with("left out")
    }

    /// Whether the figure could not be measured ([`Target::skipped`]): the
    /// run is then incomplete and fails.
    pub fn not_measured(&self) -> bool {
        self.met.is_none() && self.distance.starts_with("not measured")
    }

    /// A target this run could not measure (no Postgres, a host missing).
    pub fn skipped(what: &str, mode: &str, goal: &str, why: &str) -> Target {
        Target {
            what: what.into(),
            mode: mode.into(),
            goal: goal.into(),
            measured: "-".into(),
            met: None,
            distance: format!("not measured: {why}"),
        }
    }

    /// Whether the figure belongs to a baseline the library is compared with
    /// (deferred BEGIN, the busy handler, the driver's polling protocol, plain
    /// `flock()` loops) rather than to writerlock's default.
    pub fn baseline(&self) -> bool {
        matches!(
            self.mode.as_str(),
            "deferred" | "immediate" | "queue-poll" | "driver-flock" | "flock-no-yield" | "serial"
        )
    }

    fn json(&self) -> Value {
        json!({
            "baseline": self.baseline(),
            "what": self.what,
            "mode": self.mode,
            "target": self.goal,
            "measured": self.measured,
            "met": self.met,
            "distance": self.distance,
        })
    }
}

/// A distribution for the chart: values in nanoseconds.
#[derive(Debug, Clone)]
pub struct Series {
    /// The chart panel it belongs to.
    pub panel: String,
    /// The line's label.
    pub label: String,
    /// The values, nanoseconds.
    pub values: Vec<i64>,
}

/// Everything a run measured.
#[derive(Debug, Default)]
pub struct Report {
    /// The tables, in order.
    pub tables: Vec<Table>,
    /// Scenario results for the JSON file, by key.
    pub json: Map<String, Value>,
    /// The targets.
    pub targets: Vec<Target>,
    /// The chart's distributions.
    pub series: Vec<Series>,
    /// The load average at the start of the current scenario, noted under
    /// its next table (the machine may be shared).
    pub load_note: Option<String>,
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

impl Report {
    /// Adds a table and prints it at once.
    pub fn table(&mut self, mut table: Table) {
        if let Some(load) = self.load_note.take() {
            table.note(format!(
                "Load average at the scenario's start: {load} (2 cores)."
            ));
        }
        println!("{}", table.render());
        self.tables.push(table);
    }

    /// Records a scenario's JSON.
    pub fn record(&mut self, key: &str, value: Value) {
        self.json.insert(key.to_string(), value);
    }

    /// Adds a distribution to the chart.
    pub fn series(&mut self, panel: &str, label: &str, values: Vec<i64>) {
        self.series.push(Series {
            panel: panel.into(),
            label: label.into(),
            values,
        });
    }

    /// The targets as a table, writerlock's own first, then the baselines'
    /// (whose misses are what the comparison shows, not failures), each target
    /// once.
    pub fn targets_table(&self) -> Table {
        let mut t = Table::new(
            "Targets (baselines are the alternatives writerlock is compared with)",
            &[
                "for", "what", "mode", "target", "measured", "met", "distance",
            ],
        );
        let mut shown = std::collections::HashSet::new();
        let ordered = self
            .targets
            .iter()
            .filter(|g| !g.baseline())
            .chain(self.targets.iter().filter(|g| g.baseline()));
        for g in ordered {
            if !shown.insert((g.what.clone(), g.mode.clone(), g.goal.clone())) {
                continue;
            }
            let baseline = g.baseline();
            t.row(vec![
                if baseline { "baseline" } else { "writerlock" }.into(),
                g.what.clone(),
                g.mode.clone(),
                g.goal.clone(),
                g.measured.clone(),
                match (g.met, baseline) {
                    (Some(true), _) => "yes".into(),
                    (Some(false), false) => "NO".into(),
                    (Some(false), true) => "no (baseline)".into(),
                    (None, _) => "-".into(),
                },
                g.distance.clone(),
            ]);
        }
        t
    }

    /// The whole report as JSON.
    pub fn to_json(&self, meta: Value) -> Value {
        json!({
            "meta": meta,
            "scenarios": Value::Object(self.json.clone()),
            "targets": self.targets.iter().map(Target::json).collect::<Vec<_>>(),
        })
    }
}
