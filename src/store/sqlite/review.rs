//! What a reviewer does from the dashboard: conversations searched, and one
//! delivery taken out of the queue to be sent now.

use super::claims::{One, Taken};
use super::*;

/// A conversation by id, visitor id, a part of the visitor's name or of a
/// message's text (`LIKE` is case-insensitive for ASCII in SQLite).
const SEARCH: &str =
    "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at,
       (SELECT max(m.created_at) FROM messages m WHERE m.conversation_id = c.id AND m.deleted = 0),
       (SELECT count(*) FROM interactions i WHERE i.conversation_id = c.id AND i.status = 'pending'
          AND (i.expires_at IS NULL OR i.expires_at >= ?2))
     FROM conversations c WHERE c.chatbot_id = ?1 AND (?3 IS NULL OR c.id < ?3)
       AND (c.id = ?4 OR c.visitor_id = ?4 OR c.visitor_name LIKE ?5 ESCAPE '\\'
            OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.deleted = 0
                       AND json_extract(m.doc, '$.text') LIKE ?5 ESCAPE '\\'))
     ORDER BY c.id DESC LIMIT ?6";

impl Review for SqliteStore {
    fn search_conversations(
        &self,
        chatbot_id: &str,
        query: String,
        limit: usize,
        cursor: Option<String>,
        now_ms: i64,
    ) -> StoreFut<'_, Page<ConversationSummary>> {
        let pattern = like_pattern(&query);
        let r = self.read(|c| {
            c.prepare_cached(SEARCH)?
                .query_map(
                    params![chatbot_id, now_ms, cursor, query, pattern, limit as i64 + 1],
                    |r| {
                        Ok(ConversationSummary {
                            conversation: conversation_row(r)?,
                            last_message_at: r.get(6)?,
                            pending_interactions: r.get(7)?,
                        })
                    },
                )?
                .collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move { Ok(page_by_key(r?, limit, |s| s.conversation.id.to_string())) })
    }

    fn claim_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
        lease_until: i64,
    ) -> StoreFut<'_, Option<Claimed>> {
        // Nothing is taken before the future runs (see `claim_due`).
        let (chatbot_id, event_id) = (chatbot_id.to_string(), event_id.to_string());
        Box::pin(async move {
            let Some(c) = self.take_for_send(&chatbot_id, &event_id, now_ms, lease_until)? else {
                return Ok(None);
            };
            let taken = Taken::unleased(&self.claims, vec![c]);
            // Written before it is sent, as a claim's lease is; back to the
            // table should this fail or the call be dropped meanwhile.
            let seqs = taken.items().iter().map(|c| c.seq).collect();
            self.mark_leased(seqs, lease_until).await?;
            Ok(taken.handed().pop())
        })
    }
}

impl SqliteStore {
    /// Event `event_id` leased in memory for a manual send, when it is the
    /// head of its conversation and no one else holds it.
    fn take_for_send(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
        lease_until: i64,
    ) -> StoreResult<Option<Claimed>> {
        // Leases live in memory (see `claims`): the event is taken there,
        // under the same lock a claim holds, so no claim hands it out too.
        let mut cl = self.claims.lock();
        cl.expire(now_ms);
        match cl.take_one(event_id, lease_until) {
            One::Held => Ok(None),
            One::Queued(c) if c.chatbot_id == chatbot_id => Ok(Some(c)),
            One::Queued(c) => {
                cl.give_back(vec![c]);
                Ok(None)
            }
            One::Free => self
                .read(|c| {
                    c.prepare_cached(
                        "SELECT seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base, traceparent FROM events
                         WHERE id = ?1 AND chatbot_id = ?2 AND is_head = 1 AND status IN ('pending', 'failed')
                           AND chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)",
                    )?
                    .query_row(params![event_id, chatbot_id], |r| claim_at(r, 7))
                    .optional()
                })
                .inspect(|found| {
                    if let Some(c) = found {
                        cl.leases.insert(c.event_id.clone(), lease_until);
                    }
                }),
        }
    }
}
