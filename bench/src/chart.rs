//! A hand-written SVG of the wait distributions: one panel per scenario,
//! a CDF line per mode on a log time axis.

use std::fmt::Write as _;

use crate::analysis::Dist;
use crate::clock::human;
use crate::report::Series;

const WIDTH: f64 = 1180.0;
const PANEL_H: f64 = 320.0;
const LEFT: f64 = 70.0;
const PLOT_W: f64 = 620.0;
const PLOT_H: f64 = 230.0;
const TOP: f64 = 50.0;
/// 1 µs to 100 s, in nanoseconds (log10).
const X_MIN: f64 = 3.0;
const X_MAX: f64 = 11.0;
const COLORS: [&str; 6] = [
    "#7f7f7f", "#d95f02", "#1f77b4", "#1a9850", "#984ea3", "#e7298a",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color_for(label: &str, index: usize) -> &'static str {
    let l = label.to_ascii_lowercase();
    if l.contains("handoff") {
        COLORS[3]
    } else if l.contains("poll") {
        COLORS[2]
    } else if l.contains("immediate") || l.contains("busy handler") {
        COLORS[1]
    } else if l.contains("deferred") {
        COLORS[0]
    } else {
        COLORS[4 + index % 2]
    }
}

/// The panels: key, title.
const PANELS: [(&str, &str); 3] = [
    (
        "waits",
        "Scenario 3: waits for the turn, 16 writers of one-row WAL transactions",
    ),
    (
        "gaps",
        "Scenario 4: release→start gaps, transactions of 300 ms started together (scenario 1)",
    ),
    (
        "interactive",
        "Scenario 5b: the interactive writer's waits against a commit-begin hot loop",
    ),
];

/// The chart as an SVG document.
pub fn svg(series: &[Series], subtitle: &str) -> String {
    let panels: Vec<_> = PANELS
        .iter()
        .filter(|(key, _)| series.iter().any(|s| s.panel == *key))
        .collect();
    let height = 60.0 + PANEL_H * panels.len().max(1) as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Arial, sans-serif">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="26" font-size="17" font-weight="bold">writerlock: wait distributions (cumulative share of waits ≤ t, log time)</text>"#
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="44" font-size="12" fill="#444">{}</text>"##,
        escape(subtitle)
    );
    for (p, (key, title)) in panels.iter().enumerate() {
        let y0 = 60.0 + PANEL_H * p as f64 + TOP;
        panel(&mut s, y0, title, series.iter().filter(|x| x.panel == *key));
    }
    s.push_str("</svg>\n");
    s
}

fn x_of(ns: f64) -> f64 {
    let l = ns.max(1.0).log10().clamp(X_MIN, X_MAX);
    LEFT + (l - X_MIN) / (X_MAX - X_MIN) * PLOT_W
}

fn y_of(y0: f64, frac: f64) -> f64 {
    y0 + PLOT_H - frac * PLOT_H
}

fn panel<'a>(s: &mut String, y0: f64, title: &str, series: impl Iterator<Item = &'a Series>) {
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        y0 - 14.0,
        escape(title)
    );
    // Frame and grid.
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{y0}" width="{PLOT_W}" height="{PLOT_H}" fill="#fafafa" stroke="#333"/>"##
    );
    let labels = [
        "1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s",
    ];
    for (i, label) in labels.iter().enumerate() {
        let x = x_of(10f64.powf(X_MIN + i as f64));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{label}</text>"##,
            y0 + PLOT_H,
            y0 + PLOT_H + 16.0
        );
    }
    for q in [0.0, 0.25, 0.5, 0.75, 0.9, 1.0] {
        let y = y_of(y0, q);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}%</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            y + 4.0,
            q * 100.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">wait (log scale)</text>"#,
        LEFT + PLOT_W / 2.0,
        y0 + PLOT_H + 32.0
    );
    // Lines and legend.
    let legend_x = LEFT + PLOT_W + 24.0;
    for (i, ser) in series.enumerate() {
        let color = color_for(&ser.label, i);
        let mut v = ser.values.clone();
        v.sort_unstable();
        let ly = y0 + 10.0 + i as f64 * 36.0;
        let d = Dist::of(&v);
        let dash = if ser.label.contains("off:") && !ser.label.contains("busy handler") {
            r#" stroke-dasharray="7 4""#
        } else {
            ""
        };
        let figures = if d.n == 0 {
            "n=0: none measured".to_string()
        } else {
            format!(
                "n={} p50 {} · p99 {} · max {}",
                d.n,
                human(d.p50),
                human(d.p99),
                human(d.max)
            )
        };
        let _ = writeln!(
            s,
            r#"<line x1="{legend_x}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{color}" stroke-width="3"{dash}/><text x="{:.1}" y="{:.1}" font-size="12">{}</text><text x="{:.1}" y="{:.1}" font-size="11" fill="{color}">{}</text>"#,
            legend_x + 26.0,
            legend_x + 32.0,
            ly + 4.0,
            escape(&ser.label),
            legend_x + 32.0,
            ly + 18.0,
            escape(&figures),
        );
        if v.is_empty() {
            continue;
        }
        let steps = 400;
        let mut points = String::new();
        for k in 0..=steps {
            let l = X_MIN + (X_MAX - X_MIN) * k as f64 / steps as f64;
            let t = 10f64.powf(l);
            let below = v.partition_point(|&x| (x as f64) <= t);
            let frac = below as f64 / v.len() as f64;
            let _ = write!(points, "{:.1},{:.1} ", x_of(t), y_of(y0, frac));
        }
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
            points.trim_end()
        );
    }
}
