//! Events as the dashboard lists them, and redelivery of one.

use super::*;
use crate::domain::status::EventStatus;
use crate::store::{DeliveryRow, EndpointSel, EventDetail, list_events_sql};

impl Deliveries for SqliteStore {
    fn list_events(&self, ask: PageAsk<EventFilter>) -> StoreFut<'_, Page<EventSummary>> {
        let (chatbot_id, filter, limit) = (ask.chatbot_id.as_str(), &ask.filter, ask.limit);
        let r = self.read(|c| {
            let mut s = c.prepare_cached(&list_events_sql(filter.endpoint.as_ref(), false))?;
            let (status, cursor, limit) = (
                filter.status.map(EventStatus::as_str),
                ask.cursor.unwrap_or(i64::MAX),
                limit as i64 + 1,
            );
            let mut args: Vec<&dyn rusqlite::ToSql> = vec![
                &chatbot_id,
                &status,
                &cursor,
                &limit,
                &filter.event_type,
                &filter.event_id,
            ];
            if let Some(EndpointSel::Other(id)) = &filter.endpoint {
                args.push(id);
            }
            let rows = s.query_map(args.as_slice(), |r| {
                Ok((listed_row(r)?, r.get::<_, i64>(7)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move { Ok(crate::store::page_by_seq(r?, limit)) })
    }

    fn get_event(&self, chatbot_id: &str, event_id: &str) -> StoreFut<'_, EventDetail> {
        let r = self.read(|c| {
            // One snapshot: the deliveries' states and their attempts are
            // written by one commit and read together.
            let snapshot = c.unchecked_transaction()?;
            let ev = c
                .prepare_cached(
                    "SELECT id, type, created_at, payload, status, attempts, next_attempt_at, seq FROM events
                     WHERE id = ?1 AND chatbot_id = ?2",
                )?
                .query_row([event_id, chatbot_id], |r| Ok((summary_row(r)?, r.get::<_, i64>(7)?)))
                .optional()?;
            let Some((ev, seq)) = ev else { return Ok(None) };
            let attempts = c
                .prepare_cached(
                    "SELECT NULL, number, at, status_code, duration_ms, error, response_excerpt, request_headers FROM attempts
                     WHERE event_id = ?1
                     UNION ALL
                     SELECT endpoint_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers
                     FROM delivery_attempts WHERE delivery_seq IN (SELECT seq FROM deliveries WHERE event_seq = ?2)",
                )?
                .query_map(params![event_id, seq], attempt_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let others = c
                .prepare_cached(
                    "SELECT endpoint_id, status, attempts, next_attempt_at FROM deliveries
                     WHERE event_seq = ?1 ORDER BY seq",
                )?
                .query_map([seq], |r| {
                    let status: EventStatus = status_col(r, 1)?;
                    Ok(DeliveryRow {
                        endpoint_id: Some(r.get(0)?),
                        status,
                        attempts: r.get(2)?,
                        next_attempt_at: status.is_active().then_some(r.get(3)?),
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            snapshot.commit()?;
            Ok(Some(EventDetail::assemble(ev, others, attempts)))
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn redeliver(&self, r: Redeliver) -> StoreFut<'_, ()> {
        let (bid, eid, endpoint, now_ms) = (r.chatbot_id, r.event_id, r.endpoint, r.now_ms);
        let signals = self.signals.clone();
        Box::pin(async move {
            self.write(move |c| {
                let row: Option<(EventStatus, String, i64)> = c
                    .query_row(
                        "SELECT status, conversation_id, seq FROM events WHERE id = ?1 AND chatbot_id = ?2",
                        [eid.as_str(), bid.as_str()],
                        |r| Ok((status_col(r, 0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()?;
                let Some((status, conv, seq)) = row else {
                    return Err(StoreError::NotFound);
                };
                let mut found = false;
                if status != EventStatus::Skipped && endpoint.as_ref().is_none_or(|e| *e == EndpointSel::Default) {
                    found = true;
                    if status.is_active() {
                        // Already queued: make it due now.
                        c.execute("UPDATE events SET next_attempt_at = ?2 WHERE id = ?1", params![eid, now_ms])?;
                    } else {
                        c.execute(
                            "UPDATE events SET status = 'pending', next_attempt_at = ?2, leased_until = 0, attempt_base = attempts,
                             is_head = NOT EXISTS (SELECT 1 FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?3 AND status IN ('pending', 'failed'))
                             WHERE id = ?1",
                            params![eid, now_ms, conv],
                        )?;
                        writer_cache::forget_active(&conv);
                    }
                }
                let other = match &endpoint {
                    Some(EndpointSel::Default) => None,
                    Some(EndpointSel::Other(id)) => Some(id.as_str()),
                    None => Some(""),
                };
                if let Some(other) = other {
                    let n = c.execute(
                        "UPDATE deliveries SET next_attempt_at = ?2,
                           status = CASE WHEN status IN ('pending', 'failed') THEN status ELSE 'pending' END,
                           attempt_base = CASE WHEN status IN ('pending', 'failed') THEN attempt_base ELSE attempts END,
                           leased_until = CASE WHEN status IN ('pending', 'failed') THEN leased_until ELSE 0 END,
                           is_head = CASE WHEN status IN ('pending', 'failed') THEN is_head ELSE 1 END
                         WHERE event_seq = ?1 AND (?3 = '' OR endpoint_id = ?3)",
                        params![seq, now_ms, other],
                    )?;
                    if n > 0 {
                        super::dashboard::one_head_per_pair(c, &bid, other, &conv)?;
                    }
                    found |= n > 0;
                }
                if found { Ok(()) } else { Err(StoreError::NotFound) }
            })
            .await?;
            self.claims.lock().cold_at(0);
            signals.events_due();
            self.claims.lock().deliveries.rescan();
            signals.deliveries_due();
            Ok(())
        })
    }

    fn redeliver_all(&self, which: RedeliverAll) -> StoreFut<'_, u64> {
        Box::pin(self.redeliver_all_impl(which))
    }

    fn enqueue_event(&self, event: NewEvent) -> StoreFut<'_, ()> {
        Box::pin(self.enqueue_event_impl(event))
    }

    fn enqueue_event_to(&self, event: NewEvent, endpoint_id: &str) -> StoreFut<'_, ()> {
        let endpoint_id = endpoint_id.to_string();
        let signals = self.signals.clone();
        Box::pin(async move {
            self.write(move |c| {
                let known: bool = c.query_row(
                    "SELECT EXISTS (SELECT 1 FROM endpoints WHERE id = ?1 AND chatbot_id = ?2 AND is_default = 0)",
                    rusqlite::params![endpoint_id, event.chatbot_id],
                    |r| r.get(0),
                )?;
                if !known {
                    return Err(StoreError::NotFound);
                }
                // The event, not sent to the default endpoint, and its one
                // delivery, routed already.
                c.execute(
                    "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head, traceparent, routed)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'skipped', 0, ?6, 0, ?7, 1)",
                    params![event.id, event.chatbot_id, event.conversation_id, event.event_type, event.payload, event.created_at, event.trace],
                )?;
                let seq = c.last_insert_rowid();
                c.execute(
                    "INSERT INTO deliveries (event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6)",
                    params![seq, event.id, endpoint_id, event.chatbot_id, event.conversation_id, event.created_at],
                )?;
                Ok(())
            })
            .await?;
            signals.events_due();
            self.claims.lock().deliveries.rescan();
            signals.deliveries_due();
            Ok(())
        })
    }
}

/// A row of the deliveries log: its status, attempts and next attempt
/// aggregated over its deliveries.
fn listed_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EventSummary> {
    Ok(EventSummary {
        event_id: r.get(0)?,
        event_type: r.get(1)?,
        created_at: r.get(2)?,
        payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(3)?),
        status: status_col(r, 4)?,
        attempts: r.get(5)?,
        next_attempt_at: r.get(6)?,
    })
}

/// An attempt, to the default endpoint (a null endpoint id) or another.
fn attempt_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AttemptRow> {
    Ok(AttemptRow {
        endpoint_id: r.get(0)?,
        number: r.get(1)?,
        at: r.get(2)?,
        status_code: r.get(3)?,
        duration_ms: r.get(4)?,
        error: r.get(5)?,
        response_excerpt: r.get(6)?,
        request_headers: r.get(7)?,
    })
}
