//! What a visitor does through the widget (§3): post a message, click a
//! button or submit a form. Each write
//! goes to the store once; what follows its commit (metrics, typing) is
//! done here, for every caller alike.

use super::Services;
use super::content::{Content, new_message};
use super::error::AppResult;
use crate::domain::events::{self, Base};
use crate::domain::ids::{EventId, MessageId};
use crate::domain::interact::Action;
use crate::domain::model::{Author, Conversation, Message};
use crate::domain::time::rfc3339;
use crate::store::{InteractRequest, Interacted, NewEvent, Posting};

/// The visitor's message, stored with its `message.received` event.
pub async fn post_message(
    st: &Services,
    conv: &Conversation,
    text: String,
    trace: Option<String>,
) -> AppResult<Message> {
    let now = st.now_ms();
    let cid = &conv.id;
    let msg = new_message(
        cid,
        Author::Person(conv.visitor.clone()),
        Content {
            text: Some(text.clone()),
            blocks: None,
            metadata: None,
            typing_on_interaction: None,
        },
        now,
    );
    let event_id = EventId::generate();
    let response_url = super::reply::response_url(st, &event_id, &msg.id, cid, true, now);
    let payload = events::message_received(
        &Base {
            event_id: &event_id,
            chatbot_id: &conv.chatbot_id,
            conversation_id: cid,
            message_id: &msg.id,
            user: &conv.visitor,
            response_url: &response_url,
        },
        &text,
        &rfc3339(now),
    );
    let event = NewEvent {
        id: event_id,
        chatbot_id: conv.chatbot_id.clone(),
        conversation_id: cid.clone(),
        event_type: events::MESSAGE_RECEIVED,
        payload,
        created_at: now,
        trace,
    };
    st.store
        .insert_message(Posting {
            message: msg.clone(),
            event: Some(event),
            interactions: Vec::new(),
        })
        .await?;
    crate::telemetry::metrics::event_accepted(events::MESSAGE_RECEIVED);
    Ok(msg)
}

/// A click or a form submit on a message of the visitor's conversation:
/// the store loads, the domain decides and the store applies, in one
/// transaction; once it committed the event is counted and, when the
/// message asks for it, typing shows.
pub async fn interact(
    st: &Services,
    conv: &Conversation,
    message_id: MessageId,
    action: Action,
    trace: Option<String>,
) -> AppResult<Interacted> {
    let by = super::reply::acting(
        st,
        conv.visitor.clone(),
        &message_id,
        &conv.id,
        st.now_ms(),
        trace,
    );
    let event_type = match action {
        Action::Click { .. } => events::BUTTON_CLICKED,
        Action::Submit { .. } => events::FORM_SUBMITTED,
    };
    let out = st
        .store
        .interact(InteractRequest {
            message_id,
            conversation_id: conv.id.clone(),
            action,
            by,
        })
        .await?;
    crate::telemetry::metrics::event_accepted(event_type);
    if out.typing {
        super::typing::start_typing(st, &conv.id, &out.message.id).await;
    }
    Ok(out)
}
