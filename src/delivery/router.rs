//! The router (§13): matches committed events against their chatbot's
//! endpoints other than the default and creates one delivery per match.
//!
//! An event is queued for routing as it is inserted, only when its chatbot
//! has such endpoints (SQLite: `events.routed = 0`; PostgreSQL: a row in
//! `unrouted_events`); the router takes those oldest first, in batches, and
//! in one transaction inserts the deliveries and takes the events off the
//! queue. A crash in between loses nothing: they are still queued at the
//! next start. Two routers (instances on one PostgreSQL) may read the same
//! rows; the unique (event, endpoint) index makes the second insert a no-op.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::domain::ids::ChatbotId;
use crate::domain::time::now_ms;
use crate::store::StoreResult;
use crate::store::fanout::{EndpointRoute, NewDelivery, Unrouted, takers};
use crate::usecase::Services;

/// Most events routed in one transaction.
pub const BATCH: usize = 500;
/// Longest sleep of an idle router (other instances may commit events).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Shortest time between two reads of an idle table, so that a wake-up per
/// committed click costs at most this many reads per second.
const MIN_GAP: Duration = Duration::from_millis(20);
/// How often deliveries held too long for a disabled endpoint are ended.
const HOLD_CHECK: Duration = Duration::from_secs(30);

/// Starts the router; it ends when `stop` is cancelled.
pub fn spawn(state: Arc<Services>, stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(state, stop))
}

async fn run(state: Arc<Services>, stop: CancellationToken) {
    let mut held_checked: Option<Instant> = None;
    while !stop.is_cancelled() {
        match route_once(&state).await {
            Ok(n) if n >= BATCH => continue,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "routing events failed; retrying"),
        }
        let every = HOLD_CHECK.min(state.settings.max_hold / 2);
        if held_checked.is_none_or(|t| t.elapsed() >= every) {
            held_checked = Some(Instant::now());
            let cutoff = now_ms() - state.settings.max_hold.as_millis() as i64;
            match state.store.expire_held(cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deliveries = n, "held deliveries ended as dead"),
                Err(e) => tracing::warn!(error = %e, "ending held deliveries failed"),
            }
        }
        tokio::select! {
            _ = state.hub.to_route.notified() => {}
            _ = tokio::time::sleep(IDLE_POLL) => {}
            _ = stop.cancelled() => return,
        }
        tokio::time::sleep(MIN_GAP).await;
    }
}

/// Routes one batch; returns how many events it took.
pub async fn route_once(state: &Services) -> StoreResult<usize> {
    let events = state.store.unrouted(BATCH).await?;
    if events.is_empty() {
        return Ok(0);
    }
    let mut bots: Vec<ChatbotId> = events.iter().map(|e| e.chatbot_id.clone()).collect();
    bots.sort_unstable();
    bots.dedup();
    let endpoints = state.store.routes_of(bots).await?;
    let deliveries = matching(&events, &endpoints);
    let n = events.len();
    let seqs = events.iter().map(|e| e.seq).collect();
    state.store.route(deliveries, seqs).await?;
    Ok(n)
}

/// The deliveries of a batch: each event to each endpoint of its chatbot
/// that existed when it was accepted and whose route takes it.
pub fn matching(events: &[Unrouted], endpoints: &[EndpointRoute]) -> Vec<NewDelivery> {
    let mut by_bot: HashMap<&str, Vec<&EndpointRoute>> = HashMap::new();
    for ep in endpoints {
        by_bot.entry(ep.chatbot_id.as_str()).or_default().push(ep);
    }
    let mut out = Vec::new();
    for ev in events {
        let Some(eps) = by_bot.get(ev.chatbot_id.as_str()) else {
            continue;
        };
        for ep in takers(
            &ev.event_type,
            &ev.payload,
            ev.created_at,
            eps.iter().copied(),
        ) {
            out.push(NewDelivery {
                event_seq: ev.seq,
                event_id: ev.event_id.clone(),
                endpoint_id: ep.id.clone(),
                chatbot_id: ev.chatbot_id.clone(),
                conversation_id: ev.conversation_id.clone(),
                created_at: ev.created_at,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{ConversationId, EndpointId, EventId};
    use crate::store::fanout::parse_route;

    fn event(seq: i64, bot: &str, created_at: i64, payload: &str) -> Unrouted {
        Unrouted {
            seq,
            event_id: EventId::stored(format!("evt_{seq}")),
            chatbot_id: ChatbotId::stored(bot),
            conversation_id: ConversationId::stored("conv"),
            event_type: "interaction.button_clicked".into(),
            payload: bytes::Bytes::from(payload.to_string()),
            created_at,
        }
    }

    fn endpoint(id: &str, bot: &str, created_at: i64, filter: Option<&str>) -> EndpointRoute {
        EndpointRoute {
            id: EndpointId::stored(id),
            chatbot_id: ChatbotId::stored(bot),
            created_at,
            route: parse_route(None, filter),
        }
    }

    #[test]
    fn each_event_goes_to_the_matching_endpoints_that_existed_then() {
        let events = [
            event(1, "cb_a", 100, r#"{"action_id":"yes"}"#),
            event(2, "cb_a", 300, r#"{"action_id":"no"}"#),
            event(3, "cb_b", 300, r#"{"action_id":"yes"}"#),
        ];
        let endpoints = [
            endpoint("ep_all", "cb_a", 50, None),
            endpoint("ep_yes", "cb_a", 50, Some(r#"{"action_id":["yes"]}"#)),
            endpoint("ep_late", "cb_a", 200, None),
        ];
        let got: Vec<(i64, String)> = matching(&events, &endpoints)
            .into_iter()
            .map(|d| (d.event_seq, d.endpoint_id.into_string()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "ep_all".to_string()),
                (1, "ep_yes".to_string()),
                (2, "ep_all".to_string()),
                (2, "ep_late".to_string()),
            ]
        );
    }
}
