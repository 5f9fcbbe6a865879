//! Figures from a run's timestamps: waits, hand-off gaps, per-writer counts,
//! overlapping turns.

use serde_json::{json, Value};

use crate::clock::human;
use crate::spawn::Run;

/// A distribution's summary, in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Dist {
    /// How many values.
    pub n: usize,
    /// Median.
    pub p50: i64,
    /// 90th percentile.
    pub p90: i64,
    /// 99th percentile.
    pub p99: i64,
    /// Largest.
    pub max: i64,
    /// Mean.
    pub mean: f64,
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Dist {
    /// Summarises `values` (sorted here).
    pub fn of(values: &[i64]) -> Dist {
        let mut v = values.to_vec();
        v.sort_unstable();
        if v.is_empty() {
            return Dist::default();
        }
        Dist {
            n: v.len(),
            p50: percentile(&v, 50.0),
            p90: percentile(&v, 90.0),
            p99: percentile(&v, 99.0),
            max: v[v.len() - 1],
            mean: v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64,
        }
    }

    /// As JSON, in microseconds.
    pub fn json_us(&self) -> Value {
        json!({
            "n": self.n,
            "p50_us": self.p50 as f64 / 1e3,
            "p90_us": self.p90 as f64 / 1e3,
            "p99_us": self.p99 as f64 / 1e3,
            "max_us": self.max as f64 / 1e3,
            "mean_us": self.mean / 1e3,
        })
    }

    /// `p50 / p99 / max` for a table cell.
    pub fn cell(&self) -> String {
        if self.n == 0 {
            return "-".into();
        }
        format!(
            "{} / {} / {}",
            human(self.p50),
            human(self.p99),
            human(self.max)
        )
    }
}

/// One committed transaction, from any worker.
#[derive(Debug, Clone, Copy)]
pub struct Txn {
    /// Asked for.
    pub call: i64,
    /// BEGIN granted.
    pub granted: i64,
    /// Commit returned.
    pub released: i64,
    /// The writer's index in the run.
    pub writer: usize,
}

/// Where a contended run's time went, from consecutive turns: turns a
/// writer took straight back (within its slice) against turns that passed
/// to another writer (a hand-over).
#[derive(Debug, Clone, Copy, Default)]
pub struct Breakdown {
    /// Turns that followed the same writer's turn.
    pub kept: usize,
    /// Turns that followed another writer's turn.
    pub passed: usize,
    /// Mean gap (previous commit returned to this BEGIN returned), kept turns.
    pub kept_gap: f64,
    /// Mean gap, passed turns.
    pub passed_gap: f64,
    /// Mean turn length (BEGIN returned to commit returned), kept turns.
    pub kept_hold: f64,
    /// Mean turn length, passed turns (the first of a writer's run).
    pub passed_hold: f64,
    /// Share of the run's span spent in hand-over gaps.
    pub passed_gap_share: f64,
}

impl Breakdown {
    /// As JSON, in microseconds.
    pub fn json(&self) -> Value {
        json!({
            "kept": self.kept, "passed": self.passed,
            "kept_gap_us": self.kept_gap / 1e3, "passed_gap_us": self.passed_gap / 1e3,
            "kept_hold_us": self.kept_hold / 1e3, "passed_hold_us": self.passed_hold / 1e3,
            "passed_gap_share": self.passed_gap_share,
        })
    }
}

impl Run {
    /// Every committed transaction, ordered by the time BEGIN was granted.
    pub fn txns(&self) -> Vec<Txn> {
        let mut all: Vec<Txn> = self
            .workers
            .iter()
            .flat_map(|w| {
                (0..w.granted.len()).map(move |i| Txn {
                    call: w.call[i],
                    granted: w.granted[i],
                    released: w.released[i],
                    writer: w.id,
                })
            })
            .collect();
        all.sort_by_key(|t| t.granted);
        all
    }

    /// Committed transactions, optionally only those ended by `until`.
    pub fn committed(&self, until: Option<i64>) -> usize {
        self.workers
            .iter()
            .map(|w| {
                w.released
                    .iter()
                    .filter(|&&r| until.is_none_or(|u| r <= u))
                    .count()
            })
            .sum()
    }

    /// Transactions that failed (timed runs' censored waits excluded).
    pub fn failed(&self) -> usize {
        self.workers.iter().map(|w| w.failures.len()).sum()
    }

    /// Every wait: asked-for to granted for committed transactions, plus
    /// waits still running at the end of a timed run (counted to its end)
    /// and waits that gave up.
    pub fn waits(&self) -> Vec<i64> {
        let mut out = Vec::new();
        for w in &self.workers {
            out.extend(w.call.iter().zip(&w.granted).map(|(c, g)| g - c));
            out.extend(w.censored.iter().map(|(c, e)| e - c));
            out.extend(w.failures.iter().filter(|f| f.busy).map(|f| f.at - f.call));
        }
        out
    }

