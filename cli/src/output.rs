//! Output: aligned text tables, JSON documents and lines, and a progress bar on stderr.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::CliError;

/// How a table column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Number columns.
    Right,
}

/// A text table: a header row and rows of cells, columns padded to their widest cell.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            headers: columns.iter().map(|(h, _)| h.to_string()).collect(),
            aligns: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as lines of text, header first, without trailing spaces.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let empty = String::new();
        for row in std::iter::once(&self.headers).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).unwrap_or(&empty);
                let pad = width.saturating_sub(cell.chars().count());
                if i > 0 {
                    line.push_str("  ");
                }
                match self.aligns[i] {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&" ".repeat(pad));
                    }
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// The JSON document a command asked for `--json` prints on stdout when it fails:
/// `{"error": {"message": "...", "exit_status": 1}}`, the message the same as on stderr.
#[derive(Debug, Serialize)]
pub struct JsonError {
    error: JsonErrorBody,
}

#[derive(Debug, Serialize)]
struct JsonErrorBody {
    message: String,
    exit_status: u8,
}

impl JsonError {
    /// The error object for `message` and the exit status the command ends with.
    pub fn new(message: &str, exit_status: u8) -> JsonError {
        JsonError {
            error: JsonErrorBody {
                message: message.to_string(),
                exit_status,
            },
        }
    }
}

/// Prints `value` as one pretty JSON document on stdout.
pub fn print_json(value: &impl Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)?;
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{text}")?;
    Ok(())
}

/// Prints `value` as one JSON line on stdout and flushes it (for the sampling loops).
pub fn print_json_line(value: &impl Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string(value)?;
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{text}")?;
    stdout.flush()?;
    Ok(())
}

/// Prints a line of text on stdout and flushes it.
pub fn print_line(text: &str) -> Result<(), CliError> {
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{text}")?;
    stdout.flush()?;
    Ok(())
}

/// `text` on one line: line breaks and runs of blanks become single spaces.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a descriptor is a terminal.
pub fn is_tty(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// Milliseconds with a tenth, for JSON.
pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

/// Seconds with three decimals, for JSON.
pub fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// A progress bar on stderr: redrawn in place on a terminal, a line at the start and the
/// end otherwise.
#[derive(Debug)]
pub struct Progress {
    tty: bool,
    label: String,
    total: u64,
    done: u64,
    failed: u64,
    last_draw: Option<Instant>,
    started: Instant,
}

impl Progress {
    /// Starts a bar for `total` steps.
    pub fn start(label: &str, total: u64) -> Progress {
        let progress = Progress {
            tty: is_tty(2),
            label: label.to_string(),
            total,
            done: 0,
            failed: 0,
            last_draw: None,
            started: Instant::now(),
        };
        if !progress.tty {
            eprintln!("{}: {} publishes running", progress.label, total);
        }
        progress
    }

    /// Counts one finished step.
    pub fn step(&mut self, ok: bool) {
        self.done += 1;
        if !ok {
            self.failed += 1;
        }
        let due = self
            .last_draw
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(40));
        if self.tty && (due || self.done == self.total) {
            self.draw();
        }
    }

    fn draw(&mut self) {
        const WIDTH: u64 = 32;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(WIDTH);
        let bar: String = (0..WIDTH)
            .map(|i| if i < filled { '#' } else { '.' })
            .collect();
        eprint!(
            "\r\x1b[2K{:<10} [{bar}] {}/{} publishes, {} failed, {}",
            self.label,
            self.done,
            self.total,
            self.failed,
            crate::duration::human(self.started.elapsed())
        );
        let _ = io::stderr().flush();
        self.last_draw = Some(Instant::now());
    }

    /// Ends the bar: clears it on a terminal, prints a closing line otherwise. The closing
    /// line gives no time: the results table's `total` is the run's one total (from the
    /// shared start to the last commit), and a second figure measured from another start
    /// would only disagree with it.
    pub fn finish(self) {
        if self.tty {
            eprint!("\r\x1b[2K");
            let _ = io::stderr().flush();
        } else {
            eprintln!(
                "{}: {} of {} publishes done, {} failed",
                self.label, self.done, self.total, self.failed,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&[("mode", Align::Left), ("n", Align::Right)]);
        t.row(vec!["queue".into(), "192".into()]);
        t.row(vec!["immediate".into(), "7".into()]);
        assert_eq!(
            t.render(),
            "mode         n\nqueue      192\nimmediate    7\n"
        );
    }

    #[test]
    fn one_line_joins() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
    }
}
