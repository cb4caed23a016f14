//! What routing and fan-out ask of the store (§13): events still to be
//! matched against a chatbot's other endpoints, the deliveries that
//! matching creates, and their claims, attempts and leases.

use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;

use super::{AttemptRecord, ClaimAsk, Claimed};
use crate::domain::endpoints::{RateLimit, Route};
use crate::domain::ids::{ChatbotId, ConversationId, EndpointId, EventId};

/// An event queued for routing: still to be matched.
#[derive(Debug, Clone)]
pub struct Unrouted {
    pub seq: i64,
    pub event_id: EventId,
    pub chatbot_id: ChatbotId,
    pub conversation_id: ConversationId,
    pub event_type: String,
    pub payload: bytes::Bytes,
    pub created_at: i64,
}

/// What the router needs of an endpoint other than the default.
#[derive(Debug, Clone)]
pub struct EndpointRoute {
    pub id: EndpointId,
    pub chatbot_id: ChatbotId,
    pub created_at: i64,
    pub route: Route,
}

/// The endpoints of `endpoints` (its chatbot's, other than the default)
/// an event goes to: those that existed when it was accepted and whose
/// route takes it. A test goes only where it was sent (the default
/// endpoint, or the endpoint it was sent to, routed already). The payload
/// is parsed only when a filter needs it.
pub fn takers<'a>(
    event_type: &str,
    payload: &[u8],
    created_at: i64,
    endpoints: impl IntoIterator<Item = &'a EndpointRoute>,
) -> Vec<&'a EndpointRoute> {
    if event_type == crate::domain::events::WEBHOOK_TEST {
        return Vec::new();
    }
    let eps: Vec<&EndpointRoute> = endpoints
        .into_iter()
        .filter(|ep| ep.created_at <= created_at)
        .collect();
    let mut view: Option<Value> = None;
    eps.iter()
        .copied()
        .filter(|ep| {
            let body = match ep.route.filter {
                None => &Value::Null,
                Some(_) => &*view.get_or_insert_with(|| filter_view(payload, &eps)),
            };
            ep.route.matches(event_type, body)
        })
        .collect()
}

/// The payload's top-level values that the filters of `eps` read (a key,
/// or one level into it), parsed; the rest of the payload is only
/// scanned, not built. A payload that is not a JSON object is `Null`,
/// which no filter matches.
fn filter_view(payload: &[u8], eps: &[&EndpointRoute]) -> Value {
    let Ok(raw) = serde_json::from_slice::<HashMap<String, &RawValue>>(payload) else {
        return Value::Null;
    };
    let mut view = serde_json::Map::new();
    let keys = eps.iter().flat_map(|ep| ep.route.filter.iter().flatten());
    for (key, _) in keys {
        let outer = key.split_once('.').map_or(key.as_str(), |(outer, _)| outer);
        if view.contains_key(outer) {
            continue;
        }
        if let Some(Ok(v)) = raw
            .get(outer)
            .map(|v| serde_json::from_str::<Value>(v.get()))
        {
            view.insert(outer.to_string(), v);
        }
    }
    Value::Object(view)
}

/// A delivery the router creates.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub event_seq: i64,
    pub event_id: EventId,
    pub endpoint_id: EndpointId,
    pub chatbot_id: ChatbotId,
    pub conversation_id: ConversationId,
    pub created_at: i64,
}

/// Where a claimed delivery goes, read with it.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub signing_secret: String,
    pub previous_secret: Option<String>,
    pub previous_until: Option<i64>,
    /// A JSON object of extra request headers.
    pub headers: Option<String>,
    pub replies: bool,
    pub rate_limit: Option<String>,
}

impl Target {
    /// The secrets that sign at `now`: the current one, and the previous
    /// one during its overlap.
    pub fn live_secrets(&self, now_ms: i64) -> Vec<&str> {
        let mut v = vec![self.signing_secret.as_str()];
        if let (Some(prev), Some(until)) = (&self.previous_secret, self.previous_until)
            && until > now_ms
        {
            v.push(prev);
        }
        v
    }

    /// The extra headers as name/value pairs (none when unreadable).
    pub fn header_pairs(&self) -> Vec<(String, String)> {
        header_pairs(self.headers.as_deref())
    }
}

