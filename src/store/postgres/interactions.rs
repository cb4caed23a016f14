//! Clicks and submits, interactions read and answered, replies.

use super::*;
use crate::domain::status::InteractionStatus;

impl PostgresStore {
    pub(super) fn interact(&self, req: InteractRequest) -> BoxFut<'_, StoreResult<Interacted>> {
        Box::pin(async move {
            let done = self.clicks.interact(req).await?;
            self.hub.publish(done.stream);
            self.hub.publish_api(done.api);
            self.hub.new_events.notify_one();
            Ok(done.out)
        })
    }

    pub(super) fn get_interaction(
        &self,
        chatbot_id: &str,
        id: &str,
    ) -> BoxFut<'_, StoreResult<Interaction>> {
        let (bid, id) = (chatbot_id.to_string(), id.to_string());
        Box::pin(async move {
            let r = sqlx::query(&format!(
                "SELECT {} FROM interactions WHERE id = $1 AND chatbot_id = $2",
                inbox::COLS
            ))
            .bind(&id)
            .bind(&bid)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StoreError::NotFound)?;
            inbox::row(&r).map_err(backend)
        })
    }

    pub(super) fn list_interactions(
        &self,
        chatbot_id: &str,
        filter: InteractionFilter,
        limit: usize,
        cursor: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<Interaction>>> {
        let bid = chatbot_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(&format!(
                "SELECT {}, seq FROM interactions
                 WHERE chatbot_id = $1 AND seq < $2 AND ($3::text IS NULL OR conversation_id = $3)
                   AND ($4::text IS NULL
                        OR ($4 = 'pending' AND status = 'pending' AND (expires_at IS NULL OR expires_at > $5))
                        OR ($4 = 'expired' AND (status = 'expired' OR (status = 'pending' AND expires_at <= $5)))
                        OR ($4 NOT IN ('pending', 'expired') AND status = $4))
                 ORDER BY seq DESC LIMIT $6",
                inbox::COLS
            ))
            .bind(&bid)
            .bind(cursor.unwrap_or(i64::MAX))
            .bind(&filter.conversation_id)
            .bind(filter.status.map(InteractionStatus::as_str))
            .bind(now_ms)
            .bind(limit as i64 + 1)
            .fetch_all(&self.pool)
            .await?;
            let out = rows
                .iter()
                .map(|r| Ok((inbox::row(r)?, r.try_get::<i64, _>(14)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok(page_of(out, limit))
        })
    }

    pub(super) fn answer_interaction(
        &self,
        req: AnswerRequest,
    ) -> BoxFut<'_, StoreResult<AnswerOutcome>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let i = inbox::by_id(&mut tx, &req.interaction_id).await?;
            if i.chatbot_id != req.chatbot_id {
                return Err(StoreError::NotFound);
            }
            let prior = sqlx::query("SELECT body_hash, result FROM interaction_idempotency WHERE interaction_id = $1 AND key = $2")
                .bind(&req.interaction_id)
                .bind(&req.idempotency_key)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(r) = prior {
                let hash: String = r.try_get(0)?;
                if hash != req.body_hash {
                    return Err(StoreError::Rejected(Rejection::IdempotencyConflict));
                }
                let result: String = r.try_get(1)?;
                return Ok(AnswerOutcome::Repeated(serde_json::from_str(&result)?));
            }
            if i.status_at(req.now_ms) != InteractionStatus::Pending {
                return Err(StoreError::Rejected(Rejection::NotPending));
            }
            let msg = load_message_for_update(&mut tx, &i.message_id).await?;
            let action =
                crate::domain::inbox::action_from_answer(&i.kind, &i.spec, &msg, &req.body)?;
            let fx = inbox::apply(
                &mut tx,
                msg,
                &action,
                &req.user,
                &req.event_id,
                &req.response_url,
                req.now_ms,
                req.interactive_window_ms,
                Some(&req.body),
            )
            .await?;
            let Some(answered) = fx.answered else {
                return Err(StoreError::Rejected(Rejection::NotPending));
            };
            sqlx::query("INSERT INTO interaction_idempotency (interaction_id, key, body_hash, result) VALUES ($1, $2, $3, $4)")
                .bind(&req.interaction_id)
                .bind(&req.idempotency_key)
                .bind(&req.body_hash)
                .bind(answered.to_json(req.now_ms).to_string())
                .execute(&mut *tx)
                .await?;
            self.commit(tx, &fx.stream, &fx.api, true).await?;
            self.hub.publish(fx.stream);
            self.hub.publish_api(fx.api);
            self.hub.new_events.notify_one();
            Ok(AnswerOutcome::Answered(Box::new(answered)))
        })
    }

    pub(super) fn close_interaction(
        &self,
        id: &str,
        status: InteractionStatus,
        reason: &'static str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Interaction>> {
        let id = id.to_string();
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let (i, stream, api) = inbox::close(&mut tx, &id, status, reason, now_ms).await?;
            self.commit(tx, &stream, &api, false).await?;
            self.hub.publish(stream);
            self.hub.publish_api(api);
            Ok(i)
        })
    }

    pub(super) fn reply(&self, req: ReplyRequest) -> BoxFut<'_, StoreResult<ReplyOutcome>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            // Serialise uses of one response_url.
            sqlx::query("INSERT INTO response_uses (event_id, uses) VALUES ($1, 0) ON CONFLICT (event_id) DO NOTHING")
                .bind(&req.event_id)
                .execute(&mut *tx)
                .await?;
            let uses: i64 =
                sqlx::query_scalar("SELECT uses FROM response_uses WHERE event_id = $1 FOR UPDATE")
                    .bind(&req.event_id)
                    .fetch_one(&mut *tx)
                    .await?;
            if let Some(key) = &req.idempotency_key {
                let prior: Option<String> = sqlx::query_scalar(
                    "SELECT result FROM response_idempotency WHERE event_id = $1 AND key = $2",
                )
                .bind(&req.event_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(p) = prior {
                    return super::repeated_reply(&p, &req.body_hash);
                }
            }
            if uses >= req.max_uses as i64 {
                return Ok(ReplyOutcome::UsedUp);
            }
            let now = crate::domain::time::rfc3339(req.now_ms);
            let mut entries = Vec::new();
            let api;
            let result_msg = match req.reply {
                Reply::Replace {
                    text,
                    blocks,
                    metadata,
                    typing_on_interaction,
                } => {
                    let mut m = load_message_for_update(&mut tx, &req.message_id).await?;
                    m.text = text;
                    m.blocks = blocks;
                    if let Some(md) = metadata {
                        m.metadata = md;
                    }
                    if let Some(t) = typing_on_interaction {
                        m.typing_on_interaction = t;
                    }
                    m.updated_at = now;
                    save_message(&mut tx, &m).await?;
                    api = inbox::after_reply(
                        &mut tx,
                        &m,
                        false,
                        req.interactive_window_ms,
                        req.now_ms,
                    )
                    .await?;
                    entries.push(
                        append_stream(
                            &mut tx,
                            &m.conversation_id,
                            "message.updated",
                            message_json(&m),
                        )
                        .await?,
                    );
                    m
                }
                Reply::Post(m) => {
                    insert_message(&mut tx, &m).await?;
                    api = inbox::after_reply(
                        &mut tx,
                        &m,
                        false,
                        req.interactive_window_ms,
                        req.now_ms,
                    )
                    .await?;
                    entries.push(
                        append_stream(
                            &mut tx,
                            &m.conversation_id,
                            "message.created",
                            message_json(&m),
                        )
                        .await?,
                    );
                    m
                }
                Reply::Delete => {
                    let m = load_message_for_update(&mut tx, &req.message_id).await?;
                    sqlx::query("UPDATE messages SET deleted = 1 WHERE id = $1")
                        .bind(&m.id)
                        .execute(&mut *tx)
                        .await?;
                    api = inbox::after_reply(
                        &mut tx,
                        &m,
                        true,
                        req.interactive_window_ms,
                        req.now_ms,
                    )
                    .await?;
                    let data = serde_json::json!({"message_id": m.id}).to_string();
                    entries.push(
                        append_stream(&mut tx, &m.conversation_id, "message.deleted", data).await?,
                    );
                    m
                }
            };
            sqlx::query("UPDATE response_uses SET uses = uses + 1 WHERE event_id = $1")
                .bind(&req.event_id)
                .execute(&mut *tx)
                .await?;
            let result = serde_json::json!({ "message": result_msg });
            if let Some(key) = &req.idempotency_key {
                sqlx::query(
                    "INSERT INTO response_idempotency (event_id, key, result) VALUES ($1, $2, $3)",
                )
                .bind(&req.event_id)
                .bind(key)
                .bind(super::reply_record(&result, &req.body_hash))
                .execute(&mut *tx)
                .await?;
            }
            self.commit(tx, &entries, &api, false).await?;
            self.hub.publish(entries);
            self.hub.publish_api(api);
            Ok(ReplyOutcome::Applied(result))
        })
    }
}
