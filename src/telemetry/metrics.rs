//! The Prometheus families (§16), named and described in one place. Every
//! family carries the `blockhook_` prefix, a `# HELP` and a `# TYPE`.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, Histogram, Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use parking_lot::RwLock;

use crate::domain::events;
use crate::domain::model::Chatbot;

pub const HTTP_REQUESTS: &str = "blockhook_http_requests_total";
pub const HTTP_DURATION: &str = "blockhook_http_request_duration_seconds";
pub const EVENTS_ACCEPTED: &str = "blockhook_events_accepted_total";
/// Today's name of the widget's accepted events, kept for dashboards built
/// on it.
pub const EVENTS: &str = "blockhook_events_total";
pub const DELIVERIES: &str = "blockhook_deliveries_total";
pub const ATTEMPT_DURATION: &str = "blockhook_delivery_attempt_duration_seconds";
/// Today's name of the attempt latency, kept for dashboards built on it.
pub const ATTEMPT_DURATION_OLD: &str = "blockhook_attempt_duration_seconds";
pub const WAITING: &str = "blockhook_deliveries_waiting";
pub const QUEUE_DEPTH: &str = "blockhook_queue_depth";
pub const OLDEST_PENDING: &str = "blockhook_oldest_pending_age_seconds";
pub const STORE_COMMIT: &str = "blockhook_store_commit_duration_seconds";
pub const PURGED: &str = "blockhook_purged_conversations_total";

/// Buckets of every latency histogram, in seconds.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Every event type the service emits.
pub const EVENT_TYPES: [&str; 4] = [
    events::BUTTON_CLICKED,
    events::FORM_SUBMITTED,
    events::MESSAGE_RECEIVED,
    events::WEBHOOK_TEST,
];

/// The process's recorder, installed once (tests start several apps in one
/// process); `None` when another recorder was installed first.
pub fn install() -> Option<PrometheusHandle> {
    static H: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    H.get_or_init(|| {
        let h = PrometheusBuilder::new()
            .set_buckets(BUCKETS)
            .ok()?
            .install_recorder()
            .ok()?;
        describe();
        Some(h)
    })
    .clone()
}

fn describe() {
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by route pattern, method and status."
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "Time to answer an HTTP request (to its headers), by route pattern."
    );
    describe_counter!(
        EVENTS_ACCEPTED,
        "Webhook events accepted into the outbox, by event type."
    );
    describe_counter!(
        EVENTS,
        "Widget interactions accepted, by event type (see blockhook_events_accepted_total)."
    );
    describe_counter!(
        DELIVERIES,
        "Delivery attempts by endpoint and outcome: succeeded, failed (a retry follows), dead (no retry left), gone (the endpoint answered 410)."
    );
    describe_histogram!(
        ATTEMPT_DURATION,
        Unit::Seconds,
        "Duration of one delivery attempt, request sent to answer read."
    );
    describe_histogram!(
        ATTEMPT_DURATION_OLD,
        Unit::Seconds,
        "Duration of one delivery attempt (the same as blockhook_delivery_attempt_duration_seconds)."
    );
    describe_gauge!(
        WAITING,
        "Deliveries waiting to be sent: pending, retrying or in flight."
    );
    describe_gauge!(
        QUEUE_DEPTH,
        "Deliveries not yet succeeded or dead (the same as blockhook_deliveries_waiting)."
    );
    describe_gauge!(
        OLDEST_PENDING,
        Unit::Seconds,
        "Age of the oldest delivery still waiting."
    );
    describe_histogram!(
        STORE_COMMIT,
        Unit::Seconds,
        "Duration of a store transaction's commit."
    );
    describe_counter!(PURGED, "Conversations deleted by the retention purge.");
    // Families present from the start, so a scrape shows them at zero.
    for t in EVENT_TYPES {
        event_counters(t);
    }
}

/// One accepted event of `event_type` (any of [`EVENT_TYPES`]).
pub fn event_accepted(event_type: &str) {
    if let Some((a, w)) = event_counters(event_type) {
        a.increment(1);
        if let Some(w) = w {
            w.increment(1);
        }
    }
}

