//! What the reviewers' dashboard adds to the store: bulk redelivery, events
//! without a conversation (`webhook.test`), and the admin's list of chatbots.

use rusqlite::params;

use super::*;
use crate::domain::status::EventStatus;
use crate::store::{EndpointSel, RedeliverAll};

impl SqliteStore {
    pub(super) async fn redeliver_all_impl(&self, which: RedeliverAll) -> StoreResult<u64> {
        let signals = self.signals.clone();
        let n = self
            .write(move |c| {
                let (chatbot_id, status) = (which.chatbot_id.as_str(), which.status);
                let (since, now_ms) = (which.since.unwrap_or(i64::MIN), which.now_ms);
                let others = match &which.endpoint {
                    Some(EndpointSel::Default) => 0,
                    Some(EndpointSel::Other(id)) => redeliver_others(c, &which, id)?,
                    None => redeliver_others(c, &which, "")?,
                };
                if matches!(which.endpoint, Some(EndpointSel::Other(_))) {
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
            self.claims.lock().deliveries.rescan();
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

/// A bulk redelivery's deliveries to endpoints other than the default: to
/// `endpoint_id`, or all for `""` (`event_detail::REDELIVER_OTHERS`).
fn redeliver_others(c: &Connection, w: &RedeliverAll, endpoint_id: &str) -> StoreResult<u64> {
    let sql = crate::store::event_detail::REDELIVER_OTHERS.replace('$', "?");
    let since = w.since.unwrap_or(i64::MIN);
    let n = c.prepare_cached(&sql)?.execute(params![
        w.chatbot_id.as_str(),
        w.status.as_str(),
        since,
        w.now_ms,
        endpoint_id
    ])?;
    if n > 0 {
        one_head_per_pair(c, w.chatbot_id.as_str(), endpoint_id, "")?;
    }
    Ok(n as u64)
}

/// [`crate::store::event_detail::ONE_HEAD_PER_PAIR`]: after a redelivery.
pub(super) fn one_head_per_pair(
    c: &Connection,
    chatbot_id: &str,
    endpoint: &str,
    conversation: &str,
) -> rusqlite::Result<()> {
    let sql = crate::store::event_detail::ONE_HEAD_PER_PAIR.replace('$', "?");
    c.prepare_cached(&sql)?
        .execute(params![chatbot_id, endpoint, conversation])?;
    Ok(())
}
