//! An event's deliveries, one per endpoint (§13): how the deliveries log
//! names an endpoint, its filters, an event's summary and attempts, one
//! delivery, and an event with all of its.

use crate::domain::ids::{EndpointId, EventId};
use crate::domain::status::EventStatus;

/// A redelivery of one event of a chatbot at `now_ms`: to one endpoint,
/// or (`None`) to every endpoint it went to.
#[derive(Debug, Clone)]
pub struct Redeliver {
    pub chatbot_id: crate::domain::ids::ChatbotId,
    pub event_id: crate::domain::ids::EventId,
    pub endpoint: Option<EndpointSel>,
    pub now_ms: i64,
}

/// A bulk redelivery of a chatbot's deliveries at `now_ms`: those in
/// `status` (`dead` or `failed`) of events created at or after `since`, to
/// one endpoint or (`None`) to all.
#[derive(Debug, Clone)]
pub struct RedeliverAll {
    pub chatbot_id: crate::domain::ids::ChatbotId,
    pub now_ms: i64,
    pub status: crate::domain::status::EventStatus,
    pub since: Option<i64>,
    pub endpoint: Option<EndpointSel>,
}

/// The SQL (both stores; SQLite numbers its parameters `?1`) of a bulk
/// redelivery's deliveries to endpoints other than the default: chatbot
/// `$1`, status `$2`, events created at or after `$3`, now `$4`, to
/// endpoint `$5` or (`''`) to all. A revived delivery is marked a head;
/// [`ONE_HEAD_PER_PAIR`] then unmarks the heads behind one.
pub(crate) const REDELIVER_OTHERS: &str = "UPDATE deliveries SET next_attempt_at = $4,
     status = CASE WHEN status = 'dead' THEN 'pending' ELSE status END,
     attempt_base = CASE WHEN status = 'dead' THEN attempts ELSE attempt_base END,
     leased_until = CASE WHEN status = 'dead' THEN 0 ELSE leased_until END,
     is_head = CASE WHEN status = 'dead' THEN 1 ELSE is_head END
   WHERE chatbot_id = $1 AND status = $2 AND ($5 = '' OR endpoint_id = $5)
     AND EXISTS (SELECT 1 FROM events e WHERE e.seq = deliveries.event_seq AND e.created_at >= $3)";

/// The SQL (both stores) that leaves each (endpoint, conversation) pair of
/// a chatbot (`$1`) one head, its oldest delivery still to make, after a
/// redelivery revived older deliveries as heads: a head with an older one
/// of its pair still to make is one no longer (a head on the wire stays
/// there, and waits behind it should it fail). To endpoint `$2` or (`''`)
/// all, in conversation `$3` or (`''`) all. The claims rely on one head per
/// pair and check no order themselves.
pub(crate) const ONE_HEAD_PER_PAIR: &str = "UPDATE deliveries SET is_head = 0
   WHERE is_head = 1 AND status IN ('pending', 'failed') AND chatbot_id = $1
     AND ($2 = '' OR endpoint_id = $2) AND ($3 = '' OR conversation_id = $3)
     AND EXISTS (SELECT 1 FROM deliveries b
                 WHERE b.endpoint_id = deliveries.endpoint_id AND b.conversation_id = deliveries.conversation_id
                   AND b.status IN ('pending', 'failed') AND b.seq < deliveries.seq)";

/// One of a chatbot's endpoints, as the deliveries log names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointSel {
    /// The chatbot's default endpoint (its `webhook_url`): the events row's
    /// own delivery.
    Default,
    /// Another endpoint (`ep_…`): a row of `deliveries`.
    Other(String),
}

/// An event as the deliveries log lists it.
#[derive(Debug, Clone)]
pub struct EventSummary {
    pub event_id: EventId,
    pub event_type: String,
    pub created_at: i64,
    pub status: EventStatus,
    pub attempts: u32,
    pub next_attempt_at: Option<i64>,
    pub payload: bytes::Bytes,
}

