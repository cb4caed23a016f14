//! The transaction scripts' steps in a PostgreSQL transaction. Rows a
//! script goes on to change are read `FOR UPDATE`: messages first, then
//! their interactions, then the conversation (see `queue::lock_conversation`),
//! so that concurrent clicks, answers and replies on several instances
//! cannot deadlock.

use sqlx::Row;

use super::{
    Tx, append_stream, backend, inbox, insert_event, insert_message, load_message_for_update,
    lock_conversation, message_json, parse_message, save_message,
};
use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::interact::Action;
use crate::domain::model::Message;
use crate::store::script::{self, Party};
use crate::store::{Claimed, NewEvent, StoreResult, StreamEvent};

impl script::Tx for Tx<'_> {
    async fn message(&mut self, id: &str) -> StoreResult<Message> {
        load_message_for_update(self, id).await
    }

    async fn live_messages(&mut self, conversation_id: &str) -> StoreResult<Vec<Message>> {
        let rows = sqlx::query(
            "SELECT doc, created_at FROM messages WHERE conversation_id = $1 AND deleted = 0 ORDER BY seq FOR UPDATE",
        )
        .bind(conversation_id)
        .fetch_all(&mut **self)
        .await?;
        rows.iter()
            .map(|r| parse_message(&r.try_get::<String, _>(0)?, r.try_get(1)?))
            .collect()
    }

    async fn insert_message(&mut self, m: &Message) -> StoreResult<String> {
        insert_message(self, m).await?;
        Ok(message_json(m))
    }

    async fn save_message(&mut self, m: &Message) -> StoreResult<String> {
        save_message(self, m).await?;
        Ok(message_json(m))
    }

    async fn delete_message(&mut self, id: &str) -> StoreResult<()> {
        sqlx::query("UPDATE messages SET deleted = 1 WHERE id = $1")
            .bind(id)
            .execute(&mut **self)
            .await?;
        Ok(())
    }

    async fn append_stream(
        &mut self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> StoreResult<StreamEvent> {
        append_stream(self, conversation_id, kind, data).await
    }

    async fn conversation_exists(&mut self, id: &str) -> StoreResult<bool> {
        lock_conversation(self, id).await
    }

    async fn party(&mut self, conversation_id: &str) -> StoreResult<Party> {
        let row = sqlx::query(
            "SELECT v.chatbot_id, b.retention_ms, v.created_at, v.taken_over_by
             FROM conversations v JOIN chatbots b ON b.id = v.chatbot_id WHERE v.id = $1",
        )
        .bind(conversation_id)
        .fetch_one(&mut **self)
        .await?;
        Ok(Party {
            chatbot_id: row.try_get(0)?,
            retention_ms: row.try_get(1)?,
            created_at: row.try_get(2)?,
            taken_over: row.try_get::<Option<String>, _>(3)?.is_some(),
            bot: None,
        })
    }

    async fn take_over(&mut self, conversation_id: &str, member: &str) -> StoreResult<bool> {
        let n = sqlx::query("UPDATE conversations SET taken_over_by = $2 WHERE id = $1")
            .bind(conversation_id)
            .bind(member)
            .execute(&mut **self)
            .await?
            .rows_affected();
        Ok(n > 0)
    }

    async fn interaction(&mut self, id: &str) -> StoreResult<Interaction> {
        inbox::by_id(self, id).await
    }

    async fn interactions_of(&mut self, message_id: &str) -> StoreResult<Vec<Interaction>> {
        inbox::of_message(self, message_id).await
    }

    async fn interactions_for(
        &mut self,
        msg: &Message,
        action: &Action,
    ) -> StoreResult<Vec<Interaction>> {
        inbox::of_action(self, msg, action).await
    }

    async fn pending_interactions(
        &mut self,
        conversation_id: &str,
    ) -> StoreResult<Vec<Interaction>> {
        inbox::pending_of(self, conversation_id).await
    }

    async fn insert_interaction(&mut self, i: &NewInteraction, now_ms: i64) -> StoreResult<()> {
        inbox::insert(self, i, now_ms).await
    }

    async fn save_interaction(&mut self, i: &Interaction) -> StoreResult<()> {
        inbox::save(self, i).await
    }

    /// The claim loops hand out PostgreSQL's deliveries: none at once.
    async fn insert_event(&mut self, e: NewEvent) -> StoreResult<Option<Claimed>> {
        insert_event(self, &e).await?;
        Ok(None)
    }

    async fn answer_record(
        &mut self,
        interaction_id: &str,
        key: &str,
    ) -> StoreResult<Option<(String, String)>> {
        let row = sqlx::query(
            "SELECT body_hash, result FROM interaction_idempotency WHERE interaction_id = $1 AND key = $2",
        )
        .bind(interaction_id)
        .bind(key)
        .fetch_optional(&mut **self)
        .await?;
        row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .transpose()
            .map_err(|e: sqlx::Error| backend(e))
    }

    async fn put_answer_record(
        &mut self,
        req: &crate::store::AnswerRequest,
        result: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO interaction_idempotency (interaction_id, key, body_hash, result) VALUES ($1, $2, $3, $4)",
        )
        .bind(&req.interaction_id)
        .bind(&req.idempotency_key)
        .bind(&req.body_hash)
        .bind(result)
        .execute(&mut **self)
        .await?;
        Ok(())
    }

    /// Takes the use counter's row lock: uses of one response_url, on any
    /// instance, follow one another.
    async fn reply_state(
        &mut self,
        event_id: &str,
        key: Option<&str>,
    ) -> StoreResult<(i64, Option<String>)> {
        // The uses row, locked: one use of a response_url at a time.
        sqlx::query(
            "INSERT INTO response_uses (event_id, uses) VALUES ($1, 0) ON CONFLICT (event_id) DO NOTHING",
        )
        .bind(event_id)
        .execute(&mut **self)
        .await?;
        let uses =
            sqlx::query_scalar("SELECT uses FROM response_uses WHERE event_id = $1 FOR UPDATE")
                .bind(event_id)
                .fetch_one(&mut **self)
                .await?;
        let kept = match key {
            Some(key) => {
                sqlx::query_scalar(
                    "SELECT result FROM response_idempotency WHERE event_id = $1 AND key = $2",
                )
                .bind(event_id)
                .bind(key)
                .fetch_optional(&mut **self)
                .await?
            }
            None => None,
        };
        Ok((uses, kept))
    }

    async fn count_reply(&mut self, event_id: &str, kept: Option<(&str, &str)>) -> StoreResult<()> {
        sqlx::query("UPDATE response_uses SET uses = uses + 1 WHERE event_id = $1")
            .bind(event_id)
            .execute(&mut **self)
            .await?;
        if let Some((key, text)) = kept {
            sqlx::query(
                "INSERT INTO response_idempotency (event_id, key, result) VALUES ($1, $2, $3)",
            )
            .bind(event_id)
            .bind(key)
            .bind(text)
            .execute(&mut **self)
            .await?;
        }
        Ok(())
    }
}
