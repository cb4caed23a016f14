//! What a reviewer does from the dashboard: conversations searched, and one
//! delivery taken out of the queue to be sent now.

use super::*;

/// A conversation by id, visitor id, a part of the visitor's name or of a
/// message's text (any case).
const SEARCH: &str =
    "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at,
       (SELECT max(m.created_at) FROM messages m WHERE m.conversation_id = c.id AND m.deleted = 0),
       (SELECT count(*) FROM interactions i WHERE i.conversation_id = c.id AND i.status = 'pending'
          AND (i.expires_at IS NULL OR i.expires_at >= $2))
     FROM conversations c WHERE c.chatbot_id = $1 AND ($3::text IS NULL OR c.id < $3::text)
       AND (c.id = $4 OR c.visitor_id = $4 OR c.visitor_name ILIKE $5 ESCAPE '\\'
            OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.deleted = 0
                       AND (m.doc::jsonb ->> 'text') ILIKE $5 ESCAPE '\\'))
     ORDER BY c.id DESC LIMIT $6";

impl Review for PostgresStore {
    fn search_conversations(
        &self,
        chatbot_id: &str,
        query: String,
        limit: usize,
        cursor: Option<String>,
        now_ms: i64,
    ) -> StoreFut<'_, Page<ConversationSummary>> {
        let chatbot_id = chatbot_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(SEARCH)
                .bind(&chatbot_id)
                .bind(now_ms)
                .bind(&cursor)
                .bind(&query)
                .bind(like_pattern(&query))
                .bind(limit as i64 + 1)
                .fetch_all(&self.pool)
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(ConversationSummary {
                    conversation: conversation_row(r)?,
                    last_message_at: r.try_get(6)?,
                    pending_interactions: r.try_get(7)?,
                });
            }
            Ok(page_by_key(out, limit, |s| s.conversation.id.to_string()))
        })
    }

    fn claim_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
        lease_until: i64,
    ) -> StoreFut<'_, Option<Claimed>> {
        let (chatbot_id, event_id) = (chatbot_id.to_string(), event_id.to_string());
        Box::pin(async move {
            // As a claim does: only a row no one holds (a lease that ran
            // out counts its try, the holder may have sent it).
            let row = sqlx::query(
                "UPDATE events SET leased_until = $4,
                   attempts = attempts + CASE WHEN leased_until > 0 THEN 1 ELSE 0 END
                 WHERE id = $1 AND chatbot_id = $2 AND is_head = 1 AND status IN ('pending', 'failed')
                   AND leased_until <= $3
                   AND chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                 RETURNING seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base, traceparent",
            )
            .bind(&event_id)
            .bind(&chatbot_id)
            .bind(now_ms)
            .bind(lease_until)
            .fetch_optional(&self.pool)
            .await?;
            let Some(r) = row else {
                return Ok(None);
            };
            Ok(Some(Claimed {
                seq: r.try_get(0)?,
                event_id: r.try_get(1)?,
                chatbot_id: r.try_get(2)?,
                conversation_id: r.try_get(3)?,
                payload: bytes::Bytes::from(r.try_get::<Vec<u8>, _>(4)?),
                attempts: r.try_get::<i64, _>(5)? as u32,
                attempt_base: r.try_get::<i64, _>(6)? as u32,
                trace: r.try_get(7)?,
                bot: None,
            }))
        })
    }
}
