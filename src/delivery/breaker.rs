//! One endpoint's admission state, as a pure state machine: how many
//! deliveries may start now (the per-endpoint concurrency limit) and the
//! circuit breaker that stops hammering an endpoint that keeps failing.
//!
//! Closed: up to `limit` in flight. After `threshold` consecutive failures
//! the circuit opens and nothing starts for a rest; then one probe goes out.
//! A probe that succeeds closes the circuit; one that fails opens it again
//! for twice as long (from `Rest::first` up to `Rest::max`), so a receiver
//! that comes back soon is found soon and one that stays down is left alone.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Closed,
    Open { until: Instant },
    Probing,
}

#[derive(Debug, Clone)]
pub struct Breaker {
    state: State,
    failures: u32,
    /// Times opened since the last success.
    opens: u32,
    in_flight: usize,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: State::Closed,
            failures: 0,
            opens: 0,
            in_flight: 0,
        }
    }
}

/// How long an open circuit rests: `first`, doubling with every failed
/// probe, at most `max`.
#[derive(Debug, Clone, Copy)]
pub struct Rest {
    pub first: Duration,
    pub max: Duration,
}

impl Rest {
    fn after(&self, opens: u32) -> Duration {
        let doublings = opens.saturating_sub(1).min(16);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// Consecutive failures that open an endpoint's circuit.
pub const THRESHOLD: u32 = 5;
/// How long an open circuit rests before a probe: 1 s, doubling with each
/// failed probe up to 30 s.
pub const REST: Rest = Rest {
    first: Duration::from_secs(1),
    max: Duration::from_secs(30),
};

/// What a finished attempt tells the breaker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    Success,
    Failure,
    /// The endpoint was disabled (`410 Gone`): nothing goes there until it is
    /// re-enabled, so the breaker starts afresh.
    Disabled,
}

impl Breaker {
    /// How many more deliveries may start at `now`.
    pub fn room(&self, limit: usize, now: Instant) -> usize {
        match self.state {
            State::Closed => limit.saturating_sub(self.in_flight),
            State::Open { until } if now < until => 0,
            State::Open { .. } => 1,
            State::Probing => 0,
        }
    }

