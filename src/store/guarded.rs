//! A store behind its [`Circuit`]: every role of the store it wraps, each
//! call bounded and counted (see [`super::circuit`]). The background
//! bookkeeping that retries on its own (attempt records, leases given
//! back, the retention purge) is counted and turned away while the circuit
//! is open, but not cut at the bound: it waits for the store as long as it
//! takes.

use std::sync::Arc;

use super::circuit::{Call, Circuit};
use super::*;
use crate::domain::endpoints::Endpoint;

pub struct Guarded<S> {
    inner: S,
    circuit: Arc<Circuit>,
}

impl<S: Store> Guarded<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            circuit: Arc::new(Circuit::new()),
        }
    }

    fn through<'a, T: Send + 'a>(
        &'a self,
        call: Call,
        f: BoxFut<'a, StoreResult<T>>,
    ) -> BoxFut<'a, StoreResult<T>> {
        Box::pin(self.circuit.run(call, || self.inner.probe(), f))
    }

    /// A request's read.
    fn read<'a, T: Send + 'a>(
        &'a self,
        f: BoxFut<'a, StoreResult<T>>,
    ) -> BoxFut<'a, StoreResult<T>> {
        self.through(Call::Read, f)
    }

    /// A request's write.
    fn go<'a, T: Send + 'a>(&'a self, f: BoxFut<'a, StoreResult<T>>) -> BoxFut<'a, StoreResult<T>> {
        self.through(Call::Write, f)
    }

    /// Bookkeeping that retries by itself.
    fn bg<'a, T: Send + 'a>(&'a self, f: BoxFut<'a, StoreResult<T>>) -> BoxFut<'a, StoreResult<T>> {
        self.through(Call::Background, f)
    }
}

impl<S: Store> Store for Guarded<S> {
    fn shared(&self) -> bool {
        self.inner.shared()
    }
    fn probe(&self) -> BoxFut<'_, StoreResult<()>> {
        self.inner.probe()
    }
}

impl<S: Store> Accounts for Guarded<S> {
    fn meta_get_or_init(&self, key: &str, init: String) -> BoxFut<'_, StoreResult<String>> {
        self.bg(self.inner.meta_get_or_init(key, init))
    }
    fn create_chatbot(&self, bot: Chatbot, api_key_hash: String) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.create_chatbot(bot, api_key_hash))
    }
    fn get_chatbot(&self, id: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        self.read(self.inner.get_chatbot(id))
    }
    fn chatbot_by_key(&self, api_key_hash: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        self.read(self.inner.chatbot_by_key(api_key_hash))
    }
    fn update_chatbot(&self, bot: Chatbot) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.update_chatbot(bot))
    }
    fn create_conversation(
        &self,
        conv: Conversation,
        token_hash: String,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.create_conversation(conv, token_hash))
    }
    fn get_conversation(&self, id: &str) -> BoxFut<'_, StoreResult<Conversation>> {
        self.read(self.inner.get_conversation(id))
    }
    fn conversation_by_token(
        &self,
        token_hash: &str,
    ) -> BoxFut<'_, StoreResult<(Conversation, AllowedOrigins)>> {
        self.read(self.inner.conversation_by_token(token_hash))
    }
    fn list_chatbots(
        &self,
        limit: usize,
        cursor: Option<String>,
    ) -> BoxFut<'_, StoreResult<Page<Chatbot>>> {
        self.read(self.inner.list_chatbots(limit, cursor))
    }
    fn list_conversations(
        &self,
        chatbot_id: &str,
        limit: usize,
        cursor: Option<String>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<ConversationSummary>>> {
        self.read(
            self.inner
                .list_conversations(chatbot_id, limit, cursor, now_ms),
        )
    }
}

