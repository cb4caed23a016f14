//! What a click batch reads under its locks, in one statement.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

use super::super::{CHATBOT_COLS, chatbot_row_at, inbox, parse_message};
use crate::domain::inbox as domain;
use crate::domain::model::Chatbot;
use crate::store::StoreResult;
use crate::store::script::Party;
use crate::store::script::clicks::Loaded;

/// Locks the messages (by conversation, then id), then their conversations
/// (by id), then the messages' pending and asked interactions (by message,
/// then seq), in one statement: each part is a CTE read only by its own
/// branch of the `UNION ALL`, and the branches run in order, so the locks
/// are taken in the order every writer takes them (the Sort under `v`'s
/// lock takes every message row before the first conversation is locked).
/// A row changed since the statement began is read as committed
/// (PostgreSQL rechecks a row it waited for). A row of the first branch is
/// a message with its conversation; of the second, an interaction.
///
/// The statement's text, made once; bound to the message ids as a
/// `text[]` and prepared by the driver on the connection that runs it.
fn sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        let typed = "NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, \
                     NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint";
        let bot_cols: Vec<String> = CHATBOT_COLS.split(", ").map(|c| format!("b.{c}")).collect();
        format!(
            "WITH m AS MATERIALIZED (
               SELECT id, doc, created_at, conversation_id FROM messages WHERE id = ANY($1::text[]) AND deleted = 0
               ORDER BY conversation_id, id FOR UPDATE),
             v AS MATERIALIZED (
               SELECT m.id, m.doc, m.created_at, v.id AS conv, v.created_at AS conv_at, v.taken_over_by, {bot}
               FROM m JOIN conversations v ON v.id = m.conversation_id JOIN chatbots b ON b.id = v.chatbot_id
               ORDER BY v.id, m.id FOR UPDATE OF v),
             i AS MATERIALIZED (
               SELECT {cols} FROM interactions WHERE message_id = ANY($1::text[]) AND (status = 'pending' OR is_ask = 1)
               ORDER BY message_id, seq FOR UPDATE)
             SELECT false, v.*, {typed} FROM v
             UNION ALL
             SELECT true, {nulls}, i.* FROM i",
            cols = inbox::COLS,
            bot = bot_cols.join(", "),
            nulls = vec!["NULL"; 6 + bot_cols.len()].join(", "),
        )
    })
}

/// Reads and locks the messages `ids` (and all that goes with them) in the
/// transaction open on `conn`.
pub(super) async fn read(conn: &mut PgConnection, ids: &[&str]) -> StoreResult<Loaded> {
    let rows = sqlx::query(sql()).bind(ids).fetch_all(&mut *conn).await?;
    parse(&rows)
}

/// What the read's rows say.
fn parse(rows: &[PgRow]) -> StoreResult<Loaded> {
    let bot_cols = CHATBOT_COLS.split(", ").count();
    let mut messages = HashMap::with_capacity(rows.len());
    let mut convs = HashMap::new();
    let mut bots: HashMap<String, Arc<Chatbot>> = HashMap::new();
    let mut interactions: HashMap<String, Vec<domain::Interaction>> = HashMap::new();
    for r in rows {
        if r.try_get::<bool, _>(0)? {
            let i = inbox::row_at(r, 7 + bot_cols)?;
            interactions
                .entry(i.message_id.to_string())
                .or_default()
                .push(i);
            continue;
        }
        let id: String = r.try_get(1)?;
        let m = parse_message(&r.try_get::<String, _>(2)?, r.try_get(3)?)?;
        messages.insert(id, m);
        let cid: String = r.try_get(4)?;
        if let std::collections::hash_map::Entry::Vacant(e) = convs.entry(cid) {
            let taken: Option<String> = r.try_get(6)?;
            // Each chatbot read once.
            let bot_id: &str = r.try_get(7)?;
            let bot = match bots.get(bot_id) {
                Some(b) => Arc::clone(b),
                None => {
                    let b = Arc::new(chatbot_row_at(r, 7)?);
                    bots.insert(b.id.to_string(), b.clone());
                    b
                }
            };
            // Its chatbot as read with it: its deliveries are sent as it says.
            e.insert(Party {
                chatbot_id: bot.id.clone(),
                retention_ms: bot.retention_ms,
                created_at: r.try_get(5)?,
                taken_over: taken.is_some(),
                bot: Some(bot),
            });
        }
    }
    Ok(Loaded {
        messages,
        parties: convs,
        interactions,
        // Closed interactions are not read: a click whose block is gone
        // runs on its own.
        whole: Default::default(),
    })
}
