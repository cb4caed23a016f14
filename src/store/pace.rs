//! The pace of the retention purge: after each bounded piece of work (a
//! writer job on SQLite, a transaction on PostgreSQL) the purge pauses in
//! proportion to the time the piece took, so it takes at most [`SHARE`] of
//! the writer (SQLite) or of a database connection and its CPU
//! (PostgreSQL), and clicks never queue behind a run of purge work.

use std::time::Duration;

/// Most of the time the purge keeps its resource busy.
pub const SHARE: f64 = 0.25;
/// Shortest pause: at least one timer tick, so queued clicks run between
/// two pieces even when a piece took almost no time.
const MIN_PAUSE: Duration = Duration::from_millis(2);
/// Longest pause (a piece slowed by a busy machine does not stop the purge).
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The pause after a piece of purge work that took `busy`.
pub fn pause_after(busy: Duration) -> Duration {
    busy.mul_f64((1.0 - SHARE) / SHARE)
        .clamp(MIN_PAUSE, MAX_PAUSE)
}

/// Pauses after a piece of purge work that took `busy`.
pub async fn pause(busy: Duration) {
    tokio::time::sleep(pause_after(busy)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_keeps_the_purge_to_its_share() {
        let busy = Duration::from_millis(10);
        let p = pause_after(busy);
        let share = busy.as_secs_f64() / (busy + p).as_secs_f64();
        assert!((share - SHARE).abs() < 1e-9, "{share}");
        assert_eq!(pause_after(Duration::ZERO), MIN_PAUSE);
        assert_eq!(pause_after(Duration::from_secs(5)), MAX_PAUSE);
    }
}