/// Stored extra headers (a JSON object) as name/value pairs; none when
/// absent or unreadable.
pub fn header_pairs(stored: Option<&str>) -> Vec<(String, String)> {
    let Some(text) = stored else {
        return Vec::new();
    };
    match serde_json::from_str::<serde_json::Map<String, Value>>(text) {
        Ok(m) => m
            .into_iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The default endpoint's own settings, from its settings row (absent:
/// every event goes, no headers, replies applied, no rate limit).
#[derive(Debug, Clone)]
pub struct DefaultSettings {
    pub route: Route,
    pub headers: Vec<(String, String)>,
    pub replies: bool,
    pub rate_limit: Option<RateLimit>,
}

impl DefaultSettings {
    /// From the stored columns of the settings row.
    pub fn from_row(
        event_types: Option<&str>,
        filter: Option<&str>,
        headers: Option<&str>,
        replies: bool,
        rate_limit: Option<&str>,
    ) -> Self {
        DefaultSettings {
            route: parse_route(event_types, filter),
            headers: header_pairs(headers),
            replies,
            rate_limit: rate_limit.and_then(RateLimit::parse),
        }
    }
}

/// A delivery to an endpoint other than the default, claimed. `claim.seq`
/// is the delivery's own seq.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub claim: Claimed,
    pub endpoint_id: EndpointId,
    pub created_at: i64,
    pub target: Target,
}

/// The outcome of one attempt of a delivery (`rec.seq`: the delivery's).
#[derive(Debug, Clone)]
pub struct DeliveryRecord {
    pub endpoint_id: EndpointId,
    pub rec: AttemptRecord,
}

/// How many deliveries each endpoint may start now: those named, and
/// `others` for every endpoint not named. A claim takes no more, so that
/// nothing is leased only to be given back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rooms {
    pub named: Vec<(EndpointId, i64)>,
    pub others: i64,
}

impl Rooms {
    /// The room of endpoint `id`.
    pub fn of(&self, id: &str) -> i64 {
        self.named
            .iter()
            .find(|(e, _)| e.as_str() == id)
            .map_or(self.others, |(_, n)| *n)
    }

    /// The named rooms as a JSON object (`{"ep_…": 3}`), bound as one
    /// parameter.
    pub fn named_json(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .named
            .iter()
            .map(|(id, n)| (id.to_string(), serde_json::Value::from(*n)))
            .collect();
        serde_json::Value::Object(map).to_string()
    }
}

store_role! {
    /// Routing and fan-out (§13).
    pub trait Fanout {
        /// Up to `limit` events still to route, oldest first.
        bg fn unrouted(&self, limit: usize) -> Vec<Unrouted>;
        /// The endpoints other than the default of these chatbots.
        bg fn routes_of(&self, chatbot_ids: Vec<ChatbotId>) -> Vec<EndpointRoute>;
        /// The default endpoint's settings, when it has a settings row.
        read fn default_settings(&self, chatbot_id: &str) -> Option<DefaultSettings>;
        /// In one transaction: inserts the deliveries (once per event and
        /// endpoint, and only for endpoints and events that still exist) and
        /// marks the events routed.
        bg fn route(&self, deliveries: Vec<NewDelivery>, routed: Vec<i64>) -> ();
        /// Claims up to `limit` due deliveries of enabled endpoints that head
        /// their (endpoint, conversation), no more per endpoint than its room,
        /// leased until `lease_until`, oldest due first.
        read fn claim_deliveries(&self, ask: ClaimAsk<Rooms>) -> Vec<ClaimedDelivery>;
        /// Records attempts and moves each delivery on; a 410 disables its
        /// endpoint (`gone`).
        bg fn record_delivery_attempts(&self, records: Vec<DeliveryRecord>) -> ();
        /// Gives back claimed deliveries unsent, each due again at its time.
        bg fn give_back_deliveries(&self, back: Vec<(i64, i64)>) -> ();
        /// Ends the holding of deliveries that wait for a disabled endpoint
        /// since before `cutoff_ms`: they become `dead`. Returns how many.
        bg fn expire_held(&self, cutoff_ms: i64) -> u64;
    }
}

