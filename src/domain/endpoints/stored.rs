//! An endpoint as a row of `endpoints` (migration 0010), the same for both
//! stores: booleans as integers, lists and objects as JSON text.

use serde_json::{Map, Value};

use crate::domain::ids::{ChatbotId, EndpointId};

use super::{DisabledReason, Endpoint, RateLimit};

/// The columns of `endpoints`, in the order [`StoredEndpoint`] lists them.
pub const COLUMNS: &str = "id, chatbot_id, is_default, url, description, event_types, filter, replies, rate_limit, headers, enabled, disabled_reason, signing_secret, previous_secret, previous_until, created_at, updated_at";

/// One row of `endpoints`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEndpoint {
    pub id: EndpointId,
    pub chatbot_id: ChatbotId,
    pub is_default: i64,
    pub url: String,
    pub description: String,
    pub event_types: Option<String>,
    pub filter: Option<String>,
    pub replies: i64,
    pub rate_limit: Option<String>,
    pub headers: Option<String>,
    pub enabled: i64,
    pub disabled_reason: Option<String>,
    pub signing_secret: String,
    pub previous_secret: Option<String>,
    pub previous_until: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl StoredEndpoint {
    /// The row of `ep`. The default endpoint's row is its settings only:
    /// its url, secrets and 410 state stay in the chatbot's row.
    pub fn of(ep: &Endpoint) -> Self {
        let filter = ep.filter.as_ref().map(|f| {
            let m: Map<String, Value> = f
                .iter()
                .map(|(k, v)| (k.clone(), Value::Array(v.clone())))
                .collect();
            Value::Object(m).to_string()
        });
        let headers = (!ep.headers.is_empty()).then(|| {
            let m: Map<String, Value> = ep
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            Value::Object(m).to_string()
        });
        let (url, secret, previous) = if ep.is_default {
            (String::new(), String::new(), None)
        } else {
            (
                ep.url.clone(),
                ep.signing_secret.clone(),
                ep.previous_secret.clone(),
            )
        };
        let (previous_secret, previous_until) = previous.unzip();
        StoredEndpoint {
            id: ep.id.clone(),
            chatbot_id: ep.chatbot_id.clone(),
            is_default: ep.is_default as i64,
            url,
            description: ep.description.clone(),
            event_types: ep
                .event_types
                .as_ref()
                .map(|t| Value::from(t.clone()).to_string()),
            filter,
            replies: ep.replies as i64,
            rate_limit: ep.rate_limit.map(RateLimit::format),
            headers,
            enabled: ep.enabled as i64,
            disabled_reason: ep.disabled_reason.map(|r| r.as_str().to_string()),
            signing_secret: secret,
            previous_secret,
            previous_until,
            created_at: ep.created_at,
            updated_at: ep.updated_at,
        }
    }

    /// The endpoint of a row (for the default's settings row, only its
    /// settings are meaningful: see [`Endpoint::default_of`]).
    pub fn into_endpoint(self) -> Result<Endpoint, serde_json::Error> {
        let event_types = self
            .event_types
            .as_deref()
            .map(serde_json::from_str::<Vec<String>>)
            .transpose()?;
        let filter = self
            .filter
            .as_deref()
            .map(serde_json::from_str::<Map<String, Value>>)
            .transpose()?
            .map(|m| {
                m.into_iter()
                    .map(|(k, v)| match v {
                        Value::Array(a) => (k, a),
                        other => (k, vec![other]),
                    })
                    .collect()
            });
        let headers = self
            .headers
            .as_deref()
            .map(serde_json::from_str::<Map<String, Value>>)
            .transpose()?
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k, s),
                other => (k, other.to_string()),
            })
            .collect();
        let enabled = self.enabled != 0;
        let disabled_reason = if enabled {
            None
        } else {
            Some(
                self.disabled_reason
                    .as_deref()
                    .and_then(DisabledReason::parse)
                    .unwrap_or(DisabledReason::Paused),
            )
        };
        Ok(Endpoint {
            id: self.id,
            chatbot_id: self.chatbot_id,
            is_default: self.is_default != 0,
            url: self.url,
            description: self.description,
            event_types,
            filter,
            replies: self.replies != 0,
            rate_limit: self.rate_limit.as_deref().and_then(RateLimit::parse),
            headers,
            enabled,
            disabled_reason,
            signing_secret: self.signing_secret,
            previous_secret: self.previous_secret.zip(self.previous_until),
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{EndpointChange, parse_change};
    use super::*;
    use serde_json::json;

    #[test]
    fn a_row_reads_back_as_the_endpoint_it_was() {
        let change: EndpointChange = parse_change(
            &json!({"url": "https://x.example/h", "description": "d", "event_types": ["message.received"],
                    "filter": {"values.b": [1, true], "action_id": ["a"]}, "rate_limit": "3/h",
                    "headers": {"X-Z": "z", "X-A": "a"}, "enabled": false}),
            true,
        )
        .expect("valid");
        let mut ep = Endpoint::new(
            EndpointId::stored("ep_1"),
            &ChatbotId::stored("cb_1"),
            change,
            "whsec_x".into(),
            1000,
        );
        ep.previous_secret = Some(("whsec_old".into(), 5000));
        let row = StoredEndpoint::of(&ep);
        assert_eq!(row.disabled_reason.as_deref(), Some("paused"));
        assert_eq!(
            row.filter.as_deref(),
            Some(r#"{"values.b":[1,true],"action_id":["a"]}"#)
        );
        assert_eq!(row.into_endpoint().expect("reads"), ep);
    }

    #[test]
    fn a_default_settings_row_keeps_no_url_or_secret() {
        let mut ep = Endpoint::new(
            EndpointId::stored("ep_1"),
            &ChatbotId::stored("cb_1"),
            EndpointChange {
                url: Some("https://x.example".into()),
                ..Default::default()
            },
            "whsec_x".into(),
            1,
        );
        ep.is_default = true;
        let row = StoredEndpoint::of(&ep);
        assert_eq!((row.url.as_str(), row.signing_secret.as_str()), ("", ""));
        assert_eq!(row.headers, None);
    }
}
