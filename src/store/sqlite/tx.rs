//! The transaction scripts' steps on the writer's connection: every one is
//! a plain statement (or a lookup of the writer's caches) and is ready at
//! once, so a script runs with [`script::now`].

use rusqlite::{Connection, OptionalExtension, params};

use super::{inbox, parse_message, writer_cache};
use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::interact::Action;
use crate::domain::model::Message;
use crate::store::script::{self, Party};
use crate::store::{Claimed, NewEvent, StoreResult, StreamEvent};

/// The writer's connection inside its open transaction.
pub struct Sql<'c>(pub &'c Connection);

impl script::Tx for Sql<'_> {
    async fn message(&mut self, id: &str) -> StoreResult<Message> {
        super::load_message(self.0, id)
    }

    async fn live_messages(&mut self, conversation_id: &str) -> StoreResult<Vec<Message>> {
        let mut s = self.0.prepare_cached(
            "SELECT doc, created_at FROM messages WHERE conversation_id = ?1 AND deleted = 0",
        )?;
        let rows = s.query_map([conversation_id], |r| {
            parse_message(&r.get::<_, String>(0)?, r.get(1)?)
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    async fn insert_message(&mut self, m: &Message) -> StoreResult<String> {
        super::insert_message(self.0, m)
    }

    async fn save_message(&mut self, m: &Message) -> StoreResult<String> {
        super::save_message(self.0, m)
    }

    async fn delete_message(&mut self, id: &str) -> StoreResult<()> {
        self.0
            .prepare_cached("UPDATE messages SET deleted = 1 WHERE id = ?1")?
            .execute([id])?;
        writer_cache::forget_message(id);
        Ok(())
    }

    fn message_json(&self, m: &Message) -> Option<std::sync::Arc<str>> {
        writer_cache::message_json(m)
    }

    async fn append_stream(
        &mut self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> StoreResult<StreamEvent> {
        super::append_stream(self.0, conversation_id, kind, data)
    }

    async fn conversation_exists(&mut self, id: &str) -> StoreResult<bool> {
        Ok(self
            .0
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM conversations WHERE id = ?1)")?
            .query_row([id], |r| r.get(0))?)
    }

    async fn party(&mut self, conversation_id: &str) -> StoreResult<Party> {
        let v = inbox::conversation(self.0, conversation_id)?;
        Ok(Party {
            chatbot_id: v.bot.id.clone(),
            retention_ms: v.bot.retention_ms,
            created_at: v.created_at,
            taken_over: v.taken_over_by.is_some(),
            bot: Some(v.bot),
        })
    }

    async fn take_over(&mut self, conversation_id: &str, member: &str) -> StoreResult<bool> {
        let n = self
            .0
            .prepare_cached("UPDATE conversations SET taken_over_by = ?2 WHERE id = ?1")?
            .execute(params![conversation_id, member])?;
        Ok(n > 0)
    }

    async fn interaction(&mut self, id: &str) -> StoreResult<Interaction> {
        inbox::by_id(self.0, id)
    }

    async fn interactions_of(&mut self, message_id: &str) -> StoreResult<Vec<Interaction>> {
        inbox::of_message(self.0, message_id)
    }

    async fn interactions_for(
        &mut self,
        msg: &Message,
        action: &Action,
    ) -> StoreResult<Vec<Interaction>> {
        inbox::of_action(self.0, msg, action)
    }

    async fn pending_interactions(
        &mut self,
        conversation_id: &str,
    ) -> StoreResult<Vec<Interaction>> {
        inbox::pending_of(self.0, conversation_id)
    }

    async fn insert_interaction(&mut self, i: &NewInteraction, now_ms: i64) -> StoreResult<()> {
        inbox::insert(self.0, i, now_ms)
    }

    async fn save_interaction(&mut self, i: &Interaction) -> StoreResult<()> {
        inbox::save(self.0, i)
    }

    async fn insert_event(&mut self, e: NewEvent) -> StoreResult<Option<Claimed>> {
        super::insert_event(self.0, e)
    }

    async fn answer_record(
        &mut self,
        interaction_id: &str,
        key: &str,
    ) -> StoreResult<Option<(String, String)>> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT body_hash, result FROM interaction_idempotency WHERE interaction_id = ?1 AND key = ?2",
            )?
            .query_row([interaction_id, key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    async fn put_answer_record(
        &mut self,
        req: &crate::store::AnswerRequest,
        result: &str,
    ) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO interaction_idempotency (interaction_id, key, body_hash, result) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(rusqlite::params![
                req.interaction_id,
                req.idempotency_key,
                req.body_hash,
                result
            ])?;
        Ok(())
    }

    async fn reply_state(
        &mut self,
        event_id: &str,
        key: Option<&str>,
    ) -> StoreResult<(i64, Option<String>)> {
        let uses = self
            .0
            .prepare_cached("SELECT uses FROM response_uses WHERE event_id = ?1")?
            .query_row([event_id], |r| r.get(0))
            .optional()?;
        let kept = match key {
            Some(key) => self
                .0
                .prepare_cached(
                    "SELECT result FROM response_idempotency WHERE event_id = ?1 AND key = ?2",
                )?
                .query_row([event_id, key], |r| r.get(0))
                .optional()?,
            None => None,
        };
        Ok((uses.unwrap_or(0), kept))
    }

    async fn count_reply(&mut self, event_id: &str, kept: Option<(&str, &str)>) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO response_uses (event_id, uses) VALUES (?1, 1)
                 ON CONFLICT(event_id) DO UPDATE SET uses = uses + 1",
            )?
            .execute([event_id])?;
        if let Some((key, text)) = kept {
            self.0
                .prepare_cached(
                    "INSERT INTO response_idempotency (event_id, key, result) VALUES (?1, ?2, ?3)",
                )?
                .execute([event_id, key, text])?;
        }
        Ok(())
    }
}
