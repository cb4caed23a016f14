//! The deliveries log as a chatbot's key reads and works it (§8, §13): the
//! events, one event with its deliveries and attempts, a redelivery of one
//! or of all that ended, a `webhook.test`, and "send now".

use super::Services;
use super::error::{AppError, AppResult};
use crate::delivery::manual::{Sent, send_now as send_at_once};
use crate::domain::events::{WEBHOOK_TEST, webhook_test};
use crate::domain::ids::{ChatbotId, ConversationId, EventId};
use crate::domain::model::Chatbot;
use crate::domain::status::EventStatus;
use crate::domain::time::rfc3339;
use crate::store::{
    EndpointSel, EventDetail, EventFilter, EventSummary, NewEvent, Page, PageAsk, Redeliver,
    RedeliverAll, StoreError,
};

/// A page of the chatbot's events, newest first.
pub async fn list(
    st: &Services,
    chatbot_id: &ChatbotId,
    filter: EventFilter,
    limit: usize,
    cursor: Option<i64>,
) -> AppResult<Page<EventSummary>> {
    let ask = PageAsk {
        chatbot_id: chatbot_id.clone(),
        filter,
        limit,
        cursor,
        now_ms: st.now_ms(),
    };
    Ok(st.store.list_events(ask).await?)
}

/// One event with its deliveries (one per endpoint) and their attempts.
pub async fn get(
    st: &Services,
    chatbot_id: &ChatbotId,
    event_id: &EventId,
) -> AppResult<EventDetail> {
    Ok(st.store.get_event(chatbot_id, event_id).await?)
}

/// Queues the event again: to one endpoint, or to every endpoint it went to.
pub async fn redeliver(
    st: &Services,
    chatbot_id: &ChatbotId,
    event_id: &EventId,
    endpoint: Option<EndpointSel>,
) -> AppResult<()> {
    let r = Redeliver {
        chatbot_id: chatbot_id.clone(),
        event_id: event_id.clone(),
        endpoint,
        now_ms: st.now_ms(),
    };
    Ok(st.store.redeliver(r).await?)
}

/// Queues again every delivery in `status` (`dead` or `failed`) of the
/// chatbot's events created at or after `since` (to one endpoint, or all);
/// how many.
pub async fn redeliver_all(
    st: &Services,
    chatbot_id: &ChatbotId,
    status: EventStatus,
    since: Option<i64>,
    endpoint: Option<EndpointSel>,
) -> AppResult<u64> {
    let which = RedeliverAll {
        chatbot_id: chatbot_id.clone(),
        now_ms: st.now_ms(),
        status,
        since,
        endpoint,
    };
    Ok(st.store.redeliver_all(which).await?)
}

/// Queues a `webhook.test` in a lane of its own (it neither waits for nor
/// holds up a conversation) to one endpoint; its event id.
pub async fn send_test(
    st: &Services,
    chatbot_id: &ChatbotId,
    endpoint: EndpointSel,
    trace: Option<String>,
) -> AppResult<String> {
    let now = st.now_ms();
    let id = EventId::generate();
    let event = NewEvent {
        id: id.clone(),
        chatbot_id: chatbot_id.clone(),
        // A test event belongs to no conversation: it is its own.
        conversation_id: ConversationId::stored(id.as_str()),
        event_type: WEBHOOK_TEST,
        payload: webhook_test(&id, chatbot_id, &rfc3339(now)),
        created_at: now,
        trace,
    };
    match endpoint {
        EndpointSel::Default => st.store.enqueue_event(event).await?,
        EndpointSel::Other(ep) => st.store.enqueue_event_to(event, &ep).await?,
    }
    crate::telemetry::metrics::event_accepted(WEBHOOK_TEST);
    Ok(id.into_string())
}

/// "Send now": the event's delivery to the default endpoint, queued again
/// first when it had ended, sent at once whatever the circuit breaker
/// says. What was sent, and the event's status after it.
pub async fn send_now(
    st: &Services,
    bot: &Chatbot,
    event_id: &EventId,
) -> AppResult<(Sent, EventStatus)> {
    let d = st.store.get_event(&bot.id, event_id).await?;
    let Some(default) = d.deliveries.iter().find(|x| x.endpoint_id.is_none()) else {
        return Err(AppError::Store(StoreError::NotFound));
    };
    if !default.status.is_active() {
        let r = Redeliver {
            chatbot_id: bot.id.clone(),
            event_id: event_id.clone(),
            endpoint: Some(EndpointSel::Default),
            now_ms: st.now_ms(),
        };
        st.store.redeliver(r).await?;
    }
    let sent = send_at_once(st, bot, event_id).await?;
    let status = st.store.get_event(&bot.id, event_id).await?.event.status;
    Ok((sent, status))
}
