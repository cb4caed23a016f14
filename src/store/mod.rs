//! The storage seam. Handlers and the delivery worker see only [`Store`];
//! `sqlite` implements it with one group-committing writer thread.

#[macro_use]
mod role;

pub mod cache;
pub mod circuit;
mod claimed;
pub mod endpoints;
mod event_detail;
pub mod fanout;
pub mod guarded;
pub mod pace;
pub mod postgres;
mod reply;
mod review;
pub mod script;
pub mod signals;
pub mod sqlite;

pub use claimed::*;
pub use event_detail::*;
pub use reply::*;
pub use review::*;

use crate::domain::ids::{ChatbotId, ConversationId, EventId, InteractionId, MessageId};
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::domain::error::Rejection;
use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::interact::Action;
use crate::domain::model::{Chatbot, Conversation, Message, Person};
use crate::domain::origins::AllowedOrigins;
use crate::domain::status::{EventStatus, InteractionStatus};

pub use endpoints::Endpoints;
pub use signals::{ApiEvent, Signals};

pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// What every store method returns: a future of its result.
pub type StoreFut<'a, T> = BoxFut<'a, StoreResult<T>>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    /// A decision of the domain taken inside a transaction.
    #[error("{0}")]
    Rejected(Rejection),
    #[error("storage error: {0}")]
    Backend(String),
    /// The storage cannot be reached now (a database restarting or failing
    /// over, no connection free in time); the same request may succeed a
    /// moment later.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

/// A stored document that does not parse, or a document that does not
/// serialise: a fault of the storage, as the backends' own errors.
impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Backend(e.to_string())
    }
}

/// The storage's files and threads (a directory, a thread spawned).
impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::Backend(e.to_string())
    }
}

impl From<Rejection> for StoreError {
    fn from(r: Rejection) -> Self {
        StoreError::Rejected(r)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A page of a collection, newest first.
#[derive(Debug)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

/// A page of `limit` from `rows` read with one more than `limit`: the
/// cursor is the key of its last row when there are more.
pub fn page_by_key<T>(mut rows: Vec<T>, limit: usize, key: impl Fn(&T) -> String) -> Page<T> {
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(key)
    } else {
        None
    };
    Page {
        data: rows,
        next_cursor,
    }
}

/// A page of `limit` from rows read with one more than `limit`, each with
/// its sequence number: the cursor is the last one's when there are more.
pub fn page_by_seq<T>(rows: Vec<(T, i64)>, limit: usize) -> Page<T> {
    let page = page_by_key(rows, limit, |(_, seq)| seq.to_string());
    Page {
        data: page.data.into_iter().map(|(x, _)| x).collect(),
        next_cursor: page.next_cursor,
    }
}

/// A conversation as the bot's key lists it.
#[derive(Debug, Clone)]
pub struct ConversationSummary {
    pub conversation: Conversation,
    /// When its newest message was posted, if it has one.
    pub last_message_at: Option<i64>,
    /// Its interactions still waiting for an answer (deadline not passed).
    pub pending_interactions: i64,
}

/// An event to enqueue for delivery in the same transaction as its cause.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub id: EventId,
    pub chatbot_id: ChatbotId,
    pub conversation_id: ConversationId,
    pub event_type: &'static str,
    pub payload: Vec<u8>,
    pub created_at: i64,
    /// The W3C `traceparent` of the request that caused it, continued by
    /// every delivery of it.
    pub trace: Option<String>,
}

/// A widget-stream entry (`message.created`, `message.updated`,
/// `message.deleted`, `typing`), kept so that a reconnect can replay.
#[derive(Debug, Clone)]
pub struct StreamEvent {
    pub seq: i64,
    pub conversation_id: ConversationId,
    pub kind: String,
    pub data: String,
}

/// One page of a chatbot's list: the rows `filter` takes after `cursor`,
/// at most `limit`, as they stand at `now_ms`.
#[derive(Debug, Clone)]
pub struct PageAsk<F, C = i64> {
    pub chatbot_id: ChatbotId,
    pub filter: F,
    pub limit: usize,
    pub cursor: Option<C>,
    pub now_ms: i64,
}

