//! A read-through cache of rows that change rarely (a visitor token's
//! conversation with its chatbot's allowed origins: only a takeover, a
//! change of the chatbot, an erasure or the purge changes it). Every such
//! change empties the cache after its commit; a generation number keeps a
//! read that raced with the change from putting the old row back.
//!
//! On SQLite every change goes through this process, which owns the file.
//! On PostgreSQL another instance may commit one: it says so in the same
//! transaction (a notification every instance hears, see
//! `postgres::notify`), and while this instance's listening connection is
//! down (when it may miss one) the cache is [`ReadCache::deaf`]: it keeps
//! nothing and answers nothing until it hears again, empty.

use std::num::NonZeroUsize;

use parking_lot::Mutex;

/// Visitor tokens kept, on either store.
pub const VISITOR_ROWS: NonZeroUsize = NonZeroUsize::new(16_384).unwrap();

pub struct ReadCache<V> {
    inner: Mutex<Inner<V>>,
}

struct Inner<V> {
    generation: u64,
    /// Changes may go unheard: nothing is kept or answered.
    deaf: bool,
    rows: lru::LruCache<String, V>,
}

impl<V: Clone> ReadCache<V> {
    pub fn new(capacity: NonZeroUsize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                generation: 0,
                deaf: false,
                rows: lru::LruCache::new(capacity),
            }),
        }
    }

    /// The cached row, or the generation to pass to [`Self::put`] after
    /// reading it from the table.
    pub fn get(&self, key: &str) -> Result<V, u64> {
        let mut g = self.inner.lock();
        let generation = g.generation;
        if g.deaf {
            return Err(generation);
        }
        g.rows.get(key).cloned().ok_or(generation)
    }

    /// Keeps a row read at `generation`, unless a change came since.
    pub fn put(&self, generation: u64, key: &str, value: &V) {
        let mut g = self.inner.lock();
        if g.generation == generation && !g.deaf {
            g.rows.put(key.to_string(), value.clone());
        }
    }

    /// After a change: everything read before it is forgotten.
    pub fn invalidate(&self) {
        let mut g = self.inner.lock();
        g.generation += 1;
        g.rows.clear();
    }

    /// Changes may go unheard from now on (a lost listening connection):
    /// everything is forgotten, and nothing is kept until [`Self::hearing`].
    pub fn deaf(&self) {
        let mut g = self.inner.lock();
        g.deaf = true;
        g.generation += 1;
        g.rows.clear();
    }

    /// Every change is heard again; what was read meanwhile is not kept.
    pub fn hearing(&self) {
        let mut g = self.inner.lock();
        g.deaf = false;
        g.generation += 1;
        g.rows.clear();
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

    #[test]
    fn a_deaf_cache_keeps_and_answers_nothing_until_it_hears_again() {
        let c = ReadCache::new(NonZeroUsize::new(4).unwrap());
        let generation = c.get("k").unwrap_err();
        c.put(generation, "k", &"before");
        assert_eq!(c.get("k"), Ok("before"));
        c.deaf();
        assert!(c.get("k").is_err(), "forgotten when it went deaf");
        let generation = c.get("k").unwrap_err();
        c.put(generation, "k", &"unheard");
        assert!(c.get("k").is_err());
        c.hearing();
        assert!(c.get("k").is_err(), "nothing read while deaf is kept");
        c.put(generation, "k", &"raced");
        assert!(c.get("k").is_err());
        let generation = c.get("k").unwrap_err();
        c.put(generation, "k", &"after");
        assert_eq!(c.get("k"), Ok("after"));
    }
}
