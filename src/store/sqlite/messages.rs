//! Messages (takeover, insert, read), attachments and the conversation stream.

use super::*;
use crate::domain::status::InteractionStatus;

impl SqliteStore {
    pub(super) fn takeover(
        &self,
        conversation_id: &str,
        member: Person,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        let cid = conversation_id.to_string();
        let hub = self.hub.clone();
        Box::pin(async move {
            let events = self
                .write(move |c| {
                    let member = serde_json::to_string(&member)?;
                    let n = c
                        .execute("UPDATE conversations SET taken_over_by = ?2 WHERE id = ?1", params![cid, member])?;
                    if n == 0 {
                        return Err(StoreError::NotFound);
                    }
                    let pending: Vec<String> = c
                        .prepare("SELECT id FROM interactions WHERE conversation_id = ?1 AND status = 'pending'")
                        .and_then(|mut s| s.query_map([&cid], |r| r.get(0)).and_then(|rows| rows.collect()))?;
                    let mut api = Vec::new();
                    let mut out = Vec::new();
                    for id in pending {
                        let (_, st, a) = inbox::close(c, &id, InteractionStatus::Cancelled, "takeover", now_ms)?;
                        out.extend(st);
                        api.extend(a);
                    }
                    let msgs: Vec<Message> = c
                        .prepare("SELECT doc, created_at FROM messages WHERE conversation_id = ?1 AND deleted = 0")
                        .and_then(|mut s| {
                            s.query_map([&cid], |r| parse_message(&r.get::<_, String>(0)?, r.get(1)?))
                                .and_then(|rows| rows.collect())
                        })?;
                    for mut m in msgs {
                        if m.take_over(now_ms) {
                            save_message(c, &m)?;
                            out.push(append_stream(c, &cid, "message.updated", message_json(&m))?);
                        }
                    }
                    Ok((out, api))
                })
                .await?;
            self.visitors.invalidate();
            hub.publish(events.0);
            hub.publish_api(events.1);
            Ok(())
        })
    }

    pub(super) fn insert_message(
        &self,
        msg: Message,
        event: Option<NewEvent>,
        interactions: Vec<NewInteraction>,
    ) -> BoxFut<'_, StoreResult<()>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let (entry, api, _) = self
                .write_queuing(
                    true,
                    move |c| {
                        // Not into a conversation erased or purged since
                        // the caller found it.
                        let exists = c
                            .prepare_cached(
                                "SELECT EXISTS (SELECT 1 FROM conversations WHERE id = ?1)",
                            )
                            .and_then(|mut s| {
                                s.query_row([&msg.conversation_id], |r| r.get::<_, bool>(0))
                            })?;
                        if !exists {
                            return Err(StoreError::NotFound);
                        }
                        let doc = insert_message(c, &msg)?;
                        let hot = match event {
                            Some(e) => insert_event(c, e)?,
                            None => None,
                        };
                        let mut api = Vec::new();
                        for i in &interactions {
                            inbox::insert(c, i, msg.created_ms)?;
                            let stored = inbox::by_id(c, &i.id)?;
                            api.push(ApiEvent {
                                chatbot_id: i.chatbot_id.clone(),
                                interaction_id: i.id.clone(),
                                kind: "interaction.created",
                                data: stored.to_json(msg.created_ms),
                            });
                        }
                        let entry = append_stream(c, &msg.conversation_id, "message.created", doc)?;
                        Ok((entry, api, hot))
                    },
                    |t| t.2.take(),
                )
                .await?;
            hub.publish(vec![entry]);
            hub.publish_api(api);
            Ok(())
        })
    }

    pub(super) fn insert_attachment(
        &self,
        a: crate::domain::attachment::Attachment,
    ) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(self.write(move |c| attachments::insert(c, &a).map_err(backend)))
    }

    pub(super) fn get_attachment(
        &self,
        id: &str,
    ) -> BoxFut<'_, StoreResult<crate::domain::attachment::Attachment>> {
        let r = self.read(|c| attachments::get(c, id));
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    pub(super) fn delete_attachment(&self, id: &str) -> BoxFut<'_, StoreResult<()>> {
        let id = id.to_string();
        Box::pin(self.write(move |c| attachments::delete(c, &id).map_err(backend)))
    }

    pub(super) fn get_message(&self, id: &str) -> BoxFut<'_, StoreResult<Message>> {
        let r = self.read(|c| {
            c.prepare_cached("SELECT doc, created_at FROM messages WHERE id = ?1 AND deleted = 0")?
                .query_row([id], |r| parse_message(&r.get::<_, String>(0)?, r.get(1)?))
                .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    pub(super) fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<Message>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT doc, created_at, seq FROM messages WHERE conversation_id = ?1 AND deleted = 0 AND seq < ?2
                 ORDER BY seq DESC LIMIT ?3",
            )?;
            let rows = s.query_map(params![conversation_id, cursor.unwrap_or(i64::MAX), limit as i64 + 1], |r| {
                Ok((parse_message(&r.get::<_, String>(0)?, r.get(1)?)?, r.get::<_, i64>(2)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move {
            let mut rows = r?;
            let next_cursor = if rows.len() > limit {
                rows.truncate(limit);
                rows.last().map(|(_, seq)| seq.to_string())
            } else {
                None
            };
            Ok(Page {
                data: rows.into_iter().map(|(m, _)| m).collect(),
                next_cursor,
            })
        })
    }
}

impl SqliteStore {
    pub(super) fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> BoxFut<'_, StoreResult<Vec<StreamEvent>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT seq, conversation_id, kind, data FROM stream_events WHERE conversation_id = ?1 AND seq > ?2
                 ORDER BY seq LIMIT ?3",
            )?;
            let rows = s.query_map(params![conversation_id, after_seq, limit as i64], |r| {
                Ok(StreamEvent {
                    seq: r.get(0)?,
                    conversation_id: r.get(1)?,
                    kind: r.get(2)?,
                    data: r.get(3)?,
                })
            })?;
            rows.collect()
        });
        Box::pin(async move { r })
    }

    pub(super) fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> BoxFut<'_, StoreResult<StreamEvent>> {
        let (cid, kind) = (conversation_id.to_string(), kind.to_string());
        let hub = self.hub.clone();
        Box::pin(async move {
            let e = self
                .write(move |c| append_stream(c, &cid, &kind, data))
                .await?;
            hub.publish(vec![e.clone()]);
            Ok(e)
        })
    }
}