type EventCounters = (Counter, Option<Counter>);

/// The counters of one event type, registered once (a lookup by name and
/// labels on every click measured as a visible share of its cost).
fn event_counters(event_type: &str) -> Option<&'static EventCounters> {
    static C: OnceLock<[(&'static str, EventCounters); 4]> = OnceLock::new();
    let all = C.get_or_init(|| {
        EVENT_TYPES.map(|t| {
            let widget = t != events::WEBHOOK_TEST;
            (
                t,
                (
                    metrics::counter!(EVENTS_ACCEPTED, "type" => t),
                    widget.then(|| metrics::counter!(EVENTS, "type" => t)),
                ),
            )
        })
    });
    all.iter().find(|(t, _)| *t == event_type).map(|(_, c)| c)
}

/// The event type an answer from the inbox emits for an interaction of
/// `kind`.
pub fn answer_event_type(kind: &str) -> &'static str {
    if kind == "form" {
        events::FORM_SUBMITTED
    } else {
        events::BUTTON_CLICKED
    }
}

/// The `endpoint_id` label of a delivery to `bot`'s default endpoint (the
/// chatbot's `webhook_url`): that endpoint's id (§13).
pub fn endpoint_label(bot: &Chatbot) -> String {
    crate::domain::endpoints::default_endpoint_id(&bot.id).into_string()
}

/// How a delivery attempt ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Succeeded,
    Failed,
    Dead,
    Gone,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Dead => "dead",
            Outcome::Gone => "gone",
        }
    }
}

/// One delivery attempt to `endpoint_id` that took `took` and ended so.
pub fn attempt(endpoint_id: &str, outcome: Outcome, took: Duration) {
    let s = took.as_secs_f64();
    let d = durations();
    d.0.record(s);
    d.1.record(s);
    delivery_counter(endpoint_id, outcome).increment(1);
}

fn durations() -> &'static (Histogram, Histogram) {
    static D: OnceLock<(Histogram, Histogram)> = OnceLock::new();
    D.get_or_init(|| {
        (
            metrics::histogram!(ATTEMPT_DURATION),
            metrics::histogram!(ATTEMPT_DURATION_OLD),
        )
    })
}

/// The counter of one endpoint and outcome, registered on first use.
fn delivery_counter(endpoint_id: &str, outcome: Outcome) -> Counter {
    static C: OnceLock<RwLock<HashMap<(String, Outcome), Counter>>> = OnceLock::new();
    let map = C.get_or_init(Default::default);
    if let Some(c) = map.read().get(&(endpoint_id.to_string(), outcome)) {
        return c.clone();
    }
    map.write()
        .entry((endpoint_id.to_string(), outcome))
        .or_insert_with(|| {
            metrics::counter!(DELIVERIES, "endpoint_id" => endpoint_id.to_string(), "outcome" => outcome.as_str())
        })
        .clone()
}

/// One answered request: `route` is the matched pattern (`unmatched` when
/// none did), never the raw path.
pub fn http_request(route: &str, method: &str, status: u16, took: Duration) {
    let method: &'static str = match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "OTHER",
    };
    metrics::counter!(HTTP_REQUESTS, "route" => route.to_string(), "method" => method, "status" => status.to_string())
        .increment(1);
    metrics::histogram!(HTTP_DURATION, "route" => route.to_string()).record(took.as_secs_f64());
}

/// One store commit that took `took`.
pub fn store_commit(took: Duration) {
    static H: OnceLock<Histogram> = OnceLock::new();
    H.get_or_init(|| metrics::histogram!(STORE_COMMIT))
        .record(took.as_secs_f64());
    super::otlp::store_commit(took);
}

/// The queue's gauges, set when scraped.
pub fn queue(pending: i64, oldest_age_seconds: f64) {
    metrics::gauge!(WAITING).set(pending as f64);
    metrics::gauge!(QUEUE_DEPTH).set(pending as f64);
    metrics::gauge!(OLDEST_PENDING).set(oldest_age_seconds);
}

/// One purged conversation batch of `n`.
pub fn purged(n: u64) {
    metrics::counter!(PURGED).increment(n);
}