/// An endpoint's route from its stored `event_types` (a JSON list) and
/// `filter` (a JSON object of lists); an unreadable one matches nothing.
pub fn parse_route(event_types: Option<&str>, filter: Option<&str>) -> Route {
    let nothing = || Route {
        event_types: Some(Vec::new()),
        filter: None,
    };
    let event_types = match event_types {
        None => None,
        Some(t) => match serde_json::from_str::<Vec<String>>(t) {
            Ok(v) => Some(v),
            Err(_) => return nothing(),
        },
    };
    let filter = match filter {
        None => None,
        Some(f) => match serde_json::from_str::<serde_json::Map<String, Value>>(f) {
            Ok(m) => Some(
                m.into_iter()
                    .map(|(k, v)| match v {
                        Value::Array(a) => (k, a),
                        other => (k, vec![other]),
                    })
                    .collect(),
            ),
            Err(_) => return nothing(),
        },
    };
    Route {
        event_types,
        filter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn route(id: &str, created_at: i64, filter: Option<&str>) -> EndpointRoute {
        EndpointRoute {
            id: EndpointId::stored(id),
            chatbot_id: ChatbotId::stored("cb_a"),
            created_at,
            route: parse_route(None, filter),
        }
    }

    fn ids(eps: Vec<&EndpointRoute>) -> Vec<&str> {
        eps.into_iter().map(|e| e.id.as_str()).collect()
    }

    #[test]
    fn an_event_goes_to_the_endpoints_that_existed_and_take_it_and_a_test_to_none() {
        let eps = [
            route("ep_all", 10, None),
            route("ep_yes", 10, Some(r#"{"action_id":["yes"]}"#)),
            route("ep_late", 50, None),
        ];
        let clicked = "interaction.button_clicked";
        assert_eq!(
            ids(takers(clicked, br#"{"action_id":"yes"}"#, 20, &eps)),
            ["ep_all", "ep_yes"]
        );
        assert_eq!(
            ids(takers(clicked, br#"{"action_id":"no"}"#, 60, &eps)),
            ["ep_all", "ep_late"]
        );
        // An unreadable payload matches no filter; an endpoint without one
        // still takes the event.
        assert_eq!(ids(takers(clicked, b"{", 60, &eps)), ["ep_all", "ep_late"]);
        assert!(takers(crate::domain::events::WEBHOOK_TEST, b"{}", 60, &eps).is_empty());
    }

    #[test]
    fn a_filter_reads_its_keys_and_one_level_into_them_from_the_payload() {
        let eps = [route(
            "ep_pro",
            10,
            Some(r#"{"user.plan":["pro"],"n":[1]}"#),
        )];
        let t = "interaction.button_clicked";
        let yes = br#"{"message":{"blocks":[{"x":[1,{"y":"z"}]}]},"user":{"plan":"pro"},"n":1.0}"#;
        assert_eq!(ids(takers(t, yes, 20, &eps)), ["ep_pro"]);
        assert!(takers(t, br#"{"user":{"plan":"free"},"n":1}"#, 20, &eps).is_empty());
        assert!(takers(t, br#"{"user":{"plan":"pro"}}"#, 20, &eps).is_empty());
        assert!(takers(t, br#"{"user":"pro","n":1}"#, 20, &eps).is_empty());
        assert!(takers(t, br#"[{"user":{"plan":"pro"},"n":1}]"#, 20, &eps).is_empty());
    }

    #[test]
    fn a_stored_route_parses_and_an_unreadable_one_matches_nothing() {
        let r = parse_route(
            Some(r#"["interaction.button_clicked"]"#),
            Some(r#"{"action_id":["a"]}"#),
        );
        assert!(r.matches("interaction.button_clicked", &json!({"action_id": "a"})));
        assert!(!r.matches("interaction.button_clicked", &json!({"action_id": "b"})));
        assert!(!r.matches("message.received", &json!({"action_id": "a"})));
        assert!(parse_route(None, None).matches("x", &json!({})));
        assert!(!parse_route(Some("{"), None).matches("x", &json!({})));
    }
}
