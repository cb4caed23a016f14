//! Durations as the contract writes them: seconds as a number, or `"500ms"`,
//! `"90s"`, `"10m"`, `"2h"`, `"30d"`. Every duration parsed here is at
//! most [`MAX`]; each use checks its own range on top (§10).

use std::time::Duration;

/// The longest duration parsed at all (100 years): anything longer is an
/// error, never an overflow.
pub const MAX: Duration = Duration::from_secs(100 * 365 * 86400);

/// The longest duration text looked at.
const MAX_TEXT: usize = 64;

fn from_secs(secs: f64, shown: &str) -> Result<Duration, String> {
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration `{shown}`"));
    }
    if secs > MAX.as_secs_f64() {
        return Err(format!("duration `{shown}` is too long"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("invalid duration `{shown}`"))
}

/// Parses `"500ms"`, `"90s"`, `"10m"`, `"2h"`, `"30d"` or a bare number of seconds.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    if t.len() > MAX_TEXT {
        return Err("invalid duration (too long a text)".into());
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("invalid duration `{t}`"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => {
            return Err(format!(
                "invalid duration unit in `{t}` (use ms, s, m, h or d)"
            ));
        }
    };
    from_secs(secs, t)
}

/// Parses a JSON duration: a number of seconds or a duration string.
pub fn from_json(v: &serde_json::Value) -> Result<Duration, String> {
    match v {
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(f) => from_secs(f, &n.to_string()),
            None => Err("invalid duration".to_string()),
        },
        serde_json::Value::String(s) => parse(s),
        _ => Err("a duration is a number of seconds or a string like \"90s\"".into()),
    }
}

/// Formats a duration in the largest whole unit: `"90d"`, `"2h"`, `"90s"`, `"500ms"`.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60)] {
        if s >= size && s.is_multiple_of(size) {
            return format!("{}{unit}", s / size);
        }
    }
    format!("{s}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse("30d").unwrap(), Duration::from_secs(30 * 86400));
        assert_eq!(parse("12").unwrap(), Duration::from_secs(12));
        assert!(parse("10x").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn out_of_range_is_an_error_not_a_panic() {
        for t in [
            "99999999999999999999d",
            "999999999999999999999999h",
            "99999999999999d",
            "106751991168d",
            "1e300",
            "18446744073709551616",
            "-1",
            "NaN",
            "inf",
            &"9".repeat(10_000),
        ] {
            assert!(parse(t).is_err(), "{t}");
        }
        for v in [
            serde_json::json!(1e300),
            serde_json::json!(1.8e19),
            serde_json::json!(-1),
            serde_json::json!(u64::MAX),
        ] {
            assert!(from_json(&v).is_err(), "{v}");
        }
        assert_eq!(parse("36500d").unwrap(), Duration::from_secs(36500 * 86400));
    }

    #[test]
    fn formats_round_trip() {
        for s in ["90d", "2h", "10m", "90s", "500ms"] {
            assert_eq!(format(parse(s).unwrap()), s);
        }
    }
}
