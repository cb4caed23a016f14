//! The default endpoints' own settings (§13) as the dispatcher applies
//! them: its filter, headers, `replies` and rate limit, read per chatbot
//! at most every [`TTL`]. A chatbot without a settings row (most) is
//! cached as "none" and costs one map lookup per claimed event.

use crate::domain::ids::ChatbotId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::domain::endpoints::Route;
use crate::domain::time::now_ms;
use crate::store::fanout::DefaultSettings;
use crate::store::{AttemptNext, AttemptRecord, Claimed, Store};

/// How long the default endpoint's settings of a chatbot are kept.
const TTL: Duration = Duration::from_secs(1);

/// A chatbot's default settings as read (`None`: no settings row), and when.
type Cached = (Option<Arc<DefaultSettings>>, Instant);

#[derive(Default)]
pub struct Defaults {
    cache: Mutex<HashMap<ChatbotId, Cached>>,
}

impl Defaults {
    /// The settings of the batch's chatbots that have a settings row.
    pub async fn of(
        &self,
        store: &Arc<dyn Store>,
        batch: &[Claimed],
    ) -> HashMap<ChatbotId, Arc<DefaultSettings>> {
        let now = Instant::now();
        let mut stale = Vec::new();
        {
            let mut cache = self.cache.lock();
            cache.retain(|_, (_, at)| now.duration_since(*at) < TTL);
            for c in batch {
                if !cache.contains_key(&c.chatbot_id) && !stale.contains(&c.chatbot_id) {
                    stale.push(c.chatbot_id.clone());
                }
            }
        }
        for id in stale {
            let settings = match store.default_settings(&id).await {
                Ok(s) => s.map(Arc::new),
                Err(e) => {
                    // Delivered as without settings rather than held.
                    tracing::warn!(error = %e, "reading the default endpoint's settings failed");
                    None
                }
            };
            self.cache.lock().insert(id, (settings, now));
        }
        let cache = self.cache.lock();
        batch
            .iter()
            .filter_map(|c| {
                let (s, _) = cache.get(&c.chatbot_id)?;
                Some((c.chatbot_id.clone(), s.clone()?))
            })
            .collect()
    }
}

/// Whether a route takes an event, from its stored body (§4: its `type`).
/// An unreadable body goes (as without a filter).
pub fn takes(route: &Route, payload: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return true;
    };
    let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or_default();
    // A test goes to its endpoint whatever its filters.
    ty == "webhook.test" || route.matches(ty, &v)
}

/// The record of an event its default endpoint does not take: no attempt.
pub fn skipped(c: &Claimed) -> AttemptRecord {
    AttemptRecord::of(c, c.attempts, now_ms(), AttemptNext::Skipped)
}
