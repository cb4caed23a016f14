//! A read-through cache of rows that change rarely and only through this
//! process (a visitor token's conversation with its chatbot's allowed
//! origins: only a takeover or a change of the chatbot changes it),
//! which owns the SQLite file. Every change empties the cache after its
//! commit; a generation number keeps a read that raced with the change from
//! putting the old row back.

use std::num::NonZeroUsize;

use parking_lot::Mutex;

pub struct ReadCache<V> {
    inner: Mutex<(u64, lru::LruCache<String, V>)>,
}

impl<V: Clone> ReadCache<V> {
    pub fn new(capacity: NonZeroUsize) -> Self {
        Self {
            inner: Mutex::new((0, lru::LruCache::new(capacity))),
        }
    }

    /// The cached row, or the generation to pass to [`Self::put`] after
    /// reading it from the table.
    pub fn get(&self, key: &str) -> Result<V, u64> {
        let mut g = self.inner.lock();
        let generation = g.0;
        g.1.get(key).cloned().ok_or(generation)
    }

    /// Keeps a row read at `generation`, unless a change came since.
    pub fn put(&self, generation: u64, key: &str, value: &V) {
        let mut g = self.inner.lock();
        if g.0 == generation {
            g.1.put(key.to_string(), value.clone());
        }
    }

    /// After a change: everything read before it is forgotten.
    pub fn invalidate(&self) {
        let mut g = self.inner.lock();
        g.0 += 1;
        g.1.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_raced_with_a_change_is_not_kept() {
        let c = ReadCache::new(NonZeroUsize::new(4).unwrap());
        let generation = c.get("k").unwrap_err();
        c.invalidate();
        c.put(generation, "k", &"old");
        assert!(c.get("k").is_err());
        let generation = c.get("k").unwrap_err();
        c.put(generation, "k", &"new");
        assert_eq!(c.get("k"), Ok("new"));
        c.invalidate();
        assert!(c.get("k").is_err());
    }
}
