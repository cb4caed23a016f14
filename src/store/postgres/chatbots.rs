//! Instance metadata, chatbots and conversations.

use super::*;

impl Accounts for PostgresStore {
    fn meta_get_or_init(&self, key: &str, init: String) -> StoreFut<'_, String> {
        let key = key.to_string();
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            )
            .bind(&key)
            .bind(&init)
            .execute(&self.pool)
            .await?;
            sqlx::query_scalar("SELECT value FROM meta WHERE key = $1")
                .bind(&key)
                .fetch_one(&self.pool)
                .await
                .map_err(StoreError::from)
        })
    }

    fn create_chatbot(&self, b: Chatbot, api_key_hash: String) -> StoreFut<'_, ()> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO chatbots (id, name, webhook_url, retention_ms, api_key_hash, signing_secret, member_id, created_at, allowed_origins)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(&b.id)
            .bind(&b.name)
            .bind(&b.webhook_url)
            .bind(b.retention_ms)
            .bind(&api_key_hash)
            .bind(&b.signing_secret)
            .bind(&b.member_id)
            .bind(b.created_at)
            .bind(b.allowed_origins.to_stored())
            .execute(&self.pool)
            .await?;
            Ok(())
        })
    }

    fn get_chatbot(&self, id: &str) -> StoreFut<'_, Chatbot> {
        let id = id.to_string();
        Box::pin(async move {
            let q = format!("SELECT {CHATBOT_COLS} FROM chatbots WHERE id = $1");
            let row = sqlx::query(&q).bind(&id).fetch_optional(&self.pool).await?;
            row.map(|r| chatbot_row(&r).map_err(StoreError::from))
                .transpose()?
                .ok_or(StoreError::NotFound)
        })
    }

    fn chatbot_by_key(&self, api_key_hash: &str) -> StoreFut<'_, Chatbot> {
        let h = api_key_hash.to_string();
        Box::pin(async move {
            let q = format!("SELECT {CHATBOT_COLS} FROM chatbots WHERE api_key_hash = $1");
            let row = sqlx::query(&q).bind(&h).fetch_optional(&self.pool).await?;
            row.map(|r| chatbot_row(&r).map_err(StoreError::from))
                .transpose()?
                .ok_or(StoreError::NotFound)
        })
    }

    fn update_chatbot(&self, b: Chatbot) -> StoreFut<'_, ()> {
        Box::pin(async move {
            let (prev, until) = match &b.previous_secret {
                Some((s, u)) => (Some(s.clone()), Some(*u)),
                None => (None, None),
            };
            let mut tx = self.pool.begin().await?;
            let n = sqlx::query(
                "UPDATE chatbots SET name = $2, webhook_url = $3, retention_ms = $4, signing_secret = $5,
                 previous_secret = $6, previous_until = $7, endpoint_disabled = $8, allowed_origins = $9 WHERE id = $1",
            )
            .bind(&b.id)
            .bind(&b.name)
            .bind(&b.webhook_url)
            .bind(b.retention_ms)
            .bind(&b.signing_secret)
            .bind(prev)
            .bind(until)
            .bind(b.endpoint_disabled as i64)
            .bind(b.allowed_origins.to_stored())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            if !b.endpoint_disabled {
                // A pause of the default endpoint ends with it (by either route).
                sqlx::query("UPDATE endpoints SET enabled = 1, disabled_reason = NULL WHERE chatbot_id = $1 AND is_default = 1 AND enabled = 0")
                    .bind(&b.id)
                    .execute(&mut *tx)
                    .await?;
            }
            // Cached visitor tokens carry the chatbot's allowed origins.
            self.tokens_changed(&mut tx).await?;
            let mut notes = notify::Notes::new(&self.instance);
            if !b.endpoint_disabled {
                notes.due();
            }
            notes.send(&mut tx).await?;
            tx.commit().await?;
            self.visitors.invalidate();
            if !b.endpoint_disabled {
                self.signals.events_due();
            }
            Ok(())
        })
    }

    fn create_conversation(&self, conv: Conversation, token_hash: String) -> StoreFut<'_, ()> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO conversations (id, chatbot_id, visitor_id, visitor_name, token_hash, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&conv.id)
            .bind(&conv.chatbot_id)
            .bind(&conv.visitor.id)
            .bind(&conv.visitor.display_name)
            .bind(&token_hash)
            .bind(conv.created_at)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
    }

    fn get_conversation(&self, id: &str) -> StoreFut<'_, Conversation> {
        let id = id.to_string();
        Box::pin(async move {
            let q = format!("SELECT {CONV_COLS} FROM conversations WHERE id = $1");
            let row = sqlx::query(&q).bind(&id).fetch_optional(&self.pool).await?;
            row.map(|r| conversation_row(&r).map_err(StoreError::from))
                .transpose()?
                .ok_or(StoreError::NotFound)
        })
    }

    fn conversation_by_token(
        &self,
        token_hash: &str,
    ) -> StoreFut<'_, (Conversation, AllowedOrigins)> {
        let h = token_hash.to_string();
        let cached = self.visitors.get(token_hash);
        Box::pin(async move {
            let generation = match cached {
                Ok(v) => return Ok(v),
                Err(generation) => generation,
            };
            let row = sqlx::query(
                "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at, b.allowed_origins
                 FROM conversations c JOIN chatbots b ON b.id = c.chatbot_id WHERE c.token_hash = $1",
            )
            .bind(&h)
            .fetch_optional(&self.pool)
            .await?;
            let Some(r) = row else {
                return Err(StoreError::NotFound);
            };
            let conv = conversation_row(&r)?;
            let origins = AllowedOrigins::from_stored(r.try_get::<&str, _>(6)?);
            let v = (conv, origins);
            self.visitors.put(generation, &h, &v);
            Ok(v)
        })
    }

    fn list_chatbots(&self, limit: usize, cursor: Option<String>) -> StoreFut<'_, Page<Chatbot>> {
        Box::pin(dashboard::list_chatbots(self, limit, cursor))
    }

    fn list_conversations(
        &self,
        ask: PageAsk<(), String>,
    ) -> StoreFut<'_, Page<ConversationSummary>> {
        let (chatbot_id, limit, cursor, now_ms) =
            (ask.chatbot_id, ask.limit, ask.cursor, ask.now_ms);
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at,
                   (SELECT max(m.created_at) FROM messages m WHERE m.conversation_id = c.id AND m.deleted = 0),
                   (SELECT count(*) FROM interactions i WHERE i.conversation_id = c.id AND i.status = 'pending'
                      AND (i.expires_at IS NULL OR i.expires_at >= $2))
                 FROM conversations c WHERE c.chatbot_id = $1 AND ($3::text IS NULL OR c.id < $3::text)
                 ORDER BY c.id DESC LIMIT $4",
            )
            .bind(&chatbot_id)
            .bind(now_ms)
            .bind(&cursor)
            .bind(limit as i64 + 1)
            .fetch_all(&self.pool)
            .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(crate::store::ConversationSummary {
                    conversation: conversation_row(r)?,
                    last_message_at: r.try_get(6)?,
                    pending_interactions: r.try_get(7)?,
                });
            }
            Ok(crate::store::page_by_key(out, limit, |s| {
                s.conversation.id.to_string()
            }))
        })
    }
}
