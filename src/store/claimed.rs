//! A delivery as a worker claims it, and the outcome of one attempt to
//! send it, as the queue and the fan-out record it.

use crate::domain::ids::{ChatbotId, ConversationId, EventId};
use crate::domain::model::Chatbot;
use crate::domain::status::EventStatus;

/// A delivery claimed by a worker.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub seq: i64,
    pub event_id: EventId,
    pub chatbot_id: ChatbotId,
    pub conversation_id: ConversationId,
    pub payload: bytes::Bytes,
    /// Attempts made before this one.
    pub attempts: u32,
    /// Attempts made before the last redeliver: a redelivered event gets a
    /// fresh retry budget while attempt numbers keep counting.
    pub attempt_base: u32,
    /// The `traceparent` its deliveries continue.
    pub trace: Option<String>,
    /// Its chatbot as read in the transaction that committed the event or
    /// made it its conversation's head, when the store had it at hand (the
    /// dispatcher reads it otherwise).
    pub bot: Option<std::sync::Arc<Chatbot>>,
}

/// What a claim asks for: up to `limit` due deliveries that head their
/// conversation, each leased until `lease_until`, within `room`: the
/// chatbots to pass over (the events, the default endpoints' deliveries)
/// or each other endpoint's room (`fanout::Rooms`).
#[derive(Debug, Clone)]
pub struct ClaimAsk<R = Vec<ChatbotId>> {
    pub now_ms: i64,
    pub lease_until: i64,
    pub limit: usize,
    pub room: R,
}

/// What one claim took, and when it took fewer than asked, when the next
/// delivery it left falls due (so that the claim loop need not ask).
#[derive(Debug, Default)]
pub struct Claim {
    pub claimed: Vec<Claimed>,
    /// `Some` after a short claim: the earliest time (ms) a delivery falls
    /// due or its lease ends (`None` inside: no delivery is waiting). `None`
    /// after a full claim, which the loop follows with another at once.
    pub next_due_at: Option<Option<i64>>,
}

/// The outcome of one delivery attempt, recorded in one batch with others.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub event_id: EventId,
    /// The event's row (`Claimed::seq`).
    pub seq: i64,
    pub conversation_id: ConversationId,
    pub number: u32,
    pub at_ms: i64,
    pub status_code: Option<u16>,
    pub duration_ms: i64,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
    /// The request headers sent, as a JSON object (`None` when nothing was sent).
    pub request_headers: Option<String>,
    pub next: AttemptNext,
}

impl Claimed {
    /// A new event as its first delivery, handed out by the transaction
    /// that inserted it as `seq` (its conversation's head).
    pub fn fresh(
        seq: i64,
        e: crate::store::NewEvent,
        bot: Option<std::sync::Arc<Chatbot>>,
    ) -> Self {
        Self {
            seq,
            event_id: e.id,
            chatbot_id: e.chatbot_id,
            conversation_id: e.conversation_id,
            payload: bytes::Bytes::from(e.payload),
            attempts: 0,
            attempt_base: 0,
            trace: e.trace,
            bot,
        }
    }

    /// A claim of event `id` of chatbot `bot` in conversation `conv`, not
    /// yet tried, with an empty payload (for tests of the queue's
    /// bookkeeping).
    #[cfg(test)]
    pub fn sample(id: &str, bot: &str, conv: &str) -> Self {
        Self {
            seq: 0,
            event_id: EventId::stored(id),
            chatbot_id: ChatbotId::stored(bot),
            conversation_id: ConversationId::stored(conv),
            payload: bytes::Bytes::new(),
            attempts: 0,
            attempt_base: 0,
            trace: None,
            bot: None,
        }
    }
}

impl AttemptRecord {
    /// A fan-out delivery's `next_attempt_at` after this attempt: the
    /// retry's time, the attempt's own for an endpoint gone (it waits for
    /// the endpoint to be enabled), 0 once it ended.
    pub fn delivery_next_at(&self) -> i64 {
        match self.next {
            AttemptNext::Succeeded | AttemptNext::Dead | AttemptNext::Skipped => 0,
            AttemptNext::RetryAt(t) => t,
            AttemptNext::EndpointGone => self.at_ms,
        }
    }

    /// Attempt `number` of claimed delivery `c`, made at `at_ms`, leading
    /// to `next`; nothing sent or heard yet.
    pub fn of(c: &Claimed, number: u32, at_ms: i64, next: AttemptNext) -> Self {
        Self {
            event_id: c.event_id.clone(),
            seq: c.seq,
            conversation_id: c.conversation_id.clone(),
            number,
            at_ms,
            status_code: None,
            duration_ms: 0,
            error: None,
            response_excerpt: None,
            request_headers: None,
            next,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AttemptNext {
    Succeeded,
    /// Retry at this time (ms since epoch).
    RetryAt(i64),
    Dead,
    /// The endpoint said `410 Gone`: disable it; the delivery waits.
    EndpointGone,
    /// The default endpoint's event types or filter do not take the event:
    /// nothing was sent, no attempt is recorded, and the conversation's
    /// next event becomes the head as after a success.
    Skipped,
}

impl AttemptNext {
    /// The status stored for the event or delivery after the attempt:
    /// [`Self::status`], or `skipped`.
    pub fn status_str(self) -> &'static str {
        match self {
            AttemptNext::Skipped => "skipped",
            other => other.status().as_str(),
        }
    }

    /// Whether the attempt ends the event or delivery (nothing more is sent
    /// for it, and the next one of its conversation may go).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            AttemptNext::Succeeded | AttemptNext::Dead | AttemptNext::Skipped
        )
    }

    /// The event's status after the attempt: a retry or a disabled endpoint
    /// leaves it `failed` (still queued).
    pub fn status(self) -> EventStatus {
        match self {
            AttemptNext::Succeeded | AttemptNext::Skipped => EventStatus::Succeeded,
            AttemptNext::Dead => EventStatus::Dead,
            AttemptNext::RetryAt(_) | AttemptNext::EndpointGone => EventStatus::Failed,
        }
    }
}
