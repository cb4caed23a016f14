//! Clicks and submits, interactions read and answered, replies.

use super::*;
use crate::domain::status::InteractionStatus;

impl SqliteStore {
    pub(super) fn interact(&self, req: InteractRequest) -> BoxFut<'_, StoreResult<Interacted>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let fx = self
                .write_queuing(
                    false,
                    move |c| {
                        let msg = load_message(c, &req.message_id)?;
                        if msg.conversation_id != req.conversation_id {
                            return Err(StoreError::NotFound);
                        }
                        inbox::apply(
                            c,
                            msg,
                            &req.action,
                            &req.user,
                            &req.event_id,
                            &req.response_url,
                            req.now_ms,
                            req.interactive_window_ms,
                            None,
                        )
                    },
                    |fx| fx.hot.take(),
                )
                .await?;
            hub.publish(fx.stream);
            hub.publish_api(fx.api);
            Ok(fx.out)
        })
    }

    pub(super) fn get_interaction(
        &self,
        chatbot_id: &str,
        id: &str,
    ) -> BoxFut<'_, StoreResult<Interaction>> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {} FROM interactions WHERE id = ?1 AND chatbot_id = ?2",
                inbox::COLS
            ))?
            .query_row([id, chatbot_id], inbox::row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    pub(super) fn list_interactions(
        &self,
        chatbot_id: &str,
        filter: InteractionFilter,
        limit: usize,
        cursor: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<Interaction>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(&format!(
                "SELECT {}, seq FROM interactions
                 WHERE chatbot_id = ?1 AND seq < ?2 AND (?3 IS NULL OR conversation_id = ?3)
                   AND (?4 IS NULL
                        OR (?4 = 'pending' AND status = 'pending' AND (expires_at IS NULL OR expires_at > ?5))
                        OR (?4 = 'expired' AND (status = 'expired' OR (status = 'pending' AND expires_at <= ?5)))
                        OR (?4 NOT IN ('pending', 'expired') AND status = ?4))
                 ORDER BY seq DESC LIMIT ?6",
                inbox::COLS
            ))?;
            let rows = s.query_map(
                params![chatbot_id, cursor.unwrap_or(i64::MAX), filter.conversation_id, filter.status.map(InteractionStatus::as_str), now_ms, limit as i64 + 1],
                |r| Ok((inbox::row(r)?, r.get::<_, i64>(14)?)),
            )?;
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
                data: rows.into_iter().map(|(i, _)| i).collect(),
                next_cursor,
            })
        })
    }

    pub(super) fn answer_interaction(
        &self,
        req: AnswerRequest,
    ) -> BoxFut<'_, StoreResult<AnswerOutcome>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let (outcome, stream, api, _) = self
                .write_queuing(true, move |c| {
                    let i = inbox::by_id(c, &req.interaction_id)?;
                    if i.chatbot_id != req.chatbot_id {
                        return Err(StoreError::NotFound);
                    }
                    let prior: Option<(String, String)> = c
                        .query_row(
                            "SELECT body_hash, result FROM interaction_idempotency WHERE interaction_id = ?1 AND key = ?2",
                            params![req.interaction_id, req.idempotency_key],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()?;
                    if let Some((hash, result)) = prior {
                        if hash != req.body_hash {
                            return Err(StoreError::Rejected(Rejection::IdempotencyConflict));
                        }
                        let v = serde_json::from_str(&result)?;
                        return Ok((AnswerOutcome::Repeated(v), Vec::new(), Vec::new(), None));
                    }
                    if i.status_at(req.now_ms) != InteractionStatus::Pending {
                        return Err(StoreError::Rejected(Rejection::NotPending));
                    }
                    let msg = load_message(c, &i.message_id)?;
                    let action = crate::domain::inbox::action_from_answer(&i.kind, &i.spec, &msg, &req.body)?;
                    let fx = inbox::apply(
                        c,
                        msg,
                        &action,
                        &req.user,
                        &req.event_id,
                        &req.response_url,
                        req.now_ms,
                        req.interactive_window_ms,
                        Some(&req.body),
                    )?;
                    let answered = match fx.answered {
                        Some(a) => a,
                        None => return Err(StoreError::Rejected(Rejection::NotPending)),
                    };
                    c.execute(
                        "INSERT INTO interaction_idempotency (interaction_id, key, body_hash, result) VALUES (?1, ?2, ?3, ?4)",
                        params![req.interaction_id, req.idempotency_key, req.body_hash, answered.to_json(req.now_ms).to_string()],
                    )?;
                    Ok((AnswerOutcome::Answered(Box::new(answered)), fx.stream, fx.api, fx.hot))
                }, |t| t.3.take())
                .await?;
            hub.publish(stream);
            hub.publish_api(api);
            Ok(outcome)
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
        let hub = self.hub.clone();
        Box::pin(async move {
            let (i, stream, api) = self
                .write(move |c| inbox::close(c, &id, status, reason, now_ms))
                .await?;
            hub.publish(stream);
            hub.publish_api(api);
            Ok(i)
        })
    }

    pub(super) fn reply(&self, req: ReplyRequest) -> BoxFut<'_, StoreResult<ReplyOutcome>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let (outcome, entries, api) = self
                .write(move |c| {
                    if let Some(key) = &req.idempotency_key {
                        let prior: Option<String> = c
                            .query_row(
                                "SELECT result FROM response_idempotency WHERE event_id = ?1 AND key = ?2",
                                params![req.event_id, key],
                                |r| r.get(0),
                            )
                            .optional()?;
                        if let Some(p) = prior {
                            let out = super::repeated_reply(&p, &req.body_hash)?;
                            return Ok((out, Vec::new(), Vec::new()));
                        }
                    }
                    let uses: i64 = c
                        .query_row("SELECT uses FROM response_uses WHERE event_id = ?1", [&req.event_id], |r| r.get(0))
                        .optional()?
                        .unwrap_or(0);
                    if uses >= req.max_uses as i64 {
                        return Ok((ReplyOutcome::UsedUp, Vec::new(), Vec::new()));
                    }
                    let now = crate::domain::time::rfc3339(req.now_ms);
                    let mut entries = Vec::new();
                    let window = req.interactive_window_ms;
                    let api;
                    let result_msg = match req.reply {
                        Reply::Replace { text, blocks, metadata, typing_on_interaction } => {
                            let mut m = load_message(c, &req.message_id)?;
                            m.text = text;
                            m.blocks = blocks;
                            if let Some(md) = metadata {
                                m.metadata = md;
                            }
                            if let Some(t) = typing_on_interaction {
                                m.typing_on_interaction = t;
                            }
                            m.updated_at = now;
                            save_message(c, &m)?;
                            api = inbox::after_reply(c, &m, false, window, req.now_ms)?;
                            entries.push(append_stream(c, &m.conversation_id, "message.updated", message_json(&m))?);
                            m
                        }
                        Reply::Post(m) => {
                            insert_message(c, &m)?;
                            api = inbox::after_reply(c, &m, false, window, req.now_ms)?;
                            entries.push(append_stream(c, &m.conversation_id, "message.created", message_json(&m))?);
                            m
                        }
                        Reply::Delete => {
                            let m = load_message(c, &req.message_id)?;
                            c.execute("UPDATE messages SET deleted = 1 WHERE id = ?1", [&m.id])?;
                            writer_cache::forget_message(&m.id);
                            api = inbox::after_reply(c, &m, true, window, req.now_ms)?;
                            entries.push(append_stream(
                                c,
                                &m.conversation_id,
                                "message.deleted",
                                serde_json::json!({"message_id": m.id}).to_string(),
                            )?);
                            m
                        }
                    };
                    c.execute(
                        "INSERT INTO response_uses (event_id, uses) VALUES (?1, 1)
                         ON CONFLICT(event_id) DO UPDATE SET uses = uses + 1",
                        [&req.event_id],
                    )?;
                    let result = serde_json::json!({ "message": result_msg });
                    if let Some(key) = &req.idempotency_key {
                        c.execute(
                            "INSERT INTO response_idempotency (event_id, key, result) VALUES (?1, ?2, ?3)",
                            params![req.event_id, key, super::reply_record(&result, &req.body_hash)],
                        )?;
                    }
                    Ok((ReplyOutcome::Applied(result), entries, api))
                })
                .await?;
            hub.publish(entries);
            hub.publish_api(api);
            Ok(outcome)
        })
    }
}