    /// When an open circuit lets a probe through, if it is open.
    pub fn reopens_at(&self) -> Option<Instant> {
        match self.state {
            State::Open { until } => Some(until),
            _ => None,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// A delivery starts; returns whether it is the probe of an open circuit.
    pub fn start(&mut self, now: Instant) -> bool {
        self.in_flight += 1;
        match self.state {
            State::Open { until } if now >= until => {
                self.state = State::Probing;
                true
            }
            _ => false,
        }
    }

    /// A delivery finished, with the service's [`THRESHOLD`] and [`REST`].
    pub fn finished(&mut self, probe: bool, outcome: Outcome, now: Instant) {
        self.finish(probe, outcome, now, THRESHOLD, REST);
    }

    /// A delivery finished.
    pub fn finish(
        &mut self,
        probe: bool,
        outcome: Outcome,
        now: Instant,
        threshold: u32,
        rest: Rest,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Success | Outcome::Disabled => {
                self.state = State::Closed;
                self.failures = 0;
                self.opens = 0;
            }
            Outcome::Failure if probe => self.open(now, rest),
            Outcome::Failure => {
                if self.state == State::Closed {
                    self.failures += 1;
                    if self.failures >= threshold {
                        self.open(now, rest);
                    }
                }
            }
        }
    }

    /// A delivery that started was not sent after all (its conversation
    /// was erased): its room is free again, and a probe's circuit is open
    /// as it was, so that the next delivery probes.
    pub fn cancel(&mut self, probe: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if probe && self.state == State::Probing {
            self.state = State::Open {
                until: Instant::now(),
            };
        }
    }

    fn open(&mut self, now: Instant, rest: Rest) {
        self.opens = self.opens.saturating_add(1);
        self.state = State::Open {
            until: now + rest.after(self.opens),
        };
    }

    /// Whether the circuit is open or probing (the endpoint is failing).
    pub fn is_tripped(&self) -> bool {
        self.state != State::Closed
    }

    /// Forgets the failures (the endpoint changed): closed again, with the
    /// deliveries in flight still counted.
    pub fn reset(&mut self) {
        self.state = State::Closed;
        self.failures = 0;
    }

    /// Nothing in flight and nothing remembered: the entry can be dropped.
    pub fn is_idle(&self) -> bool {
        self.in_flight == 0 && self.failures == 0 && self.state == State::Closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REST: Rest = Rest {
        first: Duration::from_secs(30),
        max: Duration::from_secs(30),
    };
    const FIRST: Duration = REST.first;

    #[test]
    fn limits_concurrency_while_closed() {
        let now = Instant::now();
        let mut b = Breaker::default();
        assert_eq!(b.room(2, now), 2);
        assert!(!b.start(now));
        assert!(!b.start(now));
        assert_eq!(b.room(2, now), 0);
        b.finish(false, Outcome::Success, now, 5, REST);
        assert_eq!(b.room(2, now), 1);
    }

    #[test]
    fn opens_after_threshold_then_probes_once() {
        let now = Instant::now();
        let mut b = Breaker::default();
        for _ in 0..3 {
            b.start(now);
            b.finish(false, Outcome::Failure, now, 3, REST);
        }
        assert_eq!(b.room(8, now), 0, "open");
        assert_eq!(b.reopens_at(), Some(now + FIRST));
        let later = now + FIRST;
        assert_eq!(b.room(8, later), 1, "one probe after the rest");
        assert!(b.start(later));
        assert_eq!(b.room(8, later), 0, "only one probe at a time");
        b.finish(true, Outcome::Failure, later, 3, REST);
        assert_eq!(b.room(8, later), 0, "a failed probe opens it again");
        let again = later + FIRST;
        assert!(b.start(again));
        b.finish(true, Outcome::Success, again, 3, REST);
        assert_eq!(b.room(8, again), 8, "a good probe closes it");
        assert!(b.is_idle());
    }

    #[test]
    fn success_resets_the_failure_count() {
        let now = Instant::now();
        let mut b = Breaker::default();
        for outcome in [Outcome::Failure, Outcome::Failure, Outcome::Success] {
            b.start(now);
            b.finish(false, outcome, now, 3, REST);
        }
        for _ in 0..2 {
            b.start(now);
            b.finish(false, Outcome::Failure, now, 3, REST);
        }
        assert_eq!(b.room(4, now), 4, "two failures in a row stay closed");
    }

    #[test]
    fn late_failures_of_an_open_circuit_do_not_extend_it() {
        let now = Instant::now();
        let mut b = Breaker::default();
        b.start(now);
        b.start(now);
        b.finish(false, Outcome::Failure, now, 1, REST);
        let later = now + Duration::from_secs(10);
        b.finish(false, Outcome::Failure, later, 1, REST);
        assert_eq!(b.reopens_at(), Some(now + FIRST));
    }

    #[test]
    fn reset_closes_the_circuit_and_keeps_the_in_flight_count() {
        let now = Instant::now();
        let mut b = Breaker::default();
        b.start(now);
        b.start(now);
        b.finish(false, Outcome::Failure, now, 1, REST);
        assert!(b.is_tripped());
        b.reset();
        assert!(!b.is_tripped());
        assert_eq!(b.room(3, now), 2);
    }

    #[test]
    fn disabled_endpoint_starts_afresh() {
        let now = Instant::now();
        let mut b = Breaker::default();
        b.start(now);
        b.finish(false, Outcome::Failure, now, 1, REST);
        b.start(now + FIRST);
        b.finish(true, Outcome::Disabled, now + FIRST, 1, REST);
        assert!(b.is_idle());
    }

    #[test]
    fn each_failed_probe_doubles_the_rest_up_to_its_limit() {
        let rest = Rest {
            first: Duration::from_secs(1),
            max: Duration::from_secs(5),
        };
        let mut now = Instant::now();
        let mut b = Breaker::default();
        b.start(now);
        b.finish(false, Outcome::Failure, now, 1, rest);
        let mut rests = Vec::new();
        for _ in 0..4 {
            let until = b.reopens_at().expect("open");
            rests.push((until - now).as_secs());
            now = until;
            assert!(b.start(now), "the probe");
            b.finish(true, Outcome::Failure, now, 1, rest);
        }
        assert_eq!(rests, [1, 2, 4, 5]);
        let until = b.reopens_at().expect("open");
        assert!(b.start(until));
        b.finish(true, Outcome::Success, until, 1, rest);
        b.start(until);
        b.finish(false, Outcome::Failure, until, 1, rest);
        assert_eq!(
            b.reopens_at(),
            Some(until + rest.first),
            "a success starts over"
        );
    }
}
