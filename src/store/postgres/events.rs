//! Events as the dashboard lists them, redelivery of one, and events of their own lane.

use super::*;
use crate::domain::status::EventStatus;
use crate::store::{DeliveryRow, EndpointSel, EventDetail, list_events_sql};

impl Deliveries for PostgresStore {
    fn list_events(&self, ask: PageAsk<EventFilter>) -> StoreFut<'_, Page<EventSummary>> {
        let (bid, filter, limit, cursor) = (ask.chatbot_id, ask.filter, ask.limit, ask.cursor);
        Box::pin(async move {
            let sql = list_events_sql(filter.endpoint.as_ref(), true);
            let mut q = sqlx::query(&sql)
                .bind(&bid)
                .bind(filter.status.map(EventStatus::as_str))
                .bind(cursor.unwrap_or(i64::MAX))
                .bind(limit as i64 + 1)
                .bind(&filter.event_type)
                .bind(&filter.event_id);
            if let Some(EndpointSel::Other(id)) = &filter.endpoint {
                q = q.bind(id.as_str());
            }
            let rows = q.fetch_all(&self.pool).await?;
            let out = rows
                .iter()
                .map(|r| Ok((listed_row(r)?, r.try_get::<i64, _>(7)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok(page_of(out, limit))
        })
    }

    fn get_event(&self, chatbot_id: &str, event_id: &str) -> StoreFut<'_, EventDetail> {
        let (bid, eid) = (chatbot_id.to_string(), event_id.to_string());
        Box::pin(async move {
            // One snapshot: the deliveries' states and their attempts are
            // written by one commit and read together.
            let mut tx = self.pool.begin().await?;
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
            let row = sqlx::query(
                "SELECT id, type, created_at, payload, status, attempts, next_attempt_at, seq FROM events
                 WHERE id = $1 AND chatbot_id = $2",
            )
            .bind(&eid)
            .bind(&bid)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            let ev = summary_row(&row)?;
            let seq: i64 = row.try_get(7)?;
            let attempts = sqlx::query(
                "SELECT NULL::text, number, at, status_code, duration_ms, error, response_excerpt, request_headers FROM attempts
                 WHERE event_id = $1
                 UNION ALL
                 SELECT endpoint_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers
                 FROM delivery_attempts WHERE event_id = $1",
            )
            .bind(&eid)
            .fetch_all(&mut *tx)
            .await?;
            let others = sqlx::query(
                "SELECT endpoint_id, status, attempts, next_attempt_at FROM deliveries
                 WHERE event_seq = $1 ORDER BY seq",
            )
            .bind(seq)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            let attempts = attempts
                .iter()
                .map(|r| {
                    Ok(AttemptRow {
                        endpoint_id: r.try_get(0)?,
                        number: r.try_get::<i64, _>(1)? as u32,
                        at: r.try_get(2)?,
                        status_code: r.try_get::<Option<i64>, _>(3)?.map(|c| c as u16),
                        duration_ms: r.try_get(4)?,
                        error: r.try_get(5)?,
                        response_excerpt: r.try_get(6)?,
                        request_headers: r.try_get(7)?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            let others = others
                .iter()
                .map(|r| {
                    let status: EventStatus = status_col(r, 1)?;
                    Ok(DeliveryRow {
                        endpoint_id: Some(r.try_get(0)?),
                        status,
                        attempts: r.try_get::<i64, _>(2)? as u32,
                        next_attempt_at: status.is_active().then(|| r.try_get(3)).transpose()?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok(EventDetail::assemble(ev, others, attempts))
        })
    }

    fn redeliver(&self, r: Redeliver) -> StoreFut<'_, ()> {
        let (bid, eid, endpoint, now_ms) = (r.chatbot_id, r.event_id, r.endpoint, r.now_ms);
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query(
                "SELECT status, conversation_id, seq FROM events WHERE id = $1 AND chatbot_id = $2",
            )
            .bind(&eid)
            .bind(&bid)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            let status: EventStatus = status_col(&row, 0)?;
            let conv: String = row.try_get(1)?;
            let seq: i64 = row.try_get(2)?;
            let other = match &endpoint {
                Some(EndpointSel::Default) => None,
                Some(EndpointSel::Other(id)) => Some(id.as_str()),
                None => Some(""),
            };
            // The endpoints' locks before the conversation's, as a bulk
            // redelivery takes them.
            if let Some(other) = other {
                super::fanout::lock_chatbot_endpoints(&mut tx, &bid, other).await?;
            }
            let mut found = false;
            if status != EventStatus::Skipped
                && endpoint.as_ref().is_none_or(|e| *e == EndpointSel::Default)
            {
                found = true;
                lock_conversation(&mut tx, &conv).await?;
                if status.is_active() {
                    sqlx::query("UPDATE events SET next_attempt_at = $2 WHERE id = $1")
                        .bind(&eid)
                        .bind(now_ms)
                        .execute(&mut *tx)
                        .await?;
                } else {
                    sqlx::query(
                        "UPDATE events SET status = 'pending', next_attempt_at = $2, leased_until = 0, attempt_base = attempts,
                         is_head = CASE WHEN EXISTS (SELECT 1 FROM events WHERE conversation_id = $3 AND status IN ('pending', 'failed')) THEN 0 ELSE 1 END
                         WHERE id = $1",
                    )
                    .bind(&eid)
                    .bind(now_ms)
                    .bind(&conv)
                    .execute(&mut *tx)
                    .await?;
                }
            }
            if let Some(other) = other {
                let n = sqlx::query(
                    "UPDATE deliveries SET next_attempt_at = $2,
                       status = CASE WHEN status IN ('pending', 'failed') THEN status ELSE 'pending' END,
                       attempt_base = CASE WHEN status IN ('pending', 'failed') THEN attempt_base ELSE attempts END,
                       leased_until = CASE WHEN status IN ('pending', 'failed') THEN leased_until ELSE 0 END,
                       is_head = CASE WHEN status IN ('pending', 'failed') THEN is_head ELSE 1 END
                     WHERE event_seq = $1 AND ($3 = '' OR endpoint_id = $3)",
                )
                .bind(seq)
                .bind(now_ms)
                .bind(other)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if n > 0 {
                    super::fanout::one_head_per_pair(&mut tx, &bid, other, &conv).await?;
                }
                found |= n > 0;
            }
            if !found {
                return Err(StoreError::NotFound);
            }
            self.commit(tx, &[], &[], true).await?;
            self.signals.events_due();
            self.signals.deliveries_due();
            Ok(())
        })
    }
    fn enqueue_event(&self, event: NewEvent) -> StoreFut<'_, ()> {
        Box::pin(async move {
            // An event of its own lane (`webhook.test`): no conversation row
            // to lock, and it heads its lane at once.
            let mut tx = self.pool.begin().await?;
            insert_lane_event(&mut tx, &event, true).await?;
            let mut notes = notify::Notes::new(&self.instance);
            notes.due();
            notes.send(&mut tx).await?;
            tx.commit().await?;
            self.signals.events_due();
            self.signals.deliveries_due();
            Ok(())
        })
    }

    fn redeliver_all(&self, which: RedeliverAll) -> StoreFut<'_, u64> {
        Box::pin(dashboard::redeliver_all(self, which))
    }

    fn enqueue_event_to(&self, event: NewEvent, endpoint_id: &str) -> StoreFut<'_, ()> {
        let endpoint_id = endpoint_id.to_string();
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let known: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM endpoints WHERE id = $1 AND chatbot_id = $2 AND is_default = 0)",
            )
            .bind(&endpoint_id)
            .bind(&event.chatbot_id)
            .fetch_one(&mut *tx)
            .await?;
            if !known {
                return Err(StoreError::NotFound);
            }
            // The event, not sent to the default endpoint, and its one
            // delivery, routed already.
            let seq = insert_lane_event(&mut tx, &event, false).await?;
            sqlx::query(
                "INSERT INTO deliveries (event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at)
                 VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6)",
            )
            .bind(seq)
            .bind(&event.id)
            .bind(&endpoint_id)
            .bind(&event.chatbot_id)
            .bind(&event.conversation_id)
            .bind(event.created_at)
            .execute(&mut *tx)
            .await?;
            self.commit(tx, &[], &[], true).await?;
            self.signals.events_due();
            self.signals.deliveries_due();
            Ok(())
        })
    }
}