/// A pending interaction ended: `status` (`expired` or `cancelled`) with
/// `reason` on its blocks, at `now_ms`.
#[derive(Debug, Clone)]
pub struct Closing {
    pub id: InteractionId,
    pub status: crate::domain::status::InteractionStatus,
    pub reason: &'static str,
    pub now_ms: i64,
}

impl Closing {
    fn new(
        id: &InteractionId,
        status: crate::domain::status::InteractionStatus,
        reason: &'static str,
        now_ms: i64,
    ) -> Self {
        Self {
            id: id.clone(),
            status,
            reason,
            now_ms,
        }
    }

    /// Past its deadline.
    pub fn expired(id: &InteractionId, now_ms: i64) -> Self {
        Self::new(
            id,
            crate::domain::status::InteractionStatus::Expired,
            "expired",
            now_ms,
        )
    }

    /// Withdrawn by whoever asked it.
    pub fn withdrawn(id: &InteractionId, now_ms: i64) -> Self {
        Self::new(
            id,
            crate::domain::status::InteractionStatus::Cancelled,
            "withdrawn",
            now_ms,
        )
    }

    /// Its conversation was taken over.
    pub fn taken_over(id: &InteractionId, now_ms: i64) -> Self {
        Self::new(
            id,
            crate::domain::status::InteractionStatus::Cancelled,
            "takeover",
            now_ms,
        )
    }
}

/// A message to store, with the event it raises (a visitor's message) and
/// the interactions its blocks open (a bot's, or a question asked).
#[derive(Debug, Clone)]
pub struct Posting {
    pub message: Message,
    pub event: Option<NewEvent>,
    pub interactions: Vec<NewInteraction>,
}

/// Who acts, and the event an accepted action becomes: minted outside the
/// transaction (nothing stored yet).
#[derive(Debug, Clone)]
pub struct Acting {
    pub user: Person,
    pub event_id: EventId,
    pub response_url: String,
    pub now_ms: i64,
    pub interactive_window_ms: i64,
    /// The request's `traceparent`, kept with the event.
    pub trace: Option<String>,
}

/// A click or submit, with everything decided outside the transaction.
#[derive(Debug, Clone)]
pub struct InteractRequest {
    pub message_id: MessageId,
    /// The conversation the caller may act in (the visitor token's).
    pub conversation_id: ConversationId,
    pub action: Action,
    pub by: Acting,
}

/// A reviewer's answer to an interaction (`POST /api/v1/interactions/{id}/responses`).
#[derive(Debug, Clone)]
pub struct AnswerRequest {
    pub interaction_id: InteractionId,
    pub chatbot_id: ChatbotId,
    pub idempotency_key: String,
    pub body: Value,
    /// Hash of the body, to tell a retry from a conflicting reuse of the key.
    pub body_hash: String,
    pub by: Acting,
}

pub enum AnswerOutcome {
    Answered(Box<Interaction>),
    /// The idempotency key was used before with the same body: the first result.
    Repeated(Value),
}

/// A filter for listing interactions.
#[derive(Debug, Clone, Default)]
pub struct InteractionFilter {
    pub status: Option<InteractionStatus>,
    pub conversation_id: Option<String>,
}

/// What an accepted interaction produced.
#[derive(Debug, Clone)]
pub struct Interacted {
    pub message: Message,
    pub typing: bool,
    /// `message` as JSON, when the store had it at hand (an unchanged
    /// message serialized once for many clicks).
    pub json: Option<std::sync::Arc<str>>,
}

/// Queue depth and the age of the oldest waiting delivery, for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct QueueStats {
    pub pending: i64,
    pub oldest_pending_created_at: Option<i64>,
}

/// Everything the service asks of its storage: one role trait per part of
/// the service, each implemented by a store in the file of that job. The
/// write use cases inside them run one transaction script for both stores
/// (see [`script`]).
pub trait Store:
    Accounts
    + Review
    + Conversations
    + Inbox
    + Queue
    + Deliveries
    + Lifecycle
    + Endpoints
    + fanout::Fanout
    + Send
    + Sync
    + 'static
{
    /// Whether other instances may write this store too (PostgreSQL): then
    /// nothing an instance holds in memory is the whole truth — streams poll
    /// the store, and leases of a previous run are not void at start.
    fn shared(&self) -> bool {
        false
    }
    /// Whether the store takes a write now: what the circuit around it
    /// asks before it lets requests through again (see [`circuit`]).
    fn probe(&self) -> StoreFut<'_, ()> {
        Box::pin(async move { self.queue_stats().await.map(|_| ()) })
    }
}

