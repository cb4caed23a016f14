//! `typing` on the widget stream: after an accepted click on a message with
//! `typing_on_interaction`, until the bot's reply arrives or 30 s pass.

use std::time::Duration;

use serde_json::json;

use super::Services;

/// How long typing shows when no reply comes.
const TYPING_FOR: Duration = Duration::from_secs(30);
/// How many later entries the timeout looks through for an earlier end.
const LOOKAHEAD: usize = 500;

fn entry(conversation_id: &str, message_id: &str, active: bool) -> String {
    json!({"conversation_id": conversation_id, "message_id": message_id, "active": active})
        .to_string()
}

/// Shows typing (committed before this returns, so it precedes any reply),
/// and ends it after 30 s unless something ended it already.
pub async fn start_typing(st: &Services, conversation_id: &str, message_id: &str) {
    st.hub
        .typing
        .lock()
        .insert(conversation_id.to_string(), message_id.to_string());
    let on = match st
        .store
        .append_stream(
            conversation_id,
            "typing",
            entry(conversation_id, message_id, true),
        )
        .await
    {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "could not record typing");
            return;
        }
    };
    let store = st.store.clone();
    let (cid, mid) = (conversation_id.to_string(), message_id.to_string());
    tokio::spawn(async move {
        tokio::time::sleep(TYPING_FOR).await;
        // A reply (or another click) since then already changed the state.
        let ended = store
            .stream_since(&cid, on.seq, LOOKAHEAD)
            .await
            .is_ok_and(|later| later.iter().any(|e| e.kind == "typing"));
        if !ended {
            let _ = store
                .append_stream(&cid, "typing", entry(&cid, &mid, false))
                .await;
        }
    });
}

/// Ends typing: the bot's reply arrived.
pub async fn stop_typing(st: &Services, conversation_id: &str, message_id: &str) {
    st.hub.typing.lock().remove(conversation_id);
    if let Err(e) = st
        .store
        .append_stream(
            conversation_id,
            "typing",
            entry(conversation_id, message_id, false),
        )
        .await
    {
        tracing::warn!(error = %e, "could not record the end of typing");
    }
}

/// Ends typing if this conversation shows it: a bot message arrived.
pub async fn stop_typing_if_shown(st: &Services, conversation_id: &str) {
    let shown = st.hub.typing.lock().remove(conversation_id);
    if let Some(message_id) = shown {
        stop_typing(st, conversation_id, &message_id).await;
    }
}
