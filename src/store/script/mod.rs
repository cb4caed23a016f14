//! The transaction scripts of the write use cases, written once for both
//! stores: a click or submit, a reviewer's answer, the close of an
//! interaction, a `response_url` reply, a bot's message and a takeover.
//!
//! The domain decides (`domain::interact`, `domain::inbox`); a script loads
//! what the decision needs through [`Tx`], asks the domain, and applies the
//! decision through [`Tx`] again. Each store implements [`Tx`] over its own
//! transaction: PostgreSQL with row locks and `await`, SQLite on its writer
//! thread, where every step is ready at once and [`now`] runs a script to
//! its end without a runtime.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::interact::Action;
use crate::domain::model::{Chatbot, Message};
use crate::store::{ApiEvent, Signals};
use crate::store::{Claimed, Interacted, NewEvent, StoreError, StoreResult, StreamEvent};

pub mod clicks;
pub mod inbox;
pub mod messages;
pub mod reply;

/// A conversation as a click needs it.
#[derive(Debug, Clone)]
pub struct Party {
    pub chatbot_id: crate::domain::ids::ChatbotId,
    pub retention_ms: i64,
    pub created_at: i64,
    pub taken_over: bool,
    /// The chatbot whole, when the store has it at hand (its event then
    /// goes to the dispatcher with it).
    pub bot: Option<Arc<Chatbot>>,
}

/// One open transaction of a store: every step a script takes. Reads of
/// rows a script goes on to change lock them where the store has row locks
/// (messages first, then their interactions, then the conversation).
///
/// The steps are `async fn`s without a `Send` bound: scripts run only on a
/// concrete store, whose futures keep their own `Send`-ness (SQLite's
/// connection is not `Sync` and never leaves its writer thread).
#[allow(async_fn_in_trait)]
pub trait Tx {
    /// A live (not deleted) message, locked; `NotFound` if there is none.
    async fn message(&mut self, id: &str) -> StoreResult<Message>;
    /// The live messages of a conversation, locked.
    async fn live_messages(&mut self, conversation_id: &str) -> StoreResult<Vec<Message>>;
    /// Inserts a message; returns its JSON as written.
    async fn insert_message(&mut self, m: &Message) -> StoreResult<String>;
    /// Saves a message; returns its JSON as written.
    async fn save_message(&mut self, m: &Message) -> StoreResult<String>;
    async fn delete_message(&mut self, id: &str) -> StoreResult<()>;
    /// The message's JSON when the store keeps it (an unchanged message
    /// serialised once for many clicks).
    fn message_json(&self, _m: &Message) -> Option<Arc<str>> {
        None
    }
    async fn append_stream(
        &mut self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> StoreResult<StreamEvent>;

    /// Whether the conversation is still there (not erased or purged).
    async fn conversation_exists(&mut self, id: &str) -> StoreResult<bool>;
    /// The conversation's chatbot (with its retention), age and takeover.
    async fn party(&mut self, conversation_id: &str) -> StoreResult<Party>;
    /// Marks the conversation as taken over by `member` (its JSON); false
    /// when there is no such conversation.
    async fn take_over(&mut self, conversation_id: &str, member: &str) -> StoreResult<bool>;

    /// An interaction, not locked (locks go message first).
    async fn interaction(&mut self, id: &str) -> StoreResult<Interaction>;
    /// The interactions of a message, locked.
    async fn interactions_of(&mut self, message_id: &str) -> StoreResult<Vec<Interaction>>;
    /// The interactions an action on `msg` may concern, locked: the pending
    /// and asked ones, and every one when the action's block is gone.
    async fn interactions_for(
        &mut self,
        msg: &Message,
        action: &Action,
    ) -> StoreResult<Vec<Interaction>>;
    /// The pending interactions of a conversation, locked.
    async fn pending_interactions(
        &mut self,
        conversation_id: &str,
    ) -> StoreResult<Vec<Interaction>>;
    /// Inserts an interaction; an `ask` while another ask of the
    /// conversation is pending is `DialogPending`.
    async fn insert_interaction(&mut self, i: &NewInteraction, now_ms: i64) -> StoreResult<()>;
    async fn save_interaction(&mut self, i: &Interaction) -> StoreResult<()>;

    /// Enqueues an event; returns it as a delivery to hand out at once when
    /// the store hands out deliveries itself and the event heads its
    /// conversation.
    async fn insert_event(&mut self, e: NewEvent) -> StoreResult<Option<Claimed>>;

    /// A reviewer's answer kept under its `Idempotency-Key`: the body's hash
    /// and the result.
    async fn answer_record(
        &mut self,
        interaction_id: &str,
        key: &str,
    ) -> StoreResult<Option<(String, String)>>;
    /// Keeps `result` as the answer `req` gave under its key.
    async fn put_answer_record(
        &mut self,
        req: &crate::store::AnswerRequest,
        result: &str,
    ) -> StoreResult<()>;
    /// How often a response_url was used (which serialises its uses) and,
    /// with a key, the result kept under it.
    async fn reply_state(
        &mut self,
        event_id: &str,
        key: Option<&str>,
    ) -> StoreResult<(i64, Option<String>)>;
    /// Counts one use of a response_url and, with a key, keeps its record
    /// under it.
    async fn count_reply(&mut self, event_id: &str, kept: Option<(&str, &str)>) -> StoreResult<()>;
}

/// Everything a write produced, to announce after its commit.
#[derive(Debug, Default)]
pub struct Announce {
    pub stream: Vec<StreamEvent>,
    pub api: Vec<ApiEvent>,
}

impl Announce {
    /// Hands the entries to this instance's streams and waiters.
    pub fn publish(self, signals: &dyn Signals) {
        signals.stream(self.stream);
        signals.api(self.api);
    }

    fn api(&mut self, chatbot_id: &str, i: &Interaction, kind: &'static str, now_ms: i64) {
        self.api.push(ApiEvent {
            chatbot_id: crate::domain::ids::ChatbotId::stored(chatbot_id),
            interaction_id: i.id.clone(),
            kind,
            data: i.to_json(now_ms),
        });
    }
}

/// What an accepted click, submit or answer wrote.
pub struct Effects {
    pub out: Interacted,
    pub announce: Announce,
    pub answered: Option<Interaction>,
    /// The event, to hand out at once when it heads its conversation.
    pub hot: Option<Claimed>,
}

/// Runs a script whose steps never wait (SQLite's, on its writer thread)
/// to its end. A step that waited would be a fault of the store.
pub fn now<T>(script: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
    let mut script = std::pin::pin!(script);
    match script
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(r) => r,
        Poll::Pending => Err(StoreError::Backend(
            "a synchronous transaction step waited".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_that_never_waits_runs_to_its_end() {
        assert_eq!(now(async { Ok(7) }).ok(), Some(7));
    }

    #[test]
    fn a_script_that_waits_is_a_store_fault_not_a_hang() {
        let r: StoreResult<()> = now(std::future::pending());
        assert!(matches!(r, Err(StoreError::Backend(_))));
    }
}
