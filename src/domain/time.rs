//! Timestamps: milliseconds since the Unix epoch inside, RFC 3339 UTC with
//! milliseconds outside.

use chrono::{DateTime, SecondsFormat, Utc};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// `2026-07-17T03:12:44.120Z`.
pub fn rfc3339(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an RFC 3339 timestamp into milliseconds since the Unix epoch.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_with_millis_and_z() {
        assert_eq!(
            super::rfc3339(1_752_721_964_120),
            "2025-07-17T03:12:44.120Z"
        );
    }
}
