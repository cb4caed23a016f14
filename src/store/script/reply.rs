//! One use of a `response_url`: replace, post or delete, counted against
//! its uses, kept under its `Idempotency-Key`.

use super::{Announce, Tx, inbox};
use crate::domain::time::rfc3339;
use crate::store::{Reply, ReplyOutcome, ReplyRequest, StoreResult, repeated_reply, reply_record};

pub async fn reply<T: Tx>(tx: &mut T, req: ReplyRequest) -> StoreResult<(ReplyOutcome, Announce)> {
    let uses = tx.reply_uses(&req.event_id).await?;
    if let Some(key) = &req.idempotency_key
        && let Some(prior) = tx.reply_record(&req.event_id, key).await?
    {
        return Ok((repeated_reply(&prior, &req.body_hash)?, Announce::default()));
    }
    if uses >= i64::from(req.max_uses) {
        return Ok((ReplyOutcome::UsedUp, Announce::default()));
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
        tx.put_reply_record(&req.event_id, key, &reply_record(&result, &req.body_hash))
            .await?;
    }
    Ok((ReplyOutcome::Applied(result), announce))
}
