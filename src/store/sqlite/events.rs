//! Events as the dashboard lists them, and redelivery of one.

use super::*;
use crate::domain::status::EventStatus;

impl Deliveries for SqliteStore {
    fn list_events(
        &self,
        chatbot_id: &str,
        filter: EventFilter,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<EventSummary>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT id, type, created_at, payload, status, attempts, next_attempt_at, seq FROM events
                 WHERE chatbot_id = ?1 AND (?2 IS NULL OR status = ?2) AND (?5 IS NULL OR type = ?5)
                   AND (?6 IS NULL OR id = ?6) AND seq < ?3 ORDER BY seq DESC LIMIT ?4",
            )?;
            let args = params![
                chatbot_id,
                filter.status.map(EventStatus::as_str),
                cursor.unwrap_or(i64::MAX),
                limit as i64 + 1,
                filter.event_type,
                filter.event_id
            ];
            let rows = s.query_map(args, |r| {
                Ok((summary_row(r)?, r.get::<_, i64>(7)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move {
            let mut rows = r?;
            let next_cursor = if rows.len() > limit {
                rows.truncate(limit);
                rows.last().map(|(_, s)| s.to_string())
            } else {
                None
            };
            Ok(Page {
                data: rows.into_iter().map(|(e, _)| e).collect(),
                next_cursor,
            })
        })
    }

    fn get_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
    ) -> BoxFut<'_, StoreResult<(EventSummary, Vec<AttemptRow>)>> {
        let r = self.read(|c| {
            // One snapshot: the event's status and its attempts are
            // written by one commit and read together.
            let snapshot = c.unchecked_transaction()?;
            let ev = c
                .prepare_cached(
                    "SELECT id, type, created_at, payload, status, attempts, next_attempt_at FROM events
                     WHERE id = ?1 AND chatbot_id = ?2",
                )?
                .query_row([event_id, chatbot_id], summary_row)
                .optional()?;
            let Some(ev) = ev else { return Ok(None) };
            let mut s = c.prepare_cached(
                "SELECT number, at, status_code, duration_ms, error, response_excerpt, request_headers FROM attempts
                 WHERE event_id = ?1 ORDER BY number",
            )?;
            let attempts = s
                .query_map([event_id], |r| {
                    Ok(AttemptRow {
                        number: r.get(0)?,
                        at: r.get(1)?,
                        status_code: r.get(2)?,
                        duration_ms: r.get(3)?,
                        error: r.get(4)?,
                        response_excerpt: r.get(5)?,
                        request_headers: r.get(6)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(s);
            snapshot.commit()?;
            Ok(Some((ev, attempts)))
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn redeliver(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        let (bid, eid) = (chatbot_id.to_string(), event_id.to_string());
        let hub = self.hub.clone();
        Box::pin(async move {
            self.write(move |c| {
                let row: Option<(EventStatus, String)> = c
                    .query_row(
                        "SELECT status, conversation_id FROM events WHERE id = ?1 AND chatbot_id = ?2",
                        [&eid, &bid],
                        |r| Ok((status_col(r, 0)?, r.get(1)?)),
                    )
                    .optional()?;
                let Some((status, conv)) = row else {
                    return Err(StoreError::NotFound);
                };
                if status.is_active() {
                    // Already queued: make it due now.
                    c.execute("UPDATE events SET next_attempt_at = ?2 WHERE id = ?1", params![eid, now_ms])?;
                    return Ok(());
                }
                c.execute(
                    "UPDATE events SET status = 'pending', next_attempt_at = ?2, leased_until = 0, attempt_base = attempts,
                     is_head = NOT EXISTS (SELECT 1 FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?3 AND status IN ('pending', 'failed'))
                     WHERE id = ?1",
                    params![eid, now_ms, conv],
                )?;
                Ok(())
            })
            .await?;
            self.claims.lock().cold_at(0);
            hub.new_events.notify_one();
            Ok(())
        })
    }

    fn redeliver_all(
        &self,
        chatbot_id: &str,
        status: EventStatus,
        since: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<u64>> {
        Box::pin(self.redeliver_all_impl(chatbot_id.to_string(), status, since, now_ms))
    }

    fn enqueue_event(&self, event: NewEvent) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(self.enqueue_event_impl(event))
    }
}
