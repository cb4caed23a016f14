//! The data lifecycle on SQLite: erasure of one conversation now, and the
//! retention purge in small writer jobs.
//!
//! A purge job is one job of the writer's group commit, so every click
//! queued behind it waits for it: a job deletes conversations one by one
//! and stops after [`JOB_BUDGET`] (or [`PURGE_BATCH`] of them), and the
//! next job is sent only when the last one has committed and a pause in
//! proportion to it has passed ([`pace`]), so the clicks that arrive
//! meanwhile run in batches of their own.

use crate::store::{Lifecycle, StoreFut};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStore, writer_cache};
use crate::store::pace;
use crate::store::{PURGE_BATCH, StoreError, StoreResult};

/// Page cache of each connection, in KiB (SQLite's default is 2,000): a
/// store holding a million conversations has indexes of hundreds of MB,
/// and a click's lookups and inserts touch pages all over them.
pub(super) const PAGE_CACHE_KIB: i64 = 16 * 1024;

/// Longest a purge job keeps the writer (the wait it adds to a click).
const JOB_BUDGET: Duration = Duration::from_millis(2);

/// One page of a chatbot's expired conversations, from where the last page
/// ended, read in the order of `conversations_by_age_id` (no sort).
const PAGE: &str = "SELECT created_at, id FROM conversations c
     WHERE chatbot_id = ?1 AND created_at < ?2 AND (created_at, id) > (?3, ?4)
     ORDER BY created_at, id LIMIT ?5";

/// Everything keyed by a conversation, children first.
const DELETES: &[&str] = &[
    "DELETE FROM interaction_idempotency WHERE interaction_id IN (SELECT id FROM interactions WHERE conversation_id = ?1)",
    "DELETE FROM interactions WHERE conversation_id = ?1",
    "DELETE FROM response_idempotency WHERE event_id IN (SELECT id FROM events WHERE conversation_id = ?1)",
    "DELETE FROM response_uses WHERE event_id IN (SELECT id FROM events WHERE conversation_id = ?1)",
    "DELETE FROM attempts WHERE event_id IN (SELECT id FROM events WHERE conversation_id = ?1)",
    "DELETE FROM delivery_attempts WHERE delivery_seq IN (SELECT d.seq FROM deliveries d WHERE d.event_seq IN (SELECT seq FROM events WHERE conversation_id = ?1))",
    "DELETE FROM deliveries WHERE event_seq IN (SELECT seq FROM events WHERE conversation_id = ?1)",
    "DELETE FROM events WHERE conversation_id = ?1",
    "DELETE FROM stream_events WHERE conversation_id = ?1",
    "DELETE FROM messages WHERE conversation_id = ?1",
    "DELETE FROM conversations WHERE id = ?1",
];

/// Deletes conversation `id` with everything in it.
fn delete_conversation(c: &Connection, id: &str) -> StoreResult<()> {
    for sql in DELETES {
        c.prepare_cached(sql).and_then(|mut s| s.execute([id]))?;
    }
    Ok(())
}

fn has_undelivered(c: &Connection, id: &str) -> StoreResult<bool> {
    c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?1 AND status IN ('pending', 'failed'))",
    )
    .and_then(|mut s| s.query_row([id], |r| r.get(0)))
    .map_err(StoreError::from)
}

impl SqliteStore {
    /// `DELETE /api/v1/conversations/{cid}`: in one durable job; the
    /// undelivered events it deleted leave the claims.
    pub(super) async fn erase(&self, chatbot_id: String, cid: String) -> StoreResult<()> {
        let events = self
            .write_decided(true, move |c| {
                let owner: Option<String> = c
                    .prepare_cached("SELECT chatbot_id FROM conversations WHERE id = ?1")
                    .and_then(|mut s| s.query_row([&cid], |r| r.get(0)).optional())
                    ?;
                if owner.as_deref() != Some(chatbot_id.as_str()) {
                    return Err(StoreError::NotFound);
                }
                let events: Vec<crate::domain::ids::EventId> = c
                    .prepare_cached(
                        "SELECT id FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?1 AND status IN ('pending', 'failed')",
                    )
                    .and_then(|mut s| {
                        s.query_map([&cid], |r| r.get(0))
                            .and_then(|rows| rows.collect())
                    })
                    ?;
                // Its messages, its conversation and its count of
                // undelivered events are in the writer's caches.
                writer_cache::clear();
                delete_conversation(c, &cid)?;
                Ok(events)
            })
            .await?;
        self.claims.lock().forget(&events);
        self.visitors.invalidate();
        Ok(())
    }

