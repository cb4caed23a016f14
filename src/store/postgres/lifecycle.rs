//! The data lifecycle on PostgreSQL: erasure of one conversation now, and
//! the retention purge, one short transaction per batch of conversations
//! with a pause after each ([`pace`]).

use crate::store::{Lifecycle, StoreFut};
use std::time::Instant;

use sqlx::Row;

use super::{PostgresStore, Tx, notify};
use crate::store::pace;
use crate::store::{StoreError, StoreResult};

/// Conversations one purge transaction deletes: its locks, its WAL and the
/// CPU it takes from clicks stay small (a tenth of a second at most on a
/// busy machine), and the pause after it lets the clicks' commits through.
const PURGE_BATCH: usize = 100;

/// One page of a chatbot's expired conversations, from where the last page
/// ended, read in the order of `conversations_by_age_id` (no sort), locked,
/// skipping any another instance's purge or a new event holds.
pub const PAGE: &str = "SELECT created_at, id FROM conversations c
     WHERE chatbot_id = $1 AND created_at < $2 AND (created_at, id) > ($3, $4)
     ORDER BY created_at, id LIMIT $5 FOR UPDATE SKIP LOCKED";

/// Everything keyed by the conversations `$1`, children first.
pub const DELETES: &[&str] = &[
    "DELETE FROM interaction_idempotency WHERE interaction_id IN (SELECT id FROM interactions WHERE conversation_id = ANY($1))",
    "DELETE FROM interactions WHERE conversation_id = ANY($1)",
    "DELETE FROM response_idempotency WHERE event_id IN (SELECT id FROM events WHERE conversation_id = ANY($1))",
    "DELETE FROM response_uses WHERE event_id IN (SELECT id FROM events WHERE conversation_id = ANY($1))",
    "DELETE FROM attempts WHERE event_id IN (SELECT id FROM events WHERE conversation_id = ANY($1))",
    "DELETE FROM delivery_attempts WHERE delivery_seq IN (SELECT d.seq FROM deliveries d WHERE d.event_seq IN (SELECT seq FROM events WHERE conversation_id = ANY($1)))",
    "DELETE FROM deliveries WHERE event_seq IN (SELECT seq FROM events WHERE conversation_id = ANY($1))",
    "DELETE FROM unrouted_events WHERE seq IN (SELECT seq FROM events WHERE conversation_id = ANY($1))",
    "DELETE FROM events WHERE conversation_id = ANY($1)",
    "DELETE FROM stream_events WHERE conversation_id = ANY($1)",
    "DELETE FROM messages WHERE conversation_id = ANY($1)",
    "DELETE FROM conversations WHERE id = ANY($1)",
];

async fn delete_conversations(tx: &mut Tx<'_>, ids: &[String]) -> StoreResult<()> {
    for sql in DELETES {
        sqlx::query(sql).bind(ids).execute(&mut **tx).await?;
    }
    Ok(())
}

impl PostgresStore {
    /// `DELETE /api/v1/conversations/{cid}`. Locks its messages, then the
    /// conversation, in the order a click takes them (a click locks its
    /// message, then the conversation for its event), so the two wait for
    /// each other instead of deadlocking; a click that got in first has
    /// its event deleted too.
    pub(super) async fn erase(&self, chatbot_id: &str, cid: &str) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let owner: Option<String> =
            sqlx::query_scalar("SELECT chatbot_id FROM conversations WHERE id = $1")
                .bind(cid)
                .fetch_optional(&mut *tx)
                .await?;
        if owner.as_deref() != Some(chatbot_id) {
            return Err(StoreError::NotFound);
        }
        sqlx::query("SELECT 1 FROM messages WHERE conversation_id = $1 ORDER BY id FOR UPDATE")
            .bind(cid)
            .execute(&mut *tx)
            .await?;
        let locked = sqlx::query("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE")
            .bind(cid)
            .fetch_optional(&mut *tx)
            .await?;
        if locked.is_none() {
            // Erased or purged meanwhile by another transaction.
            return Err(StoreError::NotFound);
        }
        delete_conversations(&mut tx, &[cid.to_string()]).await?;
        // Heard by the other instances on commit: they drop a delivery of
        // it they had claimed and end its open streams.
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(notify::CHANNEL)
            .bind(notify::erased(&self.instance, cid))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.visitors.invalidate();
        Ok(())
    }

    /// One pass of the retention purge; returns the conversations deleted.
    pub(super) async fn purge_pass(&self, now_ms: i64) -> StoreResult<u64> {
        let bots: Vec<(String, i64)> = sqlx::query("SELECT id, retention_ms FROM chatbots")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()?;
        let mut deleted = 0u64;
        for (bot, retention_ms) in bots {
            let before = now_ms.saturating_sub(retention_ms);
            // Keyset over (created_at, id): a conversation kept for an
            // undelivered event is passed once per pass, not every batch.
            let mut after = (i64::MIN, String::new());
            loop {
                let began = Instant::now();
                let mut tx = self.pool.begin().await?;
                let rows = sqlx::query(PAGE)
                    .bind(&bot)
                    .bind(before)
                    .bind(after.0)
                    .bind(&after.1)
                    .bind(PURGE_BATCH as i64)
                    .fetch_all(&mut *tx)
                    .await?;
                let Some(last) = rows.last() else {
                    break;
                };
                after = (last.try_get(0)?, last.try_get(1)?);
                let full = rows.len() == PURGE_BATCH;
                let mut ids: Vec<String> = rows
                    .iter()
                    .map(|r| r.try_get(1))
                    .collect::<Result<_, sqlx::Error>>()?;
                // Read after the locks (a fresh snapshot): an event
                // committed just before them keeps its conversation.
                let kept: Vec<String> = sqlx::query_scalar(
                    "SELECT DISTINCT conversation_id FROM events
                     WHERE conversation_id = ANY($1) AND status IN ('pending', 'failed')",
                )
                .bind(&ids)
                .fetch_all(&mut *tx)
                .await?;
                ids.retain(|id| !kept.contains(id));
                if !ids.is_empty() {
                    delete_conversations(&mut tx, &ids).await?;
                    self.tokens_changed(&mut tx).await?;
                }
                tx.commit().await?;
                if !ids.is_empty() {
                    self.visitors.invalidate();
                }
                deleted += ids.len() as u64;
                if !full {
                    break;
                }
                pace::pause(began.elapsed()).await;
            }
        }
        Ok(deleted)
    }
}

impl Lifecycle for PostgresStore {
    fn erase_conversation(&self, chatbot_id: &str, conversation_id: &str) -> StoreFut<'_, ()> {
        let (bot, cid) = (chatbot_id.to_string(), conversation_id.to_string());
        Box::pin(async move { self.erase(&bot, &cid).await })
    }

    fn purge_expired(&self, now_ms: i64) -> StoreFut<'_, u64> {
        Box::pin(self.purge_pass(now_ms))
    }
}