impl<S: Store> Conversations for Guarded<S> {
    fn takeover(
        &self,
        conversation_id: &str,
        member: Person,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.takeover(conversation_id, member, now_ms))
    }
    fn insert_message(
        &self,
        msg: Message,
        event: Option<NewEvent>,
        interactions: Vec<NewInteraction>,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.insert_message(msg, event, interactions))
    }
    fn get_message(&self, id: &str) -> BoxFut<'_, StoreResult<Message>> {
        self.read(self.inner.get_message(id))
    }
    fn insert_attachment(
        &self,
        a: crate::domain::attachment::Attachment,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.insert_attachment(a))
    }
    fn get_attachment(
        &self,
        id: &str,
    ) -> BoxFut<'_, StoreResult<crate::domain::attachment::Attachment>> {
        self.read(self.inner.get_attachment(id))
    }
    fn delete_attachment(&self, id: &str) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.delete_attachment(id))
    }
    fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<Message>>> {
        self.read(self.inner.list_messages(conversation_id, limit, cursor))
    }
    fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> BoxFut<'_, StoreResult<Vec<StreamEvent>>> {
        self.read(self.inner.stream_since(conversation_id, after_seq, limit))
    }
    fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> BoxFut<'_, StoreResult<StreamEvent>> {
        self.go(self.inner.append_stream(conversation_id, kind, data))
    }
}

impl<S: Store> Inbox for Guarded<S> {
    fn interact(&self, req: InteractRequest) -> BoxFut<'_, StoreResult<Interacted>> {
        self.go(self.inner.interact(req))
    }
    fn get_interaction(&self, chatbot_id: &str, id: &str) -> BoxFut<'_, StoreResult<Interaction>> {
        self.read(self.inner.get_interaction(chatbot_id, id))
    }
    fn list_interactions(
        &self,
        chatbot_id: &str,
        filter: InteractionFilter,
        limit: usize,
        cursor: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<Interaction>>> {
        self.read(
            self.inner
                .list_interactions(chatbot_id, filter, limit, cursor, now_ms),
        )
    }
    fn answer_interaction(&self, req: AnswerRequest) -> BoxFut<'_, StoreResult<AnswerOutcome>> {
        self.go(self.inner.answer_interaction(req))
    }
    fn close_interaction(
        &self,
        id: &str,
        status: InteractionStatus,
        reason: &'static str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Interaction>> {
        self.go(self.inner.close_interaction(id, status, reason, now_ms))
    }
    fn reply(&self, req: ReplyRequest) -> BoxFut<'_, StoreResult<ReplyOutcome>> {
        self.go(self.inner.reply(req))
    }
}

impl<S: Store> Queue for Guarded<S> {
    fn claim_due(
        &self,
        now_ms: i64,
        lease_until: i64,
        limit: usize,
        skip: Vec<String>,
    ) -> BoxFut<'_, StoreResult<Claim>> {
        self.read(self.inner.claim_due(now_ms, lease_until, limit, skip))
    }
    fn claim_queued(
        &self,
        now_ms: i64,
        lease_until: i64,
        limit: usize,
        skip: Vec<String>,
    ) -> BoxFut<'_, StoreResult<Claim>> {
        self.read(self.inner.claim_queued(now_ms, lease_until, limit, skip))
    }
    fn stop_queueing(&self) -> BoxFut<'_, StoreResult<()>> {
        self.bg(self.inner.stop_queueing())
    }
    fn record_attempts(&self, records: Vec<AttemptRecord>) -> BoxFut<'_, StoreResult<()>> {
        self.bg(self.inner.record_attempts(records))
    }
    fn release_leases(&self, event_ids: Option<Vec<String>>) -> BoxFut<'_, StoreResult<()>> {
        self.bg(self.inner.release_leases(event_ids))
    }
    fn give_back(&self, claims: Vec<Claimed>) -> BoxFut<'_, StoreResult<()>> {
        self.bg(self.inner.give_back(claims))
    }
    fn next_due_at(&self) -> BoxFut<'_, StoreResult<Option<i64>>> {
        self.read(self.inner.next_due_at())
    }
    fn queue_stats(&self) -> BoxFut<'_, StoreResult<QueueStats>> {
        self.read(self.inner.queue_stats())
    }
}

impl<S: Store> Deliveries for Guarded<S> {
    fn list_events(
        &self,
        chatbot_id: &str,
        filter: EventFilter,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<EventSummary>>> {
        self.read(self.inner.list_events(chatbot_id, filter, limit, cursor))
    }
    fn get_event(&self, chatbot_id: &str, event_id: &str) -> BoxFut<'_, StoreResult<EventDetail>> {
        self.read(self.inner.get_event(chatbot_id, event_id))
    }
    fn redeliver(
        &self,
        chatbot_id: &str,
        event_id: &str,
        endpoint: Option<EndpointSel>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.redeliver(chatbot_id, event_id, endpoint, now_ms))
    }
    fn redeliver_all(
        &self,
        chatbot_id: &str,
        status: EventStatus,
        since: Option<i64>,
        endpoint: Option<EndpointSel>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<u64>> {
        self.go(self
            .inner
            .redeliver_all(chatbot_id, status, since, endpoint, now_ms))
    }
    fn enqueue_event(&self, event: NewEvent) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.enqueue_event(event))
    }
    fn enqueue_event_to(&self, event: NewEvent, endpoint_id: &str) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.enqueue_event_to(event, endpoint_id))
    }
}

