//! What a store tells this instance once its writes have committed (or
//! once another instance said it committed some): the port through which
//! widget streams, API streams, waiters and the delivery loops hear of
//! them. The store raises signals; what listens is not its business (the
//! in-process hub implements this port, `crate::hub`).

use super::StreamEvent;

/// An entry of a chatbot's API stream (`interaction.created`,
/// `interaction.answered`, `interaction.expired`, `interaction.cancelled`).
#[derive(Debug, Clone)]
pub struct ApiEvent {
    pub chatbot_id: crate::domain::ids::ChatbotId,
    pub interaction_id: crate::domain::ids::InteractionId,
    pub kind: &'static str,
    pub data: serde_json::Value,
}

/// Signals raised after a commit, never before: whoever hears one may
/// read what it names.
pub trait Signals: Send + Sync + 'static {
    /// Widget-stream entries committed.
    fn stream(&self, entries: Vec<StreamEvent>);
    /// API-stream entries committed.
    fn api(&self, entries: Vec<ApiEvent>);
    /// A delivery may be due in the store's table: the claim loop reads it.
    fn events_due(&self);
    /// Deliveries were queued for this instance as their events committed
    /// (see [`super::Queue::claim_queued`]).
    fn events_queued(&self);
    /// Deliveries to endpoints other than the default may be due.
    fn deliveries_due(&self);
    /// The erasure of a conversation committed: its open streams end and
    /// a delivery of it already claimed is not sent.
    fn erased(&self, conversation_id: &str);
    /// Whether anything here follows widget streams (another instance's
    /// entries are then read; otherwise not).
    fn follows_streams(&self) -> bool;
    /// Whether anything here follows API streams.
    fn follows_api(&self) -> bool;
}