store_role! {
    /// Chatbots and their conversations: created, read, updated, listed.
    pub trait Accounts {
        /// A value kept across restarts (admin token hash, server key); `init`
        /// is stored when none is there yet. Returns the stored value.
        bg fn meta_get_or_init(&self, key: &str, init: String) -> String;
        write fn create_chatbot(&self, bot: Chatbot, api_key_hash: String) -> ();
        read fn get_chatbot(&self, id: &str) -> Chatbot;
        read fn chatbot_by_key(&self, api_key_hash: &str) -> Chatbot;
        /// Saves name, url, retention, secrets and the endpoint flag.
        write fn update_chatbot(&self, bot: Chatbot) -> ();
        write fn create_conversation(&self, conv: Conversation, token_hash: String) -> ();
        read fn get_conversation(&self, id: &str) -> Conversation;
        /// A visitor token's conversation, with its chatbot's `allowed_origins`
        /// (checked against the `Origin` of every widget call).
        read fn conversation_by_token(&self, token_hash: &str) -> (Conversation, AllowedOrigins);
        /// Every chatbot, newest first; the cursor is the last id of a page.
        read fn list_chatbots(&self, limit: usize, cursor: Option<String>) -> Page<Chatbot>;
        /// A chatbot's conversations, newest first (ids are time-ordered); the
        /// cursor is the last id of a page.
        read fn list_conversations(&self, ask: PageAsk<(), String>) -> Page<ConversationSummary>;
    }
}

store_role! {
    /// Messages, their attachments and the conversation stream; a takeover.
    pub trait Conversations {
        /// A member takes over: blocks turn off with reason `takeover`.
        write fn takeover(&self, conversation_id: &str, member: Person, now_ms: i64) -> ();
        /// Stores a message (and, for a visitor's message, its event) in one
        /// transaction, with its `message.created` stream entry.
        /// With `interactions`, also records them; an `ask` interaction while
        /// another ask of the conversation is pending is a 409 `dialog_pending`.
        write fn insert_message(&self, p: Posting) -> ();
        read fn get_message(&self, id: &str) -> Message;
        /// Stores an ask's attachment (before its message; deleted with its
        /// conversation).
        write fn insert_attachment(&self, a: crate::domain::attachment::Attachment) -> ();
        /// An attachment with its bytes; `NotFound` if there is none.
        read fn get_attachment(&self, id: &str) -> crate::domain::attachment::Attachment;
        /// Removes an attachment whose message was refused.
        write fn delete_attachment(&self, id: &str) -> ();
        read fn list_messages(&self, conversation_id: &str, limit: usize, cursor: Option<i64>) -> Page<Message>;
        read fn stream_since(&self, conversation_id: &str, after_seq: i64, limit: usize) -> Vec<StreamEvent>;
        /// Records a transient stream entry (`typing`).
        write fn append_stream(&self, conversation_id: &str, kind: &str, data: String) -> StreamEvent;
    }
}

store_role! {
    /// Clicks, submits and answers; interactions read and closed; replies.
    pub trait Inbox {
        /// Applies a click or submit atomically: block state, event and stream
        /// entry in one transaction, or nothing.
        write fn interact(&self, req: InteractRequest) -> Interacted;
        read fn get_interaction(&self, chatbot_id: &str, id: &str) -> Interaction;
        read fn list_interactions(&self, ask: PageAsk<InteractionFilter>) -> Page<Interaction>;
        /// Answers an interaction as a member, atomically, with the same effects
        /// as a visitor's click or submit.
        write fn answer_interaction(&self, req: AnswerRequest) -> AnswerOutcome;
        /// Ends a pending interaction (`expired` or `cancelled`), turning its
        /// blocks off with `reason`. Returns the interaction as it then stands
        /// (already answered if the answer won the race).
        write fn close_interaction(&self, c: Closing) -> Interaction;
        /// Applies one use of a response_url.
        write fn reply(&self, req: ReplyRequest) -> ReplyOutcome;
    }
}