    /// One pass of the retention purge; returns the conversations deleted.
    pub(super) async fn purge_pass(&self, now_ms: i64) -> StoreResult<u64> {
        let bots: Vec<(String, i64)> = self.read(|c| {
            c.prepare_cached("SELECT id, retention_ms FROM chatbots")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })?;
        let mut deleted = 0u64;
        for (bot, retention_ms) in bots {
            let before = now_ms.saturating_sub(retention_ms);
            // Keyset over (created_at, id): a conversation kept for an
            // undelivered event is passed once per pass, not every batch.
            let mut after = (i64::MIN, String::new());
            loop {
                let ids: Vec<(i64, String)> = self.read(|c| {
                    c.prepare_cached(PAGE)?
                        .query_map(
                            params![bot, before, after.0, after.1, PURGE_BATCH as i64],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )?
                        .collect()
                })?;
                let Some(last) = ids.last().cloned() else {
                    break;
                };
                let full = ids.len() == PURGE_BATCH;
                let mut left: Vec<String> = ids.into_iter().map(|(_, id)| id).collect();
                while !left.is_empty() {
                    let batch = std::mem::take(&mut left);
                    let sent = Instant::now();
                    let (n, rest) = self
                        .write_decided(false, move |c| {
                            let t0 = Instant::now();
                            let mut n = 0u64;
                            let mut i = 0;
                            while i < batch.len() && (i == 0 || t0.elapsed() < JOB_BUDGET) {
                                if !has_undelivered(c, &batch[i])? {
                                    if n == 0 {
                                        writer_cache::clear();
                                    }
                                    delete_conversation(c, &batch[i])?;
                                    n += 1;
                                }
                                i += 1;
                            }
                            Ok((n, batch[i..].to_vec()))
                        })
                        .await?;
                    deleted += n;
                    left = rest;
                    // From the job's sending to its commit (its wait
                    // behind clicks and the sync it shared included): the
                    // busier the writer, the longer the pause.
                    pace::pause(sent.elapsed()).await;
                }
                if !full {
                    break;
                }
                after = last;
            }
        }
        if deleted > 0 {
            self.visitors.invalidate();
        }
        Ok(deleted)
    }
}

impl Lifecycle for SqliteStore {
    fn erase_conversation(&self, chatbot_id: &str, conversation_id: &str) -> StoreFut<'_, ()> {
        Box::pin(self.erase(chatbot_id.to_string(), conversation_id.to_string()))
    }

    fn purge_expired(&self, now_ms: i64) -> StoreFut<'_, u64> {
        Box::pin(self.purge_pass(now_ms))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::PAGE;

    /// A page of the purge is read from the index where the last page
    /// ended: no sort of every conversation sharing a `created_at`.
    #[test]
    fn a_purge_page_is_read_in_index_order_without_a_sort() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.db");
        let path = path.to_str().expect("utf-8 path");
        let store = super::SqliteStore::open(path, Arc::new(crate::hub::Hub::default()));
        assert!(store.is_ok(), "the store opens and migrates");
        let c = rusqlite::Connection::open(path).expect("open");
        let mut st = c
            .prepare(&format!("EXPLAIN QUERY PLAN {PAGE}"))
            .expect("plan");
        let plan: Vec<String> = st
            .query_map(rusqlite::params!["cb", 0, 0, "", 100], |r| {
                r.get::<_, String>(3)
            })
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("plan rows");
        let plan = plan.join(" / ");
        assert!(plan.contains("conversations_by_age_id"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}