/// A row of the deliveries log: its status, attempts and next attempt
/// aggregated over its deliveries.
fn listed_row(r: &PgRow) -> Result<EventSummary, sqlx::Error> {
    Ok(EventSummary {
        event_id: r.try_get(0)?,
        event_type: r.try_get(1)?,
        created_at: r.try_get(2)?,
        payload: bytes::Bytes::from(r.try_get::<Vec<u8>, _>(3)?),
        status: status_col(r, 4)?,
        attempts: r.try_get::<i64, _>(5)? as u32,
        next_attempt_at: r.try_get(6)?,
    })
}

/// Inserts an event of its own lane (`webhook.test`), routed already (to
/// no endpoint but the one it is for): queued to the default endpoint and
/// heading its lane, or (`to_default` false) `skipped` there. Its row's
/// `seq`.
async fn insert_lane_event(
    tx: &mut sqlx::PgConnection,
    event: &NewEvent,
    to_default: bool,
) -> StoreResult<i64> {
    let (status, head) = if to_default {
        ("pending", 1i64)
    } else {
        ("skipped", 0)
    };
    Ok(sqlx::query_scalar(
        "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head, traceparent, routed)
         VALUES ($1, $2, $3, $4, $5, $6, $8, 0, $6, $9, $7, 1) RETURNING seq",
    )
    .bind(&event.id)
    .bind(&event.chatbot_id)
    .bind(&event.conversation_id)
    .bind(event.event_type)
    .bind(&event.payload)
    .bind(event.created_at)
    .bind(&event.trace)
    .bind(status)
    .bind(head)
    .fetch_one(&mut *tx)
    .await?)
}
