//! One use of a `response_url`: replace, post or delete, counted against
//! its uses, kept under its `Idempotency-Key`.

use super::{Announce, Tx, inbox};
use crate::domain::reply::{Gate, gate, record};
use crate::domain::time::rfc3339;
use crate::store::{Reply, ReplyOutcome, ReplyRequest, StoreError, StoreResult};

pub async fn reply<T: Tx>(tx: &mut T, req: ReplyRequest) -> StoreResult<(ReplyOutcome, Announce)> {
    let uses = tx.reply_uses(&req.event_id).await?;
    let kept = match &req.idempotency_key {
        Some(key) => match tx.reply_record(&req.event_id, key).await? {
            Some(text) => {
                Some(serde_json::from_str(&text).map_err(|e| StoreError::Backend(e.to_string()))?)
            }
            None => None,
        },
        None => None,
    };
    match gate(uses, req.max_uses, kept, &req.body_hash)? {
        Gate::Apply => {}
        Gate::Repeat(first) => return Ok((ReplyOutcome::Repeated(first), Announce::default())),
        Gate::UsedUp => return Ok((ReplyOutcome::UsedUp, Announce::default())),
    }
    let window = req.interactive_window_ms;
    let (msg, kind, data, deleted) = match req.reply {
        Reply::Replace {
            text,
            blocks,
            metadata,
            typing_on_interaction,
        } => {
            let mut m = tx.message(&req.message_id).await?;
            m.text = text;
            m.blocks = blocks;
            if let Some(md) = metadata {
                m.metadata = md;
            }
            if let Some(t) = typing_on_interaction {
                m.typing_on_interaction = t;
            }
            m.updated_at = rfc3339(req.now_ms);
            let doc = tx.save_message(&m).await?;
            (m, "message.updated", doc, false)
        }
        Reply::Post(m) => {
            let doc = tx.insert_message(&m).await?;
            (m, "message.created", doc, false)
        }
        Reply::Delete => {
            let m = tx.message(&req.message_id).await?;
            tx.delete_message(&m.id).await?;
            let data = serde_json::json!({ "message_id": m.id }).to_string();
            (m, "message.deleted", data, true)
        }
    };
    let mut announce = inbox::after_reply(tx, &msg, deleted, window, req.now_ms).await?;
    let entry = tx.append_stream(&msg.conversation_id, kind, data).await?;
    announce.stream.push(entry);
    tx.count_reply_use(&req.event_id).await?;
    let result = serde_json::json!({ "message": msg });
    if let Some(key) = &req.idempotency_key {
        tx.put_reply_record(&req.event_id, key, &record(&result, &req.body_hash))
            .await?;
    }
    Ok((ReplyOutcome::Applied(result), announce))
}
