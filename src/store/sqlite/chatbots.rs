//! Instance metadata, chatbots and conversations.

use super::*;

/// The default endpoint's settings row forgets a pause once the chatbot's
/// endpoint is enabled again (by either route).
pub(super) const END_DEFAULT_PAUSE: &str = "UPDATE endpoints SET enabled = 1, disabled_reason = NULL WHERE chatbot_id = ?1 AND is_default = 1 AND enabled = 0";

impl Accounts for SqliteStore {
    fn meta_get_or_init(&self, key: &str, init: String) -> StoreFut<'_, String> {
        let key = key.to_string();
        Box::pin(self.write(move |c| {
            c.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES (?1, ?2)",
                params![key, init],
            )?;
            c.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .map_err(StoreError::from)
        }))
    }

    fn create_chatbot(&self, b: Chatbot, api_key_hash: String) -> StoreFut<'_, ()> {
        Box::pin(self.write(move |c| {
            c.execute(
                "INSERT INTO chatbots (id, name, webhook_url, retention_ms, api_key_hash, signing_secret, member_id, created_at, allowed_origins)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![b.id, b.name, b.webhook_url, b.retention_ms, api_key_hash, b.signing_secret, b.member_id, b.created_at, b.allowed_origins.to_stored()],
            )?;
            Ok(())
        }))
    }

    fn get_chatbot(&self, id: &str) -> StoreFut<'_, Chatbot> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHATBOT_COLS} FROM chatbots WHERE id = ?1"
            ))?
            .query_row([id], chatbot_row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn chatbot_by_key(&self, api_key_hash: &str) -> StoreFut<'_, Chatbot> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHATBOT_COLS} FROM chatbots WHERE api_key_hash = ?1"
            ))?
            .query_row([api_key_hash], chatbot_row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn update_chatbot(&self, b: Chatbot) -> StoreFut<'_, ()> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let enabled = !b.endpoint_disabled;
            let bot_id = b.id.clone();
            self.write(move |c| {
                let (prev, until) = match b.previous_secret {
                    Some((s, u)) => (Some(s), Some(u)),
                    None => (None, None),
                };
                let n = c
                    .execute(
                        "UPDATE chatbots SET name = ?2, webhook_url = ?3, retention_ms = ?4, signing_secret = ?5,
                         previous_secret = ?6, previous_until = ?7, endpoint_disabled = ?8, allowed_origins = ?9 WHERE id = ?1",
                        params![b.id, b.name, b.webhook_url, b.retention_ms, b.signing_secret, prev, until, b.endpoint_disabled as i64, b.allowed_origins.to_stored()],
                    )?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                if !b.endpoint_disabled {
                    // A pause of the default endpoint ends with it.
                    c.prepare_cached(END_DEFAULT_PAUSE)?.execute([&b.id])?;
                }
                Ok(())
            })
            .await?;
            // Cached visitor tokens carry the chatbot's allowed origins.
            self.visitors.invalidate();
            self.claims.lock().chatbot_changed(&bot_id, !enabled);
            if enabled {
                signals.events_due();
            }
            Ok(())
        })
    }

    fn create_conversation(&self, conv: Conversation, token_hash: String) -> StoreFut<'_, ()> {
        Box::pin(self.write(move |c| {
            c.execute(
                "INSERT INTO conversations (id, chatbot_id, visitor_id, visitor_name, token_hash, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![conv.id, conv.chatbot_id, conv.visitor.id, conv.visitor.display_name, token_hash, conv.created_at],
            )?;
            Ok(())
        }))
    }

    fn get_conversation(&self, id: &str) -> StoreFut<'_, Conversation> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {CONV_COLS} FROM conversations WHERE id = ?1"
            ))?
            .query_row([id], conversation_row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn conversation_by_token(
        &self,
        token_hash: &str,
    ) -> StoreFut<'_, (Conversation, AllowedOrigins)> {
        let r = match self.visitors.get(token_hash) {
            Ok(v) => Ok(v),
            Err(generation) => self
                .read(|c| {
                    c.prepare_cached(CONV_BY_TOKEN)?
                        .query_row([token_hash], |r| {
                            let origins: String = r.get(CONV_COL_COUNT)?;
                            Ok((conversation_row(r)?, AllowedOrigins::from_stored(&origins)))
                        })
                        .optional()
                })
                .and_then(|v| v.ok_or(StoreError::NotFound))
                .inspect(|v| self.visitors.put(generation, token_hash, v)),
        };
        Box::pin(async move { r })
    }

    fn list_chatbots(&self, limit: usize, cursor: Option<String>) -> StoreFut<'_, Page<Chatbot>> {
        let r = self.list_chatbots_impl(limit, cursor);
        Box::pin(async move { r })
    }

    fn list_conversations(
        &self,
        ask: PageAsk<(), String>,
    ) -> StoreFut<'_, Page<ConversationSummary>> {
        let (chatbot_id, limit, now_ms) = (ask.chatbot_id.as_str(), ask.limit, ask.now_ms);
        let cursor = &ask.cursor;
        let r = self.read(|c| {
            c.prepare_cached(
                "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at,
                   (SELECT max(m.created_at) FROM messages m WHERE m.conversation_id = c.id AND m.deleted = 0),
                   (SELECT count(*) FROM interactions i WHERE i.conversation_id = c.id AND i.status = 'pending'
                      AND (i.expires_at IS NULL OR i.expires_at >= ?2))
                 FROM conversations c WHERE c.chatbot_id = ?1 AND (?3 IS NULL OR c.id < ?3)
                 ORDER BY c.id DESC LIMIT ?4",
            )?
            .query_map(
                params![chatbot_id, now_ms, cursor, limit as i64 + 1],
                |r| {
                    Ok(crate::store::ConversationSummary {
                        conversation: conversation_row(r)?,
                        last_message_at: r.get(6)?,
                        pending_interactions: r.get(7)?,
                    })
                },
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move {
            Ok(crate::store::page_by_key(r?, limit, |s| {
                s.conversation.id.to_string()
            }))
        })
    }
}
