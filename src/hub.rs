//! In-process signals raised after a commit: the widget streams listen for
//! stream entries, the delivery worker for new events.

use tokio::sync::{Notify, broadcast};

use crate::store::StreamEvent;

/// An entry of a chatbot's API stream (`interaction.created`,
/// `interaction.answered`, `interaction.expired`, `interaction.cancelled`).
#[derive(Debug, Clone)]
pub struct ApiEvent {
    pub chatbot_id: String,
    pub interaction_id: String,
    pub kind: &'static str,
    pub data: serde_json::Value,
}

pub struct Hub {
    pub stream: broadcast::Sender<StreamEvent>,
    pub api: broadcast::Sender<ApiEvent>,
    pub new_events: Notify,
    /// Conversations showing `typing`, with the message clicked (this
    /// instance's view; a 30 s timeout ends typing everywhere).
    pub typing: parking_lot::Mutex<std::collections::HashMap<String, String>>,
}

impl Hub {
    pub fn new() -> Self {
        let (stream, _) = broadcast::channel(4096);
        let (api, _) = broadcast::channel(4096);
        Self {
            stream,
            api,
            new_events: Notify::new(),
            typing: Default::default(),
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

impl Default for Hub {
    fn default() -> Self {
        Self::new()
    }
}
