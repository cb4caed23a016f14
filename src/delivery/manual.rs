//! A delivery sent now at a reviewer's request (the dashboard's "Send test
//! event" and "Redeliver"), whatever the endpoint's circuit breaker says:
//! the event is taken out of the queue (leased like a claim), sent by the
//! same [`attempt::run`] as the queue's, and its attempt recorded as any
//! other, under the same event id. The queue's own retries and its circuit
//! breaker are left as they are.

use std::time::Duration;

use super::{attempt, client};
use crate::domain::model::Chatbot;
use crate::store::{AttemptRow, StoreError, StoreResult};
use crate::usecase::Services;

/// How often to look again while the queue holds the delivery.
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// What became of a manual send.
#[derive(Debug)]
pub enum Sent {
    /// Sent now by this request: its attempt.
    Now(AttemptRow),
    /// The queue had it already on the way: the attempt it made.
    ByQueue(AttemptRow),
    /// Not sent yet: it waits behind an earlier event of its conversation,
    /// its endpoint is disabled, or it is not queued.
    Waiting,
}

/// Sends queued event `event_id` of `bot` now, and waits for its attempt
/// (at most the delivery timeout and a second).
pub async fn send_now(st: &Services, bot: &Chatbot, event_id: &str) -> StoreResult<Sent> {
    let store = &st.store;
    let tried = default_attempts(store.get_event(&bot.id, event_id).await?).len();
    let deadline =
        tokio::time::Instant::now() + st.settings.delivery_timeout + Duration::from_secs(1);
    let lease = (st.settings.delivery_timeout * 3).max(Duration::from_secs(30));
    loop {
        let now = st.now_ms();
        let claimed = store
            .claim_event(&bot.id, event_id, now, now + lease.as_millis() as i64)
            .await?;
        if let Some(c) = claimed {
            let http = match client::build(
                st.settings.delivery_timeout,
                st.settings.allow_private_webhooks,
            ) {
                Ok(http) => http,
                Err(e) => {
                    store.release_leases(Some(vec![c.event_id])).await?;
                    return Err(StoreError::Backend(format!("outbound client: {e}")));
                }
            };
            // The default endpoint's own headers and `replies` apply; a
            // manual send is not held by its rate limit.
            let own = store.default_settings(&bot.id).await.ok().flatten();
            let rec = attempt::run(st, &http, bot, own.as_ref(), &c).await;
            let number = rec.number;
            store.record_attempts(vec![rec]).await?;
            // What it leaves (a head promoted, a retry time) is the queue's.
            st.hub.new_events.notify_one();
            let attempts = default_attempts(store.get_event(&bot.id, event_id).await?);
            return Ok(attempts
                .into_iter()
                .find(|a| a.number == number)
                .map_or(Sent::Waiting, Sent::Now));
        }
        let attempts = default_attempts(store.get_event(&bot.id, event_id).await?);
        if attempts.len() > tried
            && let Some(a) = attempts.into_iter().max_by_key(|a| a.number)
        {
            return Ok(Sent::ByQueue(a));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Sent::Waiting);
        }
        tokio::time::sleep(LOOK_AGAIN).await;
    }
}

/// The attempts of an event's delivery to its chatbot's default endpoint
/// (the one a manual send makes).
fn default_attempts(d: crate::store::EventDetail) -> Vec<crate::store::AttemptRow> {
    d.attempts
        .into_iter()
        .filter(|a| a.endpoint_id.is_none())
        .collect()
}