#[derive(Debug, Clone)]
pub struct AttemptRow {
    /// The endpoint it went to; `None`: the chatbot's default endpoint.
    pub endpoint_id: Option<EndpointId>,
    pub number: u32,
    pub at: i64,
    pub status_code: Option<u16>,
    pub duration_ms: i64,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
    /// The request headers sent, as a JSON object.
    pub request_headers: Option<String>,
}

/// Filters of the deliveries log (`GET /api/v1/events`).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Without `endpoint`: the event's aggregated status; with it: the
    /// status of its delivery to that endpoint.
    pub status: Option<EventStatus>,
    pub event_type: Option<String>,
    pub event_id: Option<String>,
    /// Only events with a delivery to this endpoint.
    pub endpoint: Option<EndpointSel>,
}

/// One delivery of an event to one endpoint.
#[derive(Debug, Clone)]
pub struct DeliveryRow {
    /// `None`: the chatbot's default endpoint.
    pub endpoint_id: Option<EndpointId>,
    pub status: EventStatus,
    pub attempts: u32,
    pub next_attempt_at: Option<i64>,
}

/// An event with its deliveries (the default endpoint's first, unless it
/// was skipped) and all their attempts.
#[derive(Debug, Clone)]
pub struct EventDetail {
    /// Its status, attempt count and next attempt aggregated over its
    /// deliveries.
    pub event: EventSummary,
    pub deliveries: Vec<DeliveryRow>,
    /// Oldest first.
    pub attempts: Vec<AttemptRow>,
}

impl EventDetail {
    /// Builds the detail from the events row (its own status is the default
    /// endpoint's delivery) and the other deliveries.
    pub fn assemble(
        mut event: EventSummary,
        others: Vec<DeliveryRow>,
        mut attempts: Vec<AttemptRow>,
    ) -> EventDetail {
        let mut deliveries = Vec::with_capacity(others.len() + 1);
        if event.status != EventStatus::Skipped {
            deliveries.push(DeliveryRow {
                endpoint_id: None,
                status: event.status,
                attempts: event.attempts,
                next_attempt_at: event.next_attempt_at,
            });
        }
        deliveries.extend(others);
        event.status = EventStatus::aggregate(deliveries.iter().map(|d| d.status));
        event.attempts = deliveries.iter().map(|d| d.attempts).sum();
        event.next_attempt_at = deliveries.iter().filter_map(|d| d.next_attempt_at).min();
        attempts.sort_by_key(|a| (a.at, a.number));
        EventDetail {
            event,
            deliveries,
            attempts,
        }
    }
}

/// The SQL (both stores) of an event's status aggregated over its
/// deliveries, for the events row `e` (§13).
pub(crate) const AGGREGATE_STATUS: &str = "CASE
  WHEN e.status = 'dead' OR EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = e.seq AND d.status = 'dead') THEN 'dead'
  WHEN e.status = 'failed' OR EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = e.seq AND d.status = 'failed') THEN 'failed'
  WHEN e.status = 'pending' OR EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = e.seq AND d.status = 'pending') THEN 'pending'
  ELSE 'succeeded' END";

/// The SQL (both stores) of an event's attempts over all its deliveries.
/// (`SUM` of a PostgreSQL `bigint` is a `numeric`: cast back.)
pub(crate) const TOTAL_ATTEMPTS: &str = "CAST(e.attempts + COALESCE((SELECT SUM(d.attempts) FROM deliveries d WHERE d.event_seq = e.seq), 0) AS BIGINT)";

/// The SQL (both stores) of an event's earliest next attempt, if any of its
/// deliveries is still queued.
pub(crate) const NEXT_ATTEMPT: &str = "(SELECT MIN(n.at) FROM (
    SELECT e.next_attempt_at AS at WHERE e.status IN ('pending', 'failed')
    UNION ALL SELECT d.next_attempt_at FROM deliveries d WHERE d.event_seq = e.seq AND d.status IN ('pending', 'failed')) n)";

