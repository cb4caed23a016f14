//! A sliding-window rate limit of one endpoint in this instance (§13
//! `rate_limit`): at most `max` sends in any window of `window_ms`.

use std::collections::VecDeque;

use crate::domain::endpoints::RateLimit;

#[derive(Debug, Default)]
pub struct Window {
    /// Times (ms) of the sends in the last window, oldest first.
    sent: VecDeque<i64>,
}

impl Window {
    /// Takes a send at `now` if the limit has room (`Ok`), or says when
    /// it will have room (`Err(at)`).
    pub fn take(&mut self, limit: RateLimit, now: i64) -> Result<(), i64> {
        while self
            .sent
            .front()
            .is_some_and(|t| *t + limit.window_ms <= now)
        {
            self.sent.pop_front();
        }
        if self.sent.len() < limit.max as usize {
            self.sent.push_back(now);
            return Ok(());
        }
        let first = self.sent.front().copied().unwrap_or(now);
        Err(first + limit.window_ms)
    }

    /// When `limit` has room again, if it has none at `now` (nothing is
    /// taken).
    pub fn full_until(&self, limit: RateLimit, now: i64) -> Option<i64> {
        let live = self.sent.iter().filter(|t| **t + limit.window_ms > now);
        let first = live.clone().next().copied()?;
        (live.count() >= limit.max as usize).then_some(first + limit.window_ms)
    }

    /// Whether it holds no send any more at `now` (may be forgotten).
    pub fn is_idle(&self, now: i64, window_ms: i64) -> bool {
        self.sent.back().is_none_or(|t| *t + window_ms <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_max_in_any_window_and_room_when_the_oldest_leaves() {
        let lim = RateLimit {
            max: 2,
            window_ms: 1000,
        };
        let mut w = Window::default();
        assert_eq!(w.take(lim, 0), Ok(()));
        assert_eq!(w.take(lim, 400), Ok(()));
        assert_eq!(w.take(lim, 500), Err(1000));
        assert_eq!(w.take(lim, 999), Err(1000));
        assert_eq!(w.take(lim, 1000), Ok(()));
        assert_eq!(w.take(lim, 1100), Err(1400));
        assert_eq!(w.full_until(lim, 1100), Some(1400));
        assert_eq!(w.full_until(lim, 1400), None);
        assert!(!w.is_idle(1500, 1000));
        assert!(w.is_idle(2000, 1000));
    }
}
