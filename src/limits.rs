//! Rate limits and the stream cap of §10, kept in memory per instance:
//! keyed GCRA limiters from `governor`, with state that stays bounded
//! whatever keys an attacker rotates through.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use parking_lot::{Mutex, RwLock};

/// A limit as the flags write it: `N/s`, `N/min`, `N/h`, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Off,
    Every { n: u32, window: Duration },
}

/// The largest `N` of a limit.
const MAX_N: u32 = 1_000_000;

impl Rate {
    pub fn parse(text: &str) -> Result<Rate, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("off") {
            return Ok(Rate::Off);
        }
        let bad = || format!("a limit is N/s, N/min, N/h or off, got `{t}`");
        let (n, unit) = t.split_once('/').ok_or_else(bad)?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        if n == 0 || n > MAX_N {
            return Err(format!("N of a limit is 1 to {MAX_N}, got `{t}`"));
        }
        let window = match unit.trim() {
            "s" => Duration::from_secs(1),
            "min" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        Ok(Rate::Every { n, window })
    }

    /// At most `n` at once, refilled at `n` per window (GCRA: one every
    /// `window / n`).
    fn quota(self) -> Option<Quota> {
        match self {
            Rate::Off => None,
            Rate::Every { n, window } => {
                let burst = NonZeroU32::new(n)?;
                Quota::with_period(window / n).map(|q| q.allow_burst(burst))
            }
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Off => f.write_str("off"),
            Rate::Every { n, window } => {
                let unit = match window.as_secs() {
                    1 => "s",
                    60 => "min",
                    _ => "h",
                };
                write!(f, "{n}/{unit}")
            }
        }
    }
}

type Keyed = RateLimiter<u64, DefaultKeyedStateStore<u64>, DefaultClock>;

/// Keys one limiter keeps at most. Entries are dropped as soon as their
/// key is back to a full allowance (pruned every [`PRUNE_EVERY`] checks);
/// if more than this many keys are still recent, the state starts afresh
/// (every key gets its allowance back: memory stays bounded).
pub const MAX_KEYS: usize = 100_000;
const PRUNE_EVERY: u64 = 1024;

/// One keyed limit. Keys are hashed with a per-process random key to a
/// fixed-size `u64` (no key text is kept).
pub struct Limiter {
    rate: Rate,
    quota: Option<Quota>,
    state: RwLock<Arc<Keyed>>,
    hasher: std::collections::hash_map::RandomState,
    checks: AtomicU64,
}

impl Limiter {
    pub fn new(rate: Rate) -> Self {
        let quota = rate.quota();
        let fresh = quota.unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN));
        Self {
            rate,
            quota,
            state: RwLock::new(Arc::new(RateLimiter::keyed(fresh))),
            hasher: Default::default(),
            checks: AtomicU64::new(0),
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Counts one request of `key`: `Err(wait)` when over the limit.
    pub fn check(&self, key: &[u8]) -> Result<(), Duration> {
        if self.quota.is_none() {
            return Ok(());
        }
        let k = self.hasher.hash_one(key);
        let state = self.state.read().clone();
        let r = state
            .check_key(&k)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()));
        if self.checks.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            self.prune();
        }
        r
    }

    /// Drops the keys back at a full allowance; starts afresh if more than
    /// [`MAX_KEYS`] remain.
    pub fn prune(&self) {
        let Some(quota) = self.quota else { return };
        let state = self.state.read().clone();
        state.retain_recent();
        if state.len() > MAX_KEYS {
            *self.state.write() = Arc::new(RateLimiter::keyed(quota));
        } else {
            state.shrink_to_fit();
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.state.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Open live streams per visitor token (conversation), at most `max` each.
pub struct Streams {
    max: Option<usize>,
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream's place; dropping it frees the place.
pub struct StreamSlot {
    streams: Arc<Streams>,
    key: String,
}

impl Streams {
    pub fn new(max: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Takes a place for `key`, or `None` when it has `max` open already.
    pub fn acquire(self: &Arc<Self>, key: &str) -> Option<StreamSlot> {
        let mut open = self.open.lock();
        let n = open.entry(key.to_string()).or_insert(0);
        if self.max.is_some_and(|max| *n >= max) {
            return None;
        }
        *n += 1;
        Some(StreamSlot {
            streams: self.clone(),
            key: key.to_string(),
        })
    }

    /// Streams open now for `key`.
    pub fn open(&self, key: &str) -> usize {
        self.open.lock().get(key).copied().unwrap_or(0)
    }

    /// Keys with a stream open (entries are removed at zero).
    pub fn keys(&self) -> usize {
        self.open.lock().len()
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock();
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// The limits one instance enforces.
pub struct Limits {
    pub conversations: Limiter,
    pub visitor: Limiter,
    pub api_key: Limiter,
    pub streams: Arc<Streams>,
}

impl Limits {
    pub fn new(
        conversations: Rate,
        visitor: Rate,
        api_key: Rate,
        max_streams: Option<usize>,
    ) -> Self {
        Self {
            conversations: Limiter::new(conversations),
            visitor: Limiter::new(visitor),
            api_key: Limiter::new(api_key),
            streams: Streams::new(max_streams),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rates() {
        assert_eq!(Rate::parse("off"), Ok(Rate::Off));
        assert_eq!(
            Rate::parse("30/min"),
            Ok(Rate::Every {
                n: 30,
                window: Duration::from_secs(60)
            })
        );
        assert_eq!(
            Rate::parse("10/s").map(|r| r.to_string()),
            Ok("10/s".into())
        );
        assert_eq!(Rate::parse("5/h").map(|r| r.to_string()), Ok("5/h".into()));
        for bad in [
            "",
            "0/s",
            "10",
            "10/d",
            "x/s",
            "-1/s",
            "99999999999/s",
            "10/",
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allows_n_then_refuses_with_a_wait() {
        let l = Limiter::new(Rate::parse("3/min").unwrap());
        for _ in 0..3 {
            assert!(l.check(b"a").is_ok());
        }
        let wait = l.check(b"a").unwrap_err();
        assert!(
            wait > Duration::from_secs(10) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert!(l.check(b"b").is_ok(), "keys are separate");
        let off = Limiter::new(Rate::Off);
        for _ in 0..10_000 {
            assert!(off.check(b"a").is_ok());
        }
        assert!(off.is_empty());
    }

    #[test]
    fn rotating_keys_cannot_grow_the_state_without_bound() {
        let l = Limiter::new(Rate::parse("1/h").unwrap());
        for i in 0..(MAX_KEYS as u64 * 3) {
            let _ = l.check(&i.to_le_bytes());
            if i % 997 == 0 {
                assert!(l.len() <= MAX_KEYS + PRUNE_EVERY as usize, "{}", l.len());
            }
        }
    }

    #[test]
    fn stream_places_are_freed_on_drop() {
        let s = Streams::new(Some(2));
        let a = s.acquire("c").unwrap();
        let b = s.acquire("c").unwrap();
        assert!(s.acquire("c").is_none());
        assert!(s.acquire("d").is_some());
        drop(a);
        assert_eq!(s.open("c"), 1);
        let _c = s.acquire("c").unwrap();
        drop(b);
        drop(_c);
        assert_eq!(s.keys(), 0);
    }
}
