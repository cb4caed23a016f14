//! The retry policy, as pure functions: exponential backoff with jitter
//! from `backon`, and `Retry-After` honoured up to the maximum delay.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Growth factor between attempts. With the defaults (5 s first, 12 h cap,
/// 12 attempts) the schedule spans about two days.
pub const FACTOR: f32 = 3.0;

/// Delay before attempt `attempts_made + 1`, after `attempts_made` failed
/// attempts. `seed` drives the jitter (random in production, fixed in tests).
pub fn delay(attempts_made: u32, min: Duration, max: Duration, seed: u64) -> Duration {
    let n = attempts_made.max(1) as usize;
    let mut b = ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_factor(FACTOR)
        .with_jitter()
        .with_jitter_seed(seed)
        .without_max_times()
        .build();
    b.nth(n - 1).unwrap_or(max).min(max)
}

/// Delay before attempt `attempts_made + 1` when the receiver may have
/// asked for one with `Retry-After` (§4): the longer of the backoff's own
/// delay and `Retry-After` capped at `max`, so a receiver can stretch the
/// schedule but never shorten it.
pub fn next_delay(
    attempts_made: u32,
    min: Duration,
    max: Duration,
    seed: u64,
    retry_after: Option<Duration>,
) -> Duration {
    let backoff = delay(attempts_made, min, max, seed);
    match retry_after {
        Some(r) => backoff.max(r.min(max)),
        None => backoff,
    }
}

/// A `Retry-After` value (seconds, or an HTTP date) clamped to `max`.
pub fn retry_after(value: &str, now: std::time::SystemTime, max: Duration) -> Option<Duration> {
    let v = value.trim();
    let d = if let Ok(secs) = v.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        let at = httpdate(v)?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(d.min(max))
}

fn httpdate(v: &str) -> Option<std::time::SystemTime> {
    let t = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let secs = u64::try_from(t.timestamp()).ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(5);
    const MAX: Duration = Duration::from_secs(12 * 3600);

    #[test]
    fn grows_within_jitter_bounds_and_caps() {
        for seed in 0..50 {
            let mut base = 5.0f64;
            for n in 1..=11u32 {
                let d = delay(n, MIN, MAX, seed).as_secs_f64();
                let cap = MAX.as_secs_f64();
                assert!(
                    d >= base.min(cap) - 1e-6 && d <= (2.0 * base).min(cap) + 1e-6,
                    "n={n} d={d} base={base}"
                );
                base *= FACTOR as f64;
            }
        }
    }

    #[test]
    fn default_schedule_spans_about_two_days() {
        let total: f64 = (1..12u32)
            .map(|n| delay(n, MIN, MAX, 7).as_secs_f64())
            .sum();
        assert!(total > 36.0 * 3600.0 && total < 4.0 * 86400.0, "{total}");
    }

    #[test]
    fn retry_after_is_clamped() {
        let now = std::time::SystemTime::now();
        assert_eq!(retry_after("7", now, MAX), Some(Duration::from_secs(7)));
        assert_eq!(retry_after("999999", now, MAX), Some(MAX));
        assert_eq!(retry_after("soon", now, MAX), None);
        assert_eq!(retry_after("-3", now, MAX), None);
    }

    #[test]
    fn retry_after_accepts_an_http_date() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_450);
        // 30 s after `now`.
        let d = retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now, MAX);
        assert_eq!(d, Some(Duration::from_secs(30)));
        // A date in the past means: now.
        let later = now + Duration::from_secs(3600);
        let d = retry_after("Wed, 21 Oct 2015 07:28:00 GMT", later, MAX);
        assert_eq!(d, Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_never_shortens_the_schedule() {
        for seed in 0..20 {
            for n in 1..=11u32 {
                let backoff = delay(n, MIN, MAX, seed);
                for ra in [0, 1, 3] {
                    let d = next_delay(n, MIN, MAX, seed, Some(Duration::from_secs(ra)));
                    assert_eq!(d, backoff, "n={n} retry-after={ra}");
                }
                let long = next_delay(n, MIN, MAX, seed, Some(Duration::from_secs(86400 * 5)));
                assert_eq!(long, MAX);
            }
        }
        // Retry-After longer than the backoff (but under the cap) is honoured.
        let d = next_delay(1, MIN, MAX, 3, Some(Duration::from_secs(600)));
        assert_eq!(d, Duration::from_secs(600));
        // The whole default schedule still spans about two days when every
        // answer says `Retry-After: 0`.
        let total: f64 = (1..12u32)
            .map(|n| next_delay(n, MIN, MAX, 7, Some(Duration::ZERO)).as_secs_f64())
            .sum();
        assert!(total > 36.0 * 3600.0, "{total}");
    }

    #[test]
    fn first_retry_waits_at_least_the_minimum() {
        for seed in 0..20 {
            let d = delay(1, MIN, MAX, seed);
            assert!(d >= MIN && d < 2 * MIN, "{d:?}");
        }
        assert_eq!(delay(30, MIN, MAX, 1), MAX);
    }
}