    /// The time from one writer's release to the next writer's BEGIN, for
    /// every release that found another writer already waiting. Negative
    /// values mean the next BEGIN returned before the releaser read its
    /// clock.
    pub fn handoff_gaps(&self) -> Vec<i64> {
        let txns = self.txns();
        txns.windows(2)
            .filter(|w| w[1].call < w[0].released)
            .map(|w| w[1].granted - w[0].released)
            .collect()
    }

    /// Where the run's time went between and within turns.
    pub fn breakdown(&self) -> Breakdown {
        let txns = self.txns();
        let mut b = Breakdown::default();
        let (mut kg, mut pg, mut kh, mut ph) = (0i64, 0i64, 0i64, 0i64);
        for w in txns.windows(2) {
            let gap = (w[1].granted - w[0].released).max(0);
            let hold = w[1].released - w[1].granted;
            if w[1].writer == w[0].writer {
                b.kept += 1;
                kg += gap;
                kh += hold;
            } else {
                b.passed += 1;
                pg += gap;
                ph += hold;
            }
        }
        let mean = |sum: i64, n: usize| if n == 0 { 0.0 } else { sum as f64 / n as f64 };
        b.kept_gap = mean(kg, b.kept);
        b.passed_gap = mean(pg, b.passed);
        b.kept_hold = mean(kh, b.kept);
        b.passed_hold = mean(ph, b.passed);
        if let (Some(first), Some(last)) = (txns.first(), txns.last()) {
            let span = (last.released - first.granted).max(1);
            b.passed_gap_share = pg as f64 / span as f64;
        }
        b
    }

    /// The last commit's end (ns after the start instant).
    pub fn last_end(&self) -> i64 {
        self.workers
            .iter()
            .flat_map(|w| w.released.iter().copied())
            .max()
            .unwrap_or(0)
    }

    /// The sum of the time each committed transaction held the lock.
    pub fn hold_sum(&self) -> i64 {
        self.workers
            .iter()
            .flat_map(|w| w.granted.iter().zip(&w.released).map(|(g, r)| r - g))
            .sum()
    }

    /// The longest time one committed transaction held the lock (BEGIN
    /// returned to commit returned).
    pub fn longest_turn(&self) -> i64 {
        self.workers
            .iter()
            .flat_map(|w| w.granted.iter().zip(&w.released).map(|(g, r)| r - g))
            .max()
            .unwrap_or(0)
    }

    /// Commits per writer (ended by `until` when given).
    pub fn per_writer(&self, until: Option<i64>) -> Vec<usize> {
        self.workers
            .iter()
            .map(|w| {
                w.released
                    .iter()
                    .filter(|&&r| until.is_none_or(|u| r <= u))
                    .count()
            })
            .collect()
    }

    /// Each writer's longest wait.
    pub fn longest_wait(&self) -> i64 {
        self.waits().into_iter().max().unwrap_or(0)
    }

    /// Pairs of turns (from different writers) that overlap in time.
    pub fn overlapping_turns(&self) -> usize {
        let mut turns: Vec<(i64, i64, usize)> = self
            .workers
            .iter()
            .flat_map(|w| w.turns.iter().map(move |&(s, e)| (s, e, w.id)))
            .collect();
        turns.sort_unstable();
        let mut overlaps = 0;
        let mut latest_end = i64::MIN;
        for (s, e, _) in &turns {
            if *s < latest_end {
                overlaps += 1;
            }
            latest_end = latest_end.max(*e);
        }
        overlaps
    }

    /// Distinct failure messages with their counts.
    pub fn failure_messages(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for f in self.workers.iter().flat_map(|w| w.failures.iter()) {
            match out.iter_mut().find(|(m, _)| *m == f.error) {
                Some((_, n)) => *n += 1,
                None => out.push((f.error.clone(), 1)),
            }
        }
        out
    }
}

/// Per-writer commit counts: min, max, mean and the largest distance from
/// the mean as a fraction of it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spread {
    /// Fewest commits of one writer.
    pub min: usize,
    /// Most commits of one writer.
    pub max: usize,
    /// Mean commits per writer.
    pub mean: f64,
    /// max |count - mean| / mean.
    pub worst: f64,
}

impl Spread {
    /// Summarises per-writer counts.
    pub fn of(counts: &[usize]) -> Spread {
        if counts.is_empty() {
            return Spread::default();
        }
        let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
        let worst = if mean > 0.0 {
            counts
                .iter()
                .map(|&c| (c as f64 - mean).abs() / mean)
                .fold(0.0, f64::max)
        } else {
            0.0
        };
        Spread {
            min: counts.iter().copied().min().unwrap_or(0),
            max: counts.iter().copied().max().unwrap_or(0),
            mean,
            worst,
        }
    }

    /// As JSON.
    pub fn json(&self) -> Value {
        json!({"min": self.min, "max": self.max, "mean": self.mean, "worst_from_mean": self.worst})
    }
}
