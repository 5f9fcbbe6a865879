//! Durations on the command line (`30`, `30s`, `500ms`, `5m`, `1h`, `1h30m`) and in output.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses a duration: a plain number is seconds (`30`, `0.5`); otherwise one or more
/// number-unit pairs with units `ms`, `s`, `m`, `h` or `d` (`30s`, `5m`, `1h30m`).
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "'{text}' is not a duration: use seconds (30) or a number with ms, s, m or h \
             (500ms, 30s, 5m, 1h)"
        )
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = t.parse::<f64>() {
        return seconds(secs).ok_or_else(bad);
    }
    let mut total = 0.0_f64;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match rest[..unit_len].trim() {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            _ => return Err(bad()),
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    seconds(total).ok_or_else(bad)
}

fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && (0.0..1.0e9).contains(&secs)).then(|| Duration::from_secs_f64(secs))
}

/// A readable duration: `850 µs`, `12.3 ms`, `4.21 s`, `3 min 05 s`, `2 h 04 min`.
pub fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 0.001 {
        format!("{} µs", d.as_micros())
    } else if secs < 1.0 {
        format!("{:.1} ms", secs * 1000.0)
    } else if secs < 60.0 {
        format!("{secs:.2} s")
    } else if secs < 3600.0 {
        let whole = d.as_secs();
        format!("{} min {:02} s", whole / 60, whole % 60)
    } else {
        let whole = d.as_secs();
        format!("{} h {:02} min", whole / 3600, (whole % 3600) / 60)
    }
}

/// A duration as given on the command line, shortest form: `30 s`, `1 h`, `500 ms`.
pub fn short(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 3_600_000 == 0 && ms > 0 {
        format!("{} h", ms / 3_600_000)
    } else if ms % 60_000 == 0 && ms > 0 {
        format!("{} min", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else if ms >= 1000 {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{ms} ms")
    }
}

/// The current time in UTC, ISO 8601 with seconds: `2024-10-20T06:54:00Z`.
pub fn utc_now() -> String {
    utc(SystemTime::now())
}

/// A time in UTC, ISO 8601 with seconds.
pub fn utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    writerlock::calendar::utc_text(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse(" 2 s"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn refuses_nonsense() {
        for bad in ["", "s", "-1", "1x", "abc", "1h-3m", "inf", "NaN"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(human(Duration::from_millis(1234)), "1.23 s");
        assert_eq!(human(Duration::from_micros(12_300)), "12.3 ms");
        assert_eq!(human(Duration::from_secs(185)), "3 min 05 s");
        assert_eq!(short(Duration::from_secs(30)), "30 s");
        assert_eq!(short(Duration::from_secs(3600)), "1 h");
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            utc(UNIX_EPOCH + Duration::from_secs(1_729_407_240)),
            "2024-10-20T06:54:00Z"
        );
    }
}
