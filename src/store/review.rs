//! What the reviewers' dashboard asks of the store beyond the API's roles.

use super::{Claimed, ConversationSummary, Page};

store_role! {
    /// What a reviewer does from the dashboard: search conversations, and
    /// take one delivery out of the queue to send it now.
    pub trait Review {
        /// A chatbot's conversations matching `query` (a conversation or
        /// visitor id, exactly; a part of the visitor's name or of a message's
        /// text, any case), newest first; the cursor is the last id of a page.
        read fn search_conversations(&self, chatbot_id: &str, query: String, limit: usize, cursor: Option<String>, now_ms: i64) -> Page<ConversationSummary>;
        /// Leases event `event_id` of `chatbot_id` until `lease_until` when it
        /// is queued (`pending` or `failed`), heads its conversation, its
        /// endpoint is not disabled and no one holds it; `None` otherwise. Its
        /// attempt is then recorded with [`Queue::record_attempts`].
        write fn claim_event(&self, chatbot_id: &str, event_id: &str, now_ms: i64, lease_until: i64) -> Option<Claimed>;
    }
}

/// `query` as a `LIKE` pattern matching it anywhere, its wildcards
/// escaped (with `ESCAPE '\'`).
pub fn like_pattern(query: &str) -> String {
    let mut out = String::with_capacity(query.len() + 2);
    out.push('%');
    for ch in query.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out.push('%');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_pattern_escapes_the_wildcards() {
        assert_eq!(like_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
        assert_eq!(like_pattern("Ada"), "%Ada%");
    }
}