store_role! {
    /// The delivery queue as the dispatcher works it.
    pub trait Queue {
        /// Claims what `ask` asks for, skipping disabled endpoints too.
        read fn claim_due(&self, ask: ClaimAsk) -> Claim;
        /// Like [`Self::claim_due`], but only what the store queued for this
        /// instance as its events committed (announced by
        /// [`Signals::events_queued`]); the table is not read, and the
        /// next due time is the one the last claim of the table reported.
        read fn claim_queued(&self, ask: ClaimAsk) -> Claim = {
            self.claim_due(ask)
        };
        /// Gives back what is queued for this instance and queues no more (on
        /// shutdown, once the claim loop has stopped).
        bg fn stop_queueing(&self) -> () = {
            Box::pin(async { Ok(()) })
        };
        /// Records attempts and moves each delivery on, in one transaction.
        bg fn record_attempts(&self, records: Vec<AttemptRecord>) -> ();
        /// Releases all leases (on start of a single instance, and on shutdown).
        bg fn release_leases(&self, event_ids: Option<Vec<EventId>>) -> ();
        /// Gives back claimed deliveries that found no room to start, to be
        /// claimed again first.
        bg fn give_back(&self, claims: Vec<Claimed>) -> () = {
            self.release_leases(Some(claims.into_iter().map(|c| c.event_id).collect()))
        };
        /// Time (ms) of the earliest future attempt, to sleep until.
        read fn next_due_at(&self) -> Option<i64>;
        read fn queue_stats(&self) -> QueueStats;
    }
}

store_role! {
    /// The deliveries log: read, redelivered, a test event queued.
    pub trait Deliveries {
        read fn list_events(&self, ask: PageAsk<EventFilter>) -> Page<EventSummary>;
        read fn get_event(&self, chatbot_id: &str, event_id: &str) -> EventDetail;
        /// Delivers an event again: to one endpoint, or (`None`) to every
        /// endpoint it went to. `NotFound` when it has no delivery there.
        write fn redeliver(&self, r: Redeliver) -> ();
        /// Redelivers every delivery of the chatbot in `status` (`dead` or
        /// `failed`) of an event created at or after `since` (to one endpoint,
        /// or to all), each as one redelivery. Returns how many.
        write fn redeliver_all(&self, which: RedeliverAll) -> u64;
        /// Queues an event that has no cause in a conversation (`webhook.test`);
        /// its `conversation_id` is its own delivery lane.
        write fn enqueue_event(&self, event: NewEvent) -> ();
        /// Queues such an event to one endpoint other than the default only,
        /// whatever its filter (`POST /api/v1/endpoints/{id}/test`). `NotFound`
        /// when the chatbot has no such endpoint.
        write fn enqueue_event_to(&self, event: NewEvent, endpoint_id: &str) -> ();
    }
}

store_role! {
    /// Erasure and the retention purge.
    pub trait Lifecycle {
        /// Erases conversation `conversation_id` of `chatbot_id` now, with
        /// everything in it, its undelivered events included (`NotFound` when
        /// it is not that chatbot's).
        write fn erase_conversation(&self, chatbot_id: &str, conversation_id: &str) -> ();
        /// One pass of the retention purge at `now_ms`: every conversation
        /// older than its chatbot's retention whose events have all ended is
        /// deleted with everything in it, in batches of at most
        /// [`PURGE_BATCH`]. Returns how many were deleted.
        bg fn purge_expired(&self, now_ms: i64) -> u64;
    }
}

/// Most conversations one purge transaction deletes.
pub const PURGE_BATCH: usize = 500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_leaves_its_event_in_the_status_stored_today() {
        assert_eq!(AttemptNext::Succeeded.status().as_str(), "succeeded");
        assert_eq!(AttemptNext::Dead.status().as_str(), "dead");
        assert_eq!(AttemptNext::RetryAt(5).status().as_str(), "failed");
        assert_eq!(AttemptNext::EndpointGone.status().as_str(), "failed");
    }
}
