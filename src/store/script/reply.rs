//! One use of a `response_url`: replace, post or delete, counted against
//! its uses, kept under its `Idempotency-Key`.

use super::{Announce, Tx, inbox};
use crate::domain::reply::{Gate, gate, record};
use crate::store::{Reply, ReplyOutcome, ReplyRequest, StoreError, StoreResult};

pub async fn reply<T: Tx>(tx: &mut T, req: ReplyRequest) -> StoreResult<(ReplyOutcome, Announce)> {
    let (uses, kept) = tx
        .reply_state(&req.event_id, req.idempotency_key.as_deref())
        .await?;
    let kept = match kept {
        Some(text) => {
            Some(serde_json::from_str(&text).map_err(|e| StoreError::Backend(e.to_string()))?)
        }
        None => None,
    };
    match gate(uses, req.max_uses, kept, &req.body_hash)? {
        Gate::Apply => {}
        Gate::Repeat(first) => return Ok((ReplyOutcome::Repeated(first), Announce::default())),
        Gate::UsedUp => return Ok((ReplyOutcome::UsedUp, Announce::default())),
    }
    let window = req.interactive_window_ms;
    let kind = req.reply.kind();
    // Load, let the domain decide what the message becomes, apply.
    let (msg, data, deleted) = match req.reply {
        Reply::Post(m) => {
            let doc = tx.insert_message(&m).await?;
            (m, doc, false)
        }
        Reply::Delete => {
            let m = tx.message(&req.message_id).await?;
            tx.delete_message(&m.id).await?;
            let data = serde_json::json!({ "message_id": m.id }).to_string();
            (m, data, true)
        }
        replace @ Reply::Replace { .. } => {
            let mut m = tx.message(&req.message_id).await?;
            replace.edit(&mut m, req.now_ms);
            let doc = tx.save_message(&m).await?;
            (m, doc, false)
        }
    };
    let mut announce = inbox::after_reply(tx, &msg, deleted, window, req.now_ms).await?;
    let entry = tx.append_stream(&msg.conversation_id, kind, data).await?;
    announce.stream.push(entry);
    let result = serde_json::json!({ "message": msg });
    let kept = req
        .idempotency_key
        .as_deref()
        .map(|key| (key, record(&result, &req.body_hash)));
    tx.count_reply(&req.event_id, kept.as_ref().map(|(k, r)| (*k, r.as_str())))
        .await?;
    Ok((ReplyOutcome::Applied(result), announce))
}
