//! What the reviewers' dashboard adds to the store: bulk redelivery, events
//! without a conversation (`webhook.test`), and the admin's list of chatbots.

use rusqlite::params;

use super::*;
use crate::domain::status::EventStatus;
use crate::store::{EndpointSel, RedeliverAll};

impl SqliteStore {
    pub(super) async fn redeliver_all_impl(
        &self,
        chatbot_id: String,
        which: RedeliverAll,
        now_ms: i64,
    ) -> StoreResult<u64> {
        let RedeliverAll {
            status,
            since,
            endpoint,
        } = which;
        let signals = self.signals.clone();
        let n = self
            .write(move |c| {
                let since = since.unwrap_or(i64::MIN);
                let others = match &endpoint {
                    Some(EndpointSel::Default) => 0,
                    Some(EndpointSel::Other(id)) => redeliver_others(c, &chatbot_id, status, since, id, now_ms)?,
                    None => redeliver_others(c, &chatbot_id, status, since, "", now_ms)?,
                };
                if matches!(endpoint, Some(EndpointSel::Other(_))) {
                    return Ok(others);
                }
                if status == EventStatus::Failed {
                    // Already queued: due now.
                    let n = c
                        .execute(
                            "UPDATE events SET next_attempt_at = ?3
                             WHERE chatbot_id = ?1 AND status = 'failed' AND created_at >= ?2",
                            params![chatbot_id, since, now_ms],
                        )?;
                    return Ok(n as u64 + others);
                }
                let rows: Vec<(i64, String)> = c
                    .prepare_cached(
                        "SELECT seq, conversation_id FROM events
                         WHERE chatbot_id = ?1 AND status = 'dead' AND created_at >= ?2 ORDER BY seq",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![chatbot_id, since], |r| Ok((r.get(0)?, r.get(1)?)))?
                            .collect::<rusqlite::Result<Vec<_>>>()
                    })?;
                // In order: the first of a conversation with nothing queued
                // becomes its head, the later ones wait behind it.
                for (seq, conv) in &rows {
                    c.prepare_cached(
                        "UPDATE events SET status = 'pending', next_attempt_at = ?2, leased_until = 0, attempt_base = attempts,
                         is_head = NOT EXISTS (SELECT 1 FROM events WHERE conversation_id = ?3 AND status IN ('pending', 'failed'))
                         WHERE seq = ?1",
                    )
                    .and_then(|mut s| s.execute(params![seq, now_ms, conv]))?;
                    writer_cache::forget_active(conv);
                }
                Ok(rows.len() as u64 + others)
            })
            .await?;
        if n > 0 {
            self.claims.lock().cold_at(0);
            signals.events_due();
            signals.deliveries_due();
        }
        Ok(n)
    }

    pub(super) async fn enqueue_event_impl(&self, event: NewEvent) -> StoreResult<()> {
        self.write_with(true, true, move |c| insert_event(c, event), Option::take)
            .await?;
        Ok(())
    }

    pub(super) fn list_chatbots_impl(
        &self,
        limit: usize,
        cursor: Option<String>,
    ) -> StoreResult<Page<Chatbot>> {
        let rows = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHATBOT_COLS} FROM chatbots WHERE (?1 IS NULL OR id < ?1) ORDER BY id DESC LIMIT ?2"
            ))?
            .query_map(params![cursor, limit as i64 + 1], chatbot_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(crate::store::page_by_key(rows, limit, |b| b.id.to_string()))
    }
}

/// Redelivers the deliveries to endpoints other than the default (one, or
/// all for `""`) in `status` of events created at or after `since`. Their
/// order per conversation is kept by the claim, so no head to set.
fn redeliver_others(
    c: &Connection,
    chatbot_id: &str,
    status: EventStatus,
    since: i64,
    endpoint_id: &str,
    now_ms: i64,
) -> StoreResult<u64> {
    let n = c.execute(
        "UPDATE deliveries SET next_attempt_at = ?4,
           status = CASE WHEN status = 'dead' THEN 'pending' ELSE status END,
           attempt_base = CASE WHEN status = 'dead' THEN attempts ELSE attempt_base END,
           leased_until = CASE WHEN status = 'dead' THEN 0 ELSE leased_until END,
           is_head = CASE WHEN status = 'dead' THEN 1 ELSE is_head END
         WHERE chatbot_id = ?1 AND status = ?2 AND (?5 = '' OR endpoint_id = ?5)
           AND EXISTS (SELECT 1 FROM events e WHERE e.seq = deliveries.event_seq AND e.created_at >= ?3)",
        params![chatbot_id, status.as_str(), since, now_ms, endpoint_id],
    )?;
    Ok(n as u64)
}