impl<S: Store> Lifecycle for Guarded<S> {
    fn erase_conversation(
        &self,
        chatbot_id: &str,
        conversation_id: &str,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.erase_conversation(chatbot_id, conversation_id))
    }
    fn purge_expired(&self, now_ms: i64) -> BoxFut<'_, StoreResult<u64>> {
        self.bg(self.inner.purge_expired(now_ms))
    }
}

impl<S: Store> fanout::Fanout for Guarded<S> {
    fn unrouted(&self, limit: usize) -> BoxFut<'_, StoreResult<Vec<fanout::Unrouted>>> {
        self.bg(self.inner.unrouted(limit))
    }
    fn routes_of(
        &self,
        chatbot_ids: Vec<String>,
    ) -> BoxFut<'_, StoreResult<Vec<fanout::EndpointRoute>>> {
        self.bg(self.inner.routes_of(chatbot_ids))
    }
    fn default_settings(
        &self,
        chatbot_id: &str,
    ) -> BoxFut<'_, StoreResult<Option<fanout::DefaultSettings>>> {
        self.read(self.inner.default_settings(chatbot_id))
    }
    fn route(
        &self,
        deliveries: Vec<fanout::NewDelivery>,
        routed: Vec<i64>,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.bg(self.inner.route(deliveries, routed))
    }
    fn claim_deliveries(
        &self,
        now_ms: i64,
        lease_until: i64,
        limit: usize,
        rooms: fanout::Rooms,
    ) -> BoxFut<'_, StoreResult<Vec<fanout::ClaimedDelivery>>> {
        self.read(
            self.inner
                .claim_deliveries(now_ms, lease_until, limit, rooms),
        )
    }
    fn record_delivery_attempts(
        &self,
        records: Vec<fanout::DeliveryRecord>,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.bg(self.inner.record_delivery_attempts(records))
    }
    fn give_back_deliveries(&self, back: Vec<(i64, i64)>) -> BoxFut<'_, StoreResult<()>> {
        self.bg(self.inner.give_back_deliveries(back))
    }
    fn expire_held(&self, cutoff_ms: i64) -> BoxFut<'_, StoreResult<u64>> {
        self.bg(self.inner.expire_held(cutoff_ms))
    }
}

impl<S: Store> Endpoints for Guarded<S> {
    fn endpoints_of(&self, chatbot_id: &str) -> BoxFut<'_, StoreResult<Vec<Endpoint>>> {
        self.read(self.inner.endpoints_of(chatbot_id))
    }
    fn get_endpoint(&self, chatbot_id: &str, id: &str) -> BoxFut<'_, StoreResult<Endpoint>> {
        self.read(self.inner.get_endpoint(chatbot_id, id))
    }
    fn create_endpoint(&self, ep: Endpoint) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.create_endpoint(ep))
    }
    fn update_endpoint(&self, ep: Endpoint) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.update_endpoint(ep))
    }
    fn delete_endpoint(&self, chatbot_id: &str, id: &str) -> BoxFut<'_, StoreResult<()>> {
        self.go(self.inner.delete_endpoint(chatbot_id, id))
    }
    fn rotate_endpoint_secret(
        &self,
        chatbot_id: &str,
        id: &str,
        secret: String,
        previous_until: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        self.go(self
            .inner
            .rotate_endpoint_secret(chatbot_id, id, secret, previous_until))
    }
}

impl<S: Store> Review for Guarded<S> {
    fn search_conversations(
        &self,
        chatbot_id: &str,
        query: String,
        limit: usize,
        cursor: Option<String>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<ConversationSummary>>> {
        self.read(
            self.inner
                .search_conversations(chatbot_id, query, limit, cursor, now_ms),
        )
    }
    fn claim_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
        lease_until: i64,
    ) -> BoxFut<'_, StoreResult<Option<Claimed>>> {
        self.go(self
            .inner
            .claim_event(chatbot_id, event_id, now_ms, lease_until))
    }
}
