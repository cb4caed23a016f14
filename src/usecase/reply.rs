//! Applying a reply through a response_url token: the public endpoint and a
//! webhook's reply body both come here.

use serde_json::Value;

use super::Services;
use super::content::{new_message, parse_content};
use super::error::{AppError, AppResult};
use crate::domain::model::Author;
use crate::domain::token::{Grant, GrantRef};
use crate::schemas::Schemas;
use crate::store::{Reply, ReplyOutcome, ReplyRequest, StoreError};

/// How many times one response_url may be used.
pub const MAX_USES: u32 = 5;

/// `user` acting on `message_id` at `now_ms`: the event's id and its
/// response_url, minted before anything is stored.
pub fn acting(
    st: &Services,
    user: crate::domain::model::Person,
    message_id: &str,
    conversation_id: &str,
    now_ms: i64,
    trace: Option<String>,
) -> crate::store::Acting {
    let event_id = crate::domain::ids::EventId::generate();
    let response_url = response_url(st, &event_id, message_id, conversation_id, false, now_ms);
    crate::store::Acting {
        user,
        event_id,
        response_url,
        now_ms,
        interactive_window_ms: st.settings.interactive_window.as_millis() as i64,
        trace,
    }
}

/// The response_url of an event about `message_id`.
pub fn response_url(
    st: &Services,
    event_id: &str,
    message_id: &str,
    conversation_id: &str,
    new_message_only: bool,
    now_ms: i64,
) -> String {
    let expires_at = now_ms.saturating_add(st.settings.response_url_ttl.as_millis() as i64);
    const PATH: &str = "/api/v1/responses/";
    let mut url = String::with_capacity(st.public_url.len() + PATH.len() + 160);
    url.push_str(&st.public_url);
    url.push_str(PATH);
    st.server_key.issue_into(
        &mut url,
        GrantRef {
            event_id,
            message_id,
            conversation_id,
            expires_at,
            new_message_only,
        },
    );
    url
}

/// Decides what a reply body asks for, checking it as a new message's body
/// would be checked. Nothing is stored here.
fn decide(grant: &Grant, body: &Value, now_ms: i64) -> AppResult<Reply> {
    let (content, placement) = parse_content(body, &Schemas::get().reply)?;
    let (replace, delete) = (placement.replace_original, placement.delete_original);
    if grant.new_message_only {
        if replace == Some(true) {
            return Err(AppError::field(
                "/replace_original",
                "not_allowed",
                "a reply to message.received always posts a new message",
            ));
        }
        if delete {
            return Err(AppError::field(
                "/delete_original",
                "not_allowed",
                "a reply to message.received cannot delete the visitor's message",
            ));
        }
    }
    if delete {
        if replace == Some(true) {
            return Err(AppError::field(
                "/delete_original",
                "conflict",
                "choose either replace_original or delete_original",
            ));
        }
        return Ok(Reply::Delete);
    }
    if content.text.is_none() && content.blocks.is_none() {
        return Err(AppError::field(
            "",
            "required",
            "a reply needs text or blocks",
        ));
    }
    if replace.unwrap_or(!grant.new_message_only) {
        Ok(Reply::Replace {
            text: content.text,
            blocks: content.blocks.unwrap_or_default(),
            metadata: content.metadata,
            typing_on_interaction: content.typing_on_interaction,
        })
    } else {
        Ok(Reply::Post(new_message(
            &grant.conversation_id,
            Author::bot(),
            content,
            now_ms,
        )))
    }
}

/// Applies one reply through a response_url token: the HTTP endpoint and a
/// webhook's reply body both come here. Returns `{"message": …}`.
pub async fn apply_reply(
    st: &Services,
    token: &str,
    body: &Value,
    idempotency_key: Option<String>,
) -> AppResult<Value> {
    let grant = st
        .server_key
        .verify(token)
        .ok_or_else(AppError::not_found)?;
    let now = st.now_ms();
    if now > grant.expires_at {
        if let Err(StoreError::NotFound) = st.store.get_conversation(&grant.conversation_id).await {
            return Err(AppError::not_found());
        }
        return Err(AppError::ResponseUrlExpired(
            "this response_url has expired",
        ));
    }
    if let Some(pointer) = crate::domain::text::first_nul(body) {
        return Err(AppError::field(
            pointer,
            "invalid_text",
            "text must not contain the NUL character (U+0000)",
        ));
    }
    let reply = decide(&grant, body, now)?;
    // A click on a message with `typing_on_interaction` shows typing until
    // the bot answers; this answer ends it.
    let typing = !grant.new_message_only
        && st
            .store
            .get_message(&grant.message_id)
            .await
            .is_ok_and(|m| m.typing_on_interaction);
    let out = st
        .store
        .reply(ReplyRequest {
            event_id: grant.event_id.clone(),
            message_id: grant.message_id.clone(),
            conversation_id: grant.conversation_id.clone(),
            body_hash: crate::domain::ids::hash_secret(&crate::domain::text::canonical(body)),
            idempotency_key,
            max_uses: MAX_USES,
            now_ms: now,
            interactive_window_ms: st.settings.interactive_window.as_millis() as i64,
            reply,
        })
        .await;
    let out = match out {
        Ok(out) => out,
        // The conversation erased or purged (§11): nothing of it is found,
        // whatever the reply failed on (a new message's insert fails on
        // the missing conversation, not with NotFound).
        Err(StoreError::NotFound | StoreError::Backend(_))
            if matches!(
                st.store.get_conversation(&grant.conversation_id).await,
                Err(StoreError::NotFound)
            ) =>
        {
            return Err(AppError::not_found());
        }
        Err(StoreError::NotFound) => {
            return Err(AppError::ResponseUrlExpired(
                "the original message was deleted",
            ));
        }
        Err(other) => return Err(other.into()),
    };
    match out {
        ReplyOutcome::Applied(v) => {
            if typing {
                super::typing::stop_typing(st, &grant.conversation_id, &grant.message_id).await;
            }
            Ok(v)
        }
        ReplyOutcome::Repeated(v) => Ok(v),
        ReplyOutcome::UsedUp => Err(AppError::ResponseUrlExpired(
            "this response_url was used the maximum number of times",
        )),
    }
}
