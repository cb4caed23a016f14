//! Endpoints (§13): where a chatbot's events go, and which of them.
//!
//! A chatbot has a default endpoint (its `webhook_url`) and any number of
//! others. This module holds what an endpoint is and the one rule that
//! decides whether an event goes to it; storage and HTTP live elsewhere.

use serde_json::Value;

/// The event types an endpoint may subscribe to.
pub const EVENT_TYPES: [&str; 3] = [
    "interaction.button_clicked",
    "interaction.form_submitted",
    "message.received",
];

/// Why an endpoint does not receive deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisabledReason {
    /// Disabled by its owner (`enabled: false`).
    Paused,
    /// It answered `410 Gone`.
    Gone,
}

impl DisabledReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DisabledReason::Paused => "paused",
            DisabledReason::Gone => "gone",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "paused" => Some(DisabledReason::Paused),
            "gone" => Some(DisabledReason::Gone),
            _ => None,
        }
    }
}

/// A rate limit: at most `max` deliveries in any window of `window_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub max: u32,
    pub window_ms: i64,
}

impl RateLimit {
    /// Parses `N/s`, `N/min` or `N/h` (N ≥ 1).
    pub fn parse(s: &str) -> Option<Self> {
        let (n, unit) = s.split_once('/')?;
        let max: u32 = n.parse().ok().filter(|n| *n >= 1)?;
        let window_ms = match unit {
            "s" => 1_000,
            "min" => 60_000,
            "h" => 3_600_000,
            _ => return None,
        };
        Some(RateLimit { max, window_ms })
    }

    pub fn format(self) -> String {
        let unit = match self.window_ms {
            1_000 => "s",
            60_000 => "min",
            _ => "h",
        };
        format!("{}/{unit}", self.max)
    }
}

/// What routing needs of an endpoint: which events it takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Route {
    /// `None`: every type.
    pub event_types: Option<Vec<String>>,
    /// `None`: no filter. Each key with its allowed values.
    pub filter: Option<Vec<(String, Vec<Value>)>>,
}

impl Route {
    /// Whether an event of `event_type` with this flat payload goes to the
    /// endpoint: its type is subscribed, and for every filter key the
    /// event's value there (a top-level key, or `a.b` one level into an
    /// object) equals one of the listed values. A missing key does not match.
    pub fn matches(&self, event_type: &str, payload: &Value) -> bool {
        if let Some(types) = &self.event_types
            && !types.iter().any(|t| t == event_type)
        {
            return false;
        }
        let Some(filter) = &self.filter else {
            return true;
        };
        filter
            .iter()
            .all(|(key, allowed)| match lookup(payload, key) {
                Some(v) => allowed.iter().any(|a| same(a, v)),
                None => false,
            })
    }
}

/// The value at a filter key: `key` or `outer.inner`.
fn lookup<'a>(payload: &'a Value, key: &str) -> Option<&'a Value> {
    match key.split_once('.') {
        None => payload.get(key),
        Some((outer, inner)) => payload.get(outer)?.get(inner),
    }
}

/// JSON equality, with numbers compared by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// The id of a chatbot's default endpoint: `ep_` and the chatbot id's
/// 26 characters (derived, never stored).
pub fn default_endpoint_id(chatbot_id: &str) -> String {
    let tail = chatbot_id.strip_prefix("cb_").unwrap_or(chatbot_id);
    format!("ep_{tail}")
}

/// The chatbot id of a default endpoint id (the inverse of
/// [`default_endpoint_id`]).
pub fn chatbot_of_default(endpoint_id: &str) -> Option<String> {
    endpoint_id.strip_prefix("ep_").map(|t| format!("cb_{t}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn route(types: Option<&[&str]>, filter: Option<Value>) -> Route {
        Route {
            event_types: types.map(|t| t.iter().map(|s| s.to_string()).collect()),
            filter: filter.map(|f| {
                f.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_array().cloned().unwrap_or_default()))
                    .collect()
            }),
        }
    }

    #[test]
    fn no_types_and_no_filter_take_everything() {
        assert!(Route::default().matches("message.received", &json!({})));
    }

    #[test]
    fn event_types_select() {
        let r = route(Some(&["interaction.form_submitted"]), None);
        assert!(r.matches("interaction.form_submitted", &json!({})));
        assert!(!r.matches("interaction.button_clicked", &json!({})));
    }

    #[test]
    fn filter_keys_top_level_and_one_level_in() {
        let r = route(
            None,
            Some(
                json!({"action_id": ["approve", "reject"], "values.topic": ["billing"], "user.kind": ["visitor"]}),
            ),
        );
        let ev = json!({"action_id": "approve", "values": {"topic": "billing"}, "user": {"kind": "visitor"}});
        assert!(r.matches("interaction.form_submitted", &ev));
        let other = json!({"action_id": "approve", "values": {"topic": "sales"}, "user": {"kind": "visitor"}});
        assert!(!r.matches("interaction.form_submitted", &other));
        let missing = json!({"action_id": "approve", "user": {"kind": "visitor"}});
        assert!(!r.matches("interaction.form_submitted", &missing));
    }

    #[test]
    fn numbers_and_booleans_compare_as_json() {
        let r = route(
            None,
            Some(json!({"values.rating": [5], "values.ok": [true]})),
        );
        assert!(r.matches("x", &json!({"values": {"rating": 5.0, "ok": true}})));
        assert!(!r.matches("x", &json!({"values": {"rating": "5", "ok": true}})));
        assert!(!r.matches("x", &json!({"values": {"rating": 5, "ok": "true"}})));
    }

    #[test]
    fn rate_limits_parse_and_format() {
        assert_eq!(
            RateLimit::parse("10/min"),
            Some(RateLimit {
                max: 10,
                window_ms: 60_000
            })
        );
        assert_eq!(RateLimit::parse("0/s"), None);
        assert_eq!(RateLimit::parse("5/day"), None);
        assert_eq!(
            RateLimit::parse("3/h").map(RateLimit::format).as_deref(),
            Some("3/h")
        );
    }

    #[test]
    fn default_endpoint_ids_round_trip() {
        let id = default_endpoint_id("cb_01JZYA7M3T0000000000000000");
        assert_eq!(id, "ep_01JZYA7M3T0000000000000000");
        assert_eq!(
            chatbot_of_default(&id).as_deref(),
            Some("cb_01JZYA7M3T0000000000000000")
        );
    }
}
