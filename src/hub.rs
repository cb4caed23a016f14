//! In-process signals raised after a commit: the widget streams listen for
//! stream entries, the delivery worker for new events.

use tokio::sync::{Notify, broadcast};

use crate::store::StreamEvent;

pub struct Hub {
    pub stream: broadcast::Sender<StreamEvent>,
    pub new_events: Notify,
}

impl Hub {
    pub fn new() -> Self {
        let (stream, _) = broadcast::channel(4096);
        Self {
            stream,
            new_events: Notify::new(),
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