/// The deliveries log's query (both stores): the chatbot's events, newest
/// first, each with its aggregated status (column 4), attempt count (5),
/// next attempt (6, null when nothing is queued) and `seq` (7).
///
/// Bound: 1 chatbot id, 2 status (text or null), 3 cursor (`seq` below),
/// 4 limit, 5 type, 6 event id, and 7 the endpoint id for
/// [`EndpointSel::Other`]. Only fixed SQL text is spliced in; every value
/// is bound.
pub(crate) fn list_events_sql(endpoint: Option<&EndpointSel>, postgres: bool) -> String {
    let by_status = match endpoint {
        None => format!("(?2 IS NULL OR {AGGREGATE_STATUS} = ?2)"),
        Some(EndpointSel::Default) => "e.status <> 'skipped' AND (?2 IS NULL OR e.status = ?2)".into(),
        Some(EndpointSel::Other(_)) => "EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = e.seq AND d.endpoint_id = ?7 AND (?2 IS NULL OR d.status = ?2))".into(),
    };
    let sql = format!(
        "SELECT e.id, e.type, e.created_at, e.payload, {AGGREGATE_STATUS}, {TOTAL_ATTEMPTS}, {NEXT_ATTEMPT}, e.seq
         FROM events e
         WHERE e.chatbot_id = ?1 AND {by_status} AND (?5 IS NULL OR e.type = ?5)
           AND (?6 IS NULL OR e.id = ?6) AND e.seq < ?3 ORDER BY e.seq DESC LIMIT ?4"
    );
    if !postgres {
        return sql;
    }
    // PostgreSQL: `$n`, and a type for the parameters that may be null.
    let mut sql = sql;
    for n in [2, 5, 6] {
        sql = sql.replace(&format!("?{n} IS NULL"), &format!("${n}::text IS NULL"));
    }
    for n in 1..=7 {
        sql = sql.replace(&format!("?{n}"), &format!("${n}"));
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(status: EventStatus, attempts: u32, next: Option<i64>) -> EventSummary {
        EventSummary {
            event_id: EventId::stored("evt_1"),
            event_type: "interaction.button_clicked".into(),
            created_at: 0,
            status,
            attempts,
            next_attempt_at: next,
            payload: bytes::Bytes::new(),
        }
    }

    fn delivery(id: &str, status: EventStatus, attempts: u32, next: Option<i64>) -> DeliveryRow {
        DeliveryRow {
            endpoint_id: Some(EndpointId::stored(id)),
            status,
            attempts,
            next_attempt_at: next,
        }
    }

    #[test]
    fn a_skipped_default_is_not_a_delivery() {
        let d = EventDetail::assemble(
            summary(EventStatus::Skipped, 0, None),
            vec![delivery("ep_b", EventStatus::Failed, 2, Some(50))],
            vec![],
        );
        assert_eq!(d.deliveries.len(), 1);
        assert_eq!(d.event.status, EventStatus::Failed);
        assert_eq!((d.event.attempts, d.event.next_attempt_at), (2, Some(50)));
    }

    #[test]
    fn the_default_comes_first_and_counts() {
        let d = EventDetail::assemble(
            summary(EventStatus::Pending, 1, Some(90)),
            vec![
                delivery("ep_b", EventStatus::Succeeded, 1, None),
                delivery("ep_c", EventStatus::Dead, 5, None),
            ],
            vec![],
        );
        assert_eq!(d.deliveries[0].endpoint_id, None);
        assert_eq!(d.event.status, EventStatus::Dead);
        assert_eq!((d.event.attempts, d.event.next_attempt_at), (7, Some(90)));
    }

    #[test]
    fn no_delivery_at_all_reads_succeeded() {
        let d = EventDetail::assemble(summary(EventStatus::Skipped, 0, None), vec![], vec![]);
        assert!(d.deliveries.is_empty());
        assert_eq!(d.event.status, EventStatus::Succeeded);
    }

    #[test]
    fn the_postgres_query_binds_every_value() {
        let sql = list_events_sql(Some(&EndpointSel::Other("x".into())), true);
        assert!(!sql.contains('?'));
        assert!(sql.contains("$7") && sql.contains("$2::text IS NULL"));
    }
}
