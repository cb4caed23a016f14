//! Endpoints (§13): where a chatbot's events go, and which of them.
//!
//! A chatbot has a default endpoint (its `webhook_url`) and any number of
//! others. This module holds what an endpoint is and the one rule that
//! decides whether an event goes to it; storage and HTTP live elsewhere.

use crate::domain::ids::{ChatbotId, EndpointId};
use serde_json::Value;

use crate::domain::model::Chatbot;
use crate::domain::time::rfc3339;

mod body;
pub mod stored;

pub use body::{EndpointChange, parse_change};
pub use stored::StoredEndpoint;

/// The event types an endpoint may subscribe to.
pub const EVENT_TYPES: [&str; 3] = [
    "interaction.button_clicked",
    "interaction.form_submitted",
    "message.received",
];

/// A filter: each key with its allowed values, in the order given.
pub type Filter = Vec<(String, Vec<Value>)>;

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
    pub filter: Option<Filter>,
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

/// An endpoint as the service keeps it (§13). The default endpoint is
/// built from its chatbot's row (url, secrets, 410 state) and its settings
/// row, when it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub id: EndpointId,
    pub chatbot_id: ChatbotId,
    pub is_default: bool,
    pub url: String,
    pub description: String,
    /// `None`: every type.
    pub event_types: Option<Vec<String>>,
    /// `None`: no filter. Keys in the order given.
    pub filter: Option<Filter>,
    /// Whether a 2xx reply body is applied as a reply.
    pub replies: bool,
    pub rate_limit: Option<RateLimit>,
    /// Extra request headers, in the order given.
    pub headers: Vec<(String, String)>,
    pub enabled: bool,
    /// Set exactly when `enabled` is false.
    pub disabled_reason: Option<DisabledReason>,
    pub signing_secret: String,
    /// The secret replaced by the last rotation and when it stops signing.
    pub previous_secret: Option<(String, i64)>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Endpoint {
    /// What routing needs of it.
    pub fn route(&self) -> Route {
        Route {
            event_types: self.event_types.clone(),
            filter: self.filter.clone(),
        }
    }

    /// The secrets that sign a delivery at `now`: the current one, and the
    /// previous one during its grace period.
    pub fn live_secrets(&self, now_ms: i64) -> Vec<&str> {
        let mut v = vec![self.signing_secret.as_str()];
        if let Some((prev, until)) = &self.previous_secret
            && *until > now_ms
        {
            v.push(prev);
        }
        v
    }

    /// The §13 endpoint object (never a secret).
    pub fn to_json(&self) -> Value {
        let filter = self.filter.as_ref().map(|f| {
            Value::Object(
                f.iter()
                    .map(|(k, v)| (k.clone(), Value::Array(v.clone())))
                    .collect(),
            )
        });
        let headers: serde_json::Map<String, Value> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        serde_json::json!({
            "id": self.id,
            "url": self.url,
            "description": self.description,
            "default": self.is_default,
            "event_types": self.event_types,
            "filter": filter,
            "replies": self.replies,
            "rate_limit": self.rate_limit.map(RateLimit::format),
            "headers": headers,
            "enabled": self.enabled,
            "disabled_reason": self.disabled_reason.map(DisabledReason::as_str),
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
        })
    }

    /// A new endpoint of `chatbot_id` from a checked create body.
    pub fn new(
        id: EndpointId,
        chatbot_id: &ChatbotId,
        change: EndpointChange,
        signing_secret: String,
        now_ms: i64,
    ) -> Self {
        let mut ep = Endpoint {
            id,
            chatbot_id: chatbot_id.clone(),
            is_default: false,
            url: String::new(),
            description: String::new(),
            event_types: None,
            filter: None,
            replies: false,
            rate_limit: None,
            headers: Vec::new(),
            enabled: true,
            disabled_reason: None,
            signing_secret,
            previous_secret: None,
            created_at: now_ms,
            updated_at: now_ms,
        };
        ep.apply(change, now_ms);
        ep
    }

    /// The chatbot's default endpoint: its url, secrets and 410 state from
    /// the chatbot, the rest from its settings row (`settings`) or the
    /// defaults.
    pub fn default_of(bot: &Chatbot, settings: Option<&Endpoint>) -> Self {
        let disabled_reason = bot.endpoint_disabled.then(|| {
            settings
                .and_then(|s| s.disabled_reason)
                .unwrap_or(DisabledReason::Gone)
        });
        let s = settings;
        Endpoint {
            id: default_endpoint_id(&bot.id),
            chatbot_id: bot.id.clone(),
            is_default: true,
            url: bot.webhook_url.clone(),
            description: s.map(|s| s.description.clone()).unwrap_or_default(),
            event_types: s.and_then(|s| s.event_types.clone()),
            filter: s.and_then(|s| s.filter.clone()),
            replies: s.is_none_or(|s| s.replies),
            rate_limit: s.and_then(|s| s.rate_limit),
            headers: s.map(|s| s.headers.clone()).unwrap_or_default(),
            enabled: !bot.endpoint_disabled,
            disabled_reason,
            signing_secret: bot.signing_secret.clone(),
            previous_secret: bot.previous_secret.clone(),
            created_at: bot.created_at,
            updated_at: s.map_or(bot.created_at, |s| s.updated_at),
        }
    }

    /// Applies a checked create or patch body. A new `url` or
    /// `enabled: true` ends a `gone`; `enabled: false` pauses it.
    pub fn apply(&mut self, c: EndpointChange, now_ms: i64) {
        if let Some(url) = c.url
            && url != self.url
        {
            self.url = url;
            if self.disabled_reason == Some(DisabledReason::Gone) {
                self.enabled = true;
                self.disabled_reason = None;
            }
        }
        if let Some(d) = c.description {
            self.description = d;
        }
        if let Some(t) = c.event_types {
            self.event_types = t;
        }
        if let Some(f) = c.filter {
            self.filter = f;
        }
        if let Some(r) = c.replies {
            self.replies = r;
        }
        if let Some(r) = c.rate_limit {
            self.rate_limit = r;
        }
        if let Some(h) = c.headers {
            self.headers = h;
        }
        match c.enabled {
            Some(true) => {
                self.enabled = true;
                self.disabled_reason = None;
            }
            Some(false) => {
                self.enabled = false;
                self.disabled_reason = Some(DisabledReason::Paused);
            }
            _ => {}
        }
        self.updated_at = now_ms;
    }
}

