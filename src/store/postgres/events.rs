//! Events as the dashboard lists them, redelivery of one, and events of their own lane.

use super::*;
use crate::domain::status::EventStatus;

impl Deliveries for PostgresStore {
    fn list_events(
        &self,
        chatbot_id: &str,
        filter: EventFilter,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<EventSummary>>> {
        let bid = chatbot_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, type, created_at, payload, status, attempts, next_attempt_at, seq FROM events
                 WHERE chatbot_id = $1 AND ($2::text IS NULL OR status = $2) AND ($5::text IS NULL OR type = $5)
                   AND ($6::text IS NULL OR id = $6) AND seq < $3 ORDER BY seq DESC LIMIT $4",
            )
            .bind(&bid)
            .bind(filter.status.map(EventStatus::as_str))
            .bind(cursor.unwrap_or(i64::MAX))
            .bind(limit as i64 + 1)
            .bind(&filter.event_type)
            .bind(&filter.event_id)
            .fetch_all(&self.pool)
            .await?;
            let out = rows
                .iter()
                .map(|r| Ok((summary_row(r)?, r.try_get::<i64, _>(7)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok(page_of(out, limit))
        })
    }

    fn get_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
    ) -> BoxFut<'_, StoreResult<(EventSummary, Vec<AttemptRow>)>> {
        let (bid, eid) = (chatbot_id.to_string(), event_id.to_string());
        Box::pin(async move {
            // One snapshot: the event's status and its attempts are written
            // by one commit and read together.
            let mut tx = self.pool.begin().await?;
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
            let row = sqlx::query(
                "SELECT id, type, created_at, payload, status, attempts, next_attempt_at FROM events
                 WHERE id = $1 AND chatbot_id = $2",
            )
            .bind(&eid)
            .bind(&bid)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            let ev = summary_row(&row)?;
            let rows = sqlx::query(
                "SELECT number, at, status_code, duration_ms, error, response_excerpt, request_headers FROM attempts
                 WHERE event_id = $1 ORDER BY number",
            )
            .bind(&eid)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            let attempts = rows
                .iter()
                .map(|r| {
                    Ok(AttemptRow {
                        number: r.try_get::<i64, _>(0)? as u32,
                        at: r.try_get(1)?,
                        status_code: r.try_get::<Option<i64>, _>(2)?.map(|c| c as u16),
                        duration_ms: r.try_get(3)?,
                        error: r.try_get(4)?,
                        response_excerpt: r.try_get(5)?,
                        request_headers: r.try_get(6)?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok((ev, attempts))
        })
    }

    fn redeliver(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        let (bid, eid) = (chatbot_id.to_string(), event_id.to_string());
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query(
                "SELECT status, conversation_id FROM events WHERE id = $1 AND chatbot_id = $2",
            )
            .bind(&eid)
            .bind(&bid)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            let status: EventStatus = status_col(&row, 0)?;
            let conv: String = row.try_get(1)?;
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
            self.commit(tx, &[], &[], true).await?;
            self.hub.new_events.notify_one();
            Ok(())
        })
    }
    fn enqueue_event(&self, event: NewEvent) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            // An event of its own lane (`webhook.test`): no conversation row
            // to lock, and it heads its lane at once.
            let mut tx = self.pool.begin().await?;
            sqlx::query(
                "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head, traceparent)
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $6, 1, $7)",
            )
            .bind(&event.id)
            .bind(&event.chatbot_id)
            .bind(&event.conversation_id)
            .bind(event.event_type)
            .bind(&event.payload)
            .bind(event.created_at)
            .bind(&event.trace)
            .execute(&mut *tx)
            .await?;
            let mut notes = notify::Notes::new(&self.instance);
            notes.due();
            notes.send(&mut tx).await?;
            tx.commit().await?;
            self.hub.new_events.notify_one();
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
        Box::pin(dashboard::redeliver_all(
            self,
            chatbot_id.to_string(),
            status,
            since,
            now_ms,
        ))
    }
}
