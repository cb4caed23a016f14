//! The widget's live stream as the app reads it: a conversation's stored
//! entries after a position, in commit order. The HTTP layer keeps the
//! connection, the in-memory signals and the keep-alives; what was stored
//! is read here.

use std::sync::Arc;

use super::Services;
use super::error::AppResult;
use crate::store::{Store, StreamEvent};

/// Entries read from the store at a time (a replay pages through all).
pub const PAGE: usize = 500;

/// One conversation's stored stream entries.
pub struct Entries {
    store: Arc<dyn Store>,
    conversation_id: String,
}

impl Entries {
    pub fn of(st: &Services, conversation_id: String) -> Self {
        Self {
            store: st.store.clone(),
            conversation_id,
        }
    }

    pub fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    /// Whether other instances write entries too (PostgreSQL): their
    /// in-memory signals never reach this process, so a reader looks in
    /// the store now and then as well.
    pub fn shared(&self) -> bool {
        self.store.shared()
    }

    /// Up to [`PAGE`] entries after `seq`, in commit order.
    pub async fn after(&self, seq: i64) -> AppResult<Vec<StreamEvent>> {
        Ok(self
            .store
            .stream_since(&self.conversation_id, seq, PAGE)
            .await?)
    }

    /// The sequence number of the newest stored entry (0 when none).
    pub async fn newest(&self) -> AppResult<i64> {
        let mut after = 0;
        loop {
            let page = self.after(after).await?;
            after = page.last().map_or(after, |e| e.seq);
            if page.len() < PAGE {
                return Ok(after);
            }
        }
    }
}