/// The id of a chatbot's default endpoint: `ep_` and the chatbot id's
/// 26 characters (derived, never stored).
pub fn default_endpoint_id(chatbot_id: &str) -> EndpointId {
    let tail = chatbot_id.strip_prefix("cb_").unwrap_or(chatbot_id);
    EndpointId::stored(format!("ep_{tail}"))
}

/// The chatbot id of a default endpoint id (the inverse of
/// [`default_endpoint_id`]).
pub fn chatbot_of_default(endpoint_id: &str) -> Option<ChatbotId> {
    endpoint_id
        .strip_prefix("ep_")
        .map(|t| ChatbotId::stored(format!("cb_{t}")))
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

    fn endpoint() -> Endpoint {
        let change = EndpointChange {
            url: Some("https://a.example/h".into()),
            ..Default::default()
        };
        Endpoint::new(
            EndpointId::stored("ep_1"),
            &ChatbotId::stored("cb_1"),
            change,
            "whsec_s".into(),
            10,
        )
    }

    fn change(v: Value) -> EndpointChange {
        parse_change(&v, false).expect("a valid change")
    }

    #[test]
    fn a_new_url_or_enabled_true_ends_gone_but_a_new_url_does_not_end_a_pause() {
        let mut ep = endpoint();
        assert_eq!(
            (ep.enabled, ep.disabled_reason, ep.replies),
            (true, None, false)
        );
        ep.enabled = false;
        ep.disabled_reason = Some(DisabledReason::Gone);
        ep.apply(
            change(json!({"url": "https://a.example/h", "description": "d"})),
            20,
        );
        assert_eq!(
            ep.disabled_reason,
            Some(DisabledReason::Gone),
            "the same url"
        );
        ep.apply(change(json!({"url": "https://b.example/h"})), 30);
        assert_eq!((ep.enabled, ep.disabled_reason), (true, None));
        assert_eq!(ep.updated_at, 30);

        ep.apply(change(json!({"enabled": false})), 40);
        assert_eq!(ep.disabled_reason, Some(DisabledReason::Paused));
        ep.apply(change(json!({"url": "https://c.example/h"})), 50);
        assert_eq!(
            (ep.enabled, ep.disabled_reason),
            (false, Some(DisabledReason::Paused))
        );
        ep.apply(change(json!({"enabled": true})), 60);
        assert_eq!((ep.enabled, ep.disabled_reason), (true, None));
    }

    #[test]
    fn the_default_endpoint_is_its_chatbot_with_its_settings() {
        let bot = Chatbot {
            id: ChatbotId::stored("cb_01JZYA7M3T0000000000000000"),
            name: "n".into(),
            webhook_url: "https://hook.example/".into(),
            retention_ms: 1,
            signing_secret: "whsec_bot".into(),
            previous_secret: Some(("whsec_old".into(), 99)),
            endpoint_disabled: false,
            member_id: "mem_1".into(),
            created_at: 5,
            allowed_origins: Default::default(),
        };
        let d = Endpoint::default_of(&bot, None);
        assert_eq!(d.id, "ep_01JZYA7M3T0000000000000000");
        assert!(d.is_default && d.replies && d.enabled);
        assert_eq!(
            (d.url.as_str(), d.signing_secret.as_str()),
            ("https://hook.example/", "whsec_bot")
        );
        assert_eq!(d.live_secrets(98), ["whsec_bot", "whsec_old"]);
        assert_eq!(d.live_secrets(99), ["whsec_bot"]);
        assert_eq!(d.to_json()["default"], true);
        assert!(d.to_json().get("signing_secret").is_none());

        let mut settings = endpoint();
        settings.apply(
            change(json!({"enabled": false, "replies": false, "description": "x"})),
            70,
        );
        let mut bot = bot;
        bot.endpoint_disabled = true;
        let d = Endpoint::default_of(&bot, Some(&settings));
        assert_eq!(
            (d.enabled, d.disabled_reason),
            (false, Some(DisabledReason::Paused))
        );
        assert_eq!(
            (d.replies, d.description.as_str(), d.updated_at),
            (false, "x", 70)
        );
        // Disabled by a 410 (no pause recorded): gone.
        let d = Endpoint::default_of(&bot, None);
        assert_eq!(d.disabled_reason, Some(DisabledReason::Gone));
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
