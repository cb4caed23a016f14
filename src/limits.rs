//! Rate limits and the stream cap of §10, kept in memory per instance.
//!
//! A limit `N` per window admits at most `N` requests of a key in any
//! window of that length, window edges included: each key keeps the times
//! of its last admitted requests (a sliding-window log, at most `N` of
//! them), and a request is admitted when fewer than `N` fall in the window
//! that ends now. A token bucket (GCRA) with a burst of `N` cannot promise
//! that: a full bucket plus what refills during the window admits up to
//! `2N - 1` (docs/notes/exact-rate-limits.md). The state stays bounded
//! whatever keys an attacker rotates through.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

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

/// Keys one limiter keeps at most, and admission times over all its keys.
/// Keys whose window holds no admission are dropped (pruned every
/// [`PRUNE_EVERY`] checks); if more than this remain recent, the state
/// starts afresh (every key gets its allowance back: memory stays bounded,
/// about 8 bytes a time, 32 MiB at most).
pub const MAX_KEYS: usize = 100_000;
pub const MAX_TIMES: usize = 1 << 22;
const PRUNE_EVERY: u64 = 1024;
const SHARDS: usize = 16;

/// The admission times of the keys of one shard, in nanoseconds since the
/// limiter was made, oldest first.
#[derive(Default)]
struct Shard {
    keys: HashMap<u64, VecDeque<u64>>,
    times: usize,
}

/// One keyed limit. Keys are hashed with a per-process random key to a
/// fixed-size `u64` (no key text is kept).
pub struct Limiter {
    rate: Rate,
    shards: Box<[Mutex<Shard>]>,
    epoch: Instant,
    hasher: std::collections::hash_map::RandomState,
    checks: AtomicU64,
}

impl Limiter {
    pub fn new(rate: Rate) -> Self {
        Self {
            rate,
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            epoch: Instant::now(),
            hasher: Default::default(),
            checks: AtomicU64::new(0),
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Counts one request of `key`: `Err(wait)` when over the limit, `wait`
    /// being when the oldest admission in the window leaves it.
    pub fn check(&self, key: &[u8]) -> Result<(), Duration> {
        self.check_at(key, self.epoch.elapsed())
    }

    /// [`Limiter::check`] at `now`, measured from the limiter's start.
    fn check_at(&self, key: &[u8], now: Duration) -> Result<(), Duration> {
        let Rate::Every { n, window } = self.rate else {
            return Ok(());
        };
        let k = self.hasher.hash_one(key);
        let now = now.as_nanos() as u64;
        let window = window.as_nanos() as u64;
        let r = {
            let mut shard = self.shards[k as usize % SHARDS].lock();
            let shard = &mut *shard;
            let log = shard.keys.entry(k).or_default();
            // Admissions at or before `now - window` are outside the window
            // `(now - window, now]`.
            let mut gone = 0;
            while log.front().is_some_and(|&t| t + window <= now) {
                log.pop_front();
                gone += 1;
            }
            let r = if log.len() < n as usize {
                log.push_back(now);
                Ok(())
            } else {
                let oldest = log.front().copied().unwrap_or(now);
                Err(Duration::from_nanos(oldest + window - now))
            };
            let added = usize::from(r.is_ok());
            shard.times = (shard.times + added).saturating_sub(gone);
            r
        };
        if self.checks.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            self.prune_at(now);
        }
        r
    }

    /// Drops the keys with no admission left in their window; starts
    /// afresh if more than [`MAX_KEYS`] keys or [`MAX_TIMES`] times remain.
    pub fn prune(&self) {
        self.prune_at(self.epoch.elapsed().as_nanos() as u64);
    }

    fn prune_at(&self, now: u64) {
        let Rate::Every { window, .. } = self.rate else {
            return;
        };
        let window = window.as_nanos() as u64;
        let (mut keys, mut times) = (0, 0);
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard
                .keys
                .retain(|_, log| log.back().is_some_and(|&t| t + window > now));
            if shard.keys.capacity() > 4 * shard.keys.len() + 64 {
                shard.keys.shrink_to_fit();
            }
            keys += shard.keys.len();
            times += shard.times;
        }
        if keys > MAX_KEYS || times > MAX_TIMES {
            for shard in self.shards.iter() {
                *shard.lock() = Shard::default();
            }
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().keys.len()).sum()
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
            wait > Duration::from_secs(59) && wait <= Duration::from_secs(60),
            "{wait:?}"
        );
        assert!(l.check(b"b").is_ok(), "keys are separate");
        let off = Limiter::new(Rate::Off);
        for _ in 0..10_000 {
            assert!(off.check(b"a").is_ok());
        }
        assert!(off.is_empty());
    }

    /// At most `n` admitted in any window of `w` ending at one of `times`
    /// (the windows that matter: each starts just after an admission).
    fn most_in_any_window(admitted: &[Duration], w: Duration) -> usize {
        admitted
            .iter()
            .map(|&end| {
                admitted
                    .iter()
                    .filter(|&&t| t <= end && t + w > end)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn window_edges_admit_n_not_n_plus_refill() {
        let ms = Duration::from_millis;
        let l = Limiter::new(Rate::parse("10/s").unwrap());
        // A full burst at 0 ms, then nothing until the window has passed.
        for _ in 0..10 {
            assert!(l.check_at(b"k", ms(0)).is_ok());
        }
        for at in [1, 100, 500, 999] {
            let wait = l.check_at(b"k", ms(at)).unwrap_err();
            assert_eq!(wait, ms(1000 - at), "at {at} ms");
        }
        let just_before = Duration::from_nanos(999_999_999);
        assert!(l.check_at(b"k", just_before).is_err());
        // At 1000 ms the burst is one window old: ten more, no more.
        for _ in 0..10 {
            assert!(l.check_at(b"k", ms(1000)).is_ok());
        }
        assert!(l.check_at(b"k", ms(1000)).is_err());

        // Spread out, then a burst at the edge: the burst gets only what the
        // window ending there leaves (a token bucket would give 10 more).
        let l = Limiter::new(Rate::parse("10/s").unwrap());
        for i in 0..10 {
            assert!(l.check_at(b"k", ms(500 + i * 50)).is_ok());
        }
        let burst = |at| (0..20).filter(|_| l.check_at(b"k", ms(at)).is_ok()).count();
        assert_eq!(burst(1499), 0, "all ten are in the window");
        assert_eq!(burst(1500), 1, "the one at 500 ms has left it");
        assert_eq!(burst(1549), 0);
        assert_eq!(burst(1550), 1);
    }

    #[test]
    fn no_window_holds_more_than_n_whatever_the_arrivals() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(36);
        let w = Duration::from_secs(1);
        for n in [1u32, 3, 10] {
            let l = Limiter::new(Rate::Every { n, window: w });
            let mut now = Duration::ZERO;
            let mut admitted = Vec::new();
            for _ in 0..5_000 {
                now += Duration::from_micros(rng.random_range(0..(400_000 / n as u64)));
                let in_window = admitted.iter().filter(|&&t| t + w > now).count();
                let r = l.check_at(b"k", now);
                // Exact both ways: refused only when the window is full.
                assert_eq!(r.is_ok(), in_window < n as usize, "n={n} at {now:?}");
                if r.is_ok() {
                    admitted.push(now);
                }
            }
            assert_eq!(most_in_any_window(&admitted, w), n as usize);
        }
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
