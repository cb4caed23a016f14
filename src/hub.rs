//! In-process signals raised after a commit: the widget streams listen for
//! stream entries, the delivery worker for new events. The stores raise
//! them through their port, [`Signals`], which the hub implements.

use tokio::sync::{Notify, broadcast};

pub use crate::store::ApiEvent;
use crate::store::{Signals, StreamEvent};

pub struct Hub {
    pub stream: broadcast::Sender<StreamEvent>,
    pub api: broadcast::Sender<ApiEvent>,
    /// A delivery may be due in the store: the claim loop reads it.
    pub new_events: Notify,
    /// Deliveries were queued for this instance as their events committed
    /// (see [`crate::store::Queue::claim_queued`]): the claim loop takes
    /// them without reading the store's table.
    pub queued_events: Notify,
    /// Events may have been committed that still need routing to other
    /// endpoints (§13): the router reads them.
    pub to_route: Notify,
    /// Deliveries to endpoints other than the default may be due: the
    /// fan-out claim loop reads them.
    pub deliveries: Notify,
    /// Conversations showing `typing`, with the message clicked (this
    /// instance's view; a 30 s timeout ends typing everywhere).
    pub typing: parking_lot::Mutex<std::collections::HashMap<String, String>>,
    /// Conversations being erased or erased lately: a delivery of theirs
    /// that a claim had already taken is not sent.
    pub erased: Erased,
}

/// Conversation ids marked when an erasure begins, kept for [`ERASED_KEPT`]
/// (longer than any lease, so every delivery claimed before the erasure
/// has come to the dispatcher by then). Ids are never reused. Once an
/// erasure has committed it is announced: the conversation's open widget
/// streams end.
pub struct Erased {
    marks: parking_lot::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    ended: broadcast::Sender<String>,
}

impl Default for Erased {
    fn default() -> Self {
        Self {
            marks: Default::default(),
            ended: broadcast::channel(256).0,
        }
    }
}

pub const ERASED_KEPT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Erased {
    pub fn mark(&self, conversation_id: &str) {
        let mut m = self.marks.lock();
        let now = std::time::Instant::now();
        m.retain(|_, at| now.duration_since(*at) < ERASED_KEPT);
        m.insert(conversation_id.to_string(), now);
    }

    /// The erasure did not happen (the conversation was not found, or the
    /// store failed): its deliveries go out again.
    pub fn unmark(&self, conversation_id: &str) {
        self.marks.lock().remove(conversation_id);
    }

    pub fn contains(&self, conversation_id: &str) -> bool {
        let m = self.marks.lock();
        !m.is_empty() && m.contains_key(conversation_id)
    }

    /// The erasure of `conversation_id` committed (here, or on another
    /// instance that said so): marked if it was not, and its open streams
    /// end.
    pub fn announce(&self, conversation_id: &str) {
        if !self.contains(conversation_id) {
            self.mark(conversation_id);
        }
        let _ = self.ended.send(conversation_id.to_string());
    }

    /// Erasures announced from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.ended.subscribe()
    }
}

impl Hub {
    pub fn new() -> Self {
        let (stream, _) = broadcast::channel(4096);
        let (api, _) = broadcast::channel(4096);
        Self {
            stream,
            api,
            new_events: Notify::new(),
            queued_events: Notify::new(),
            to_route: Notify::new(),
            deliveries: Notify::new(),
            typing: Default::default(),
            erased: Erased::default(),
        }
    }

    pub fn publish_api(&self, events: Vec<ApiEvent>) {
        for e in events {
            let _ = self.api.send(e);
        }
    }

    pub fn publish(&self, events: Vec<StreamEvent>) {
        for e in events {
            let _ = self.stream.send(e);
        }
    }
}

impl Signals for Hub {
    fn stream(&self, entries: Vec<StreamEvent>) {
        self.publish(entries);
    }
    fn api(&self, entries: Vec<ApiEvent>) {
        self.publish_api(entries);
    }
    fn events_due(&self) {
        self.new_events.notify_one();
    }
    fn events_queued(&self) {
        self.queued_events.notify_one();
    }
    fn deliveries_due(&self) {
        self.deliveries.notify_one();
    }
    fn erased(&self, conversation_id: &str) {
        self.erased.announce(conversation_id);
    }
    fn follows_streams(&self) -> bool {
        self.stream.receiver_count() > 0
    }
    fn follows_api(&self) -> bool {
        self.api.receiver_count() > 0
    }
}

impl Default for Hub {
    fn default() -> Self {
        Self::new()
    }
}
