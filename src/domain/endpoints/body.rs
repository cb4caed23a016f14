//! A create or patch body of an endpoint (§13), checked key by key: every
//! problem is one [`FieldError`] with its pointer, all of them at once.

use serde_json::{Map, Value};

use super::{EVENT_TYPES, Filter, RateLimit};
use crate::domain::error::FieldError;

/// The keys a body may have.
const KEYS: [&str; 8] = [
    "url",
    "description",
    "event_types",
    "filter",
    "replies",
    "rate_limit",
    "headers",
    "enabled",
];

pub const URL_MAX: usize = 2000;
pub const DESCRIPTION_MAX: usize = 500;
pub const FILTER_KEYS_MAX: usize = 10;
pub const FILTER_VALUES_MAX: usize = 20;
pub const FILTER_KEY_MAX: usize = 200;
pub const HEADERS_MAX: usize = 10;
pub const HEADER_NAME_MAX: usize = 64;
pub const HEADER_VALUE_MAX: usize = 1024;

/// The top-level keys of the flat events (§4) that hold a scalar.
const EVENT_KEYS: [&str; 19] = [
    "api_version",
    "block_kit_version",
    "event",
    "type",
    "event_id",
    "chatbot_id",
    "conversation_id",
    "message_id",
    "block_id",
    "action_id",
    "value",
    "label",
    "form_id",
    "text",
    "clicked_at",
    "submitted_at",
    "received_at",
    "response_url",
    "delivery_attempt",
];

/// The keys of `user` in an event.
const USER_KEYS: [&str; 3] = ["kind", "id", "display_name"];

/// Headers a delivery sets itself (and every `webhook-*`).
const FORBIDDEN_HEADERS: [&str; 7] = [
    "content-type",
    "content-length",
    "host",
    "connection",
    "transfer-encoding",
    "te",
    "upgrade",
];

/// What a checked body changes; `None`: not in the body. For the nullable
/// settings, `Some(None)` sets them back to null.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub description: Option<String>,
    pub event_types: Option<Option<Vec<String>>>,
    pub filter: Option<Option<Filter>>,
    pub replies: Option<bool>,
    pub rate_limit: Option<Option<RateLimit>>,
    pub headers: Option<Vec<(String, String)>>,
    pub enabled: Option<bool>,
}

/// Checks a create (`creating`: `url` required) or patch body. The URL is
/// only checked for its form here; whether it names a private address is
/// the caller's to ask (it takes a DNS lookup).
pub fn parse_change(body: &Value, creating: bool) -> Result<EndpointChange, Vec<FieldError>> {
    let Some(o) = body.as_object() else {
        return Err(vec![FieldError::new(
            "",
            "invalid_type",
            "the body must be a JSON object",
        )]);
    };
    let mut errors: Vec<FieldError> = o
        .keys()
        .filter(|k| !KEYS.contains(&k.as_str()))
        .map(|k| {
            FieldError::new(
                format!("/{}", escape(k)),
                "unknown_field",
                "this key is not allowed here",
            )
        })
        .collect();
    let mut change = EndpointChange::default();
    match url(o.get("url"), creating) {
        Ok(u) => change.url = u,
        Err(f) => errors.push(f),
    }
    match text(o, "description", DESCRIPTION_MAX) {
        Ok(d) => change.description = d,
        Err(f) => errors.push(f),
    }
    if let Some(v) = o.get("event_types") {
        match event_types(v) {
            Ok(t) => change.event_types = Some(t),
            Err(f) => errors.push(f),
        }
    }
    if let Some(v) = o.get("filter") {
        match filter(v) {
            Ok(f) => change.filter = Some(f),
            Err(mut f) => errors.append(&mut f),
        }
    }
    for (key, slot) in [
        ("replies", &mut change.replies),
        ("enabled", &mut change.enabled),
    ] {
        match o.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => *slot = Some(*b),
            Some(_) => errors.push(FieldError::new(
                format!("/{key}"),
                "invalid_type",
                "must be a boolean",
            )),
        }
    }
    match o.get("rate_limit") {
        None => {}
        Some(Value::Null) => change.rate_limit = Some(None),
        Some(Value::String(s)) if RateLimit::parse(s).is_some() => {
            change.rate_limit = Some(RateLimit::parse(s));
        }
        Some(_) => errors.push(FieldError::new(
            "/rate_limit",
            "invalid_rate_limit",
            "must be null or `N/s`, `N/min` or `N/h` with N at least 1",
        )),
    }
    if let Some(v) = o.get("headers") {
        match headers(v) {
            Ok(h) => change.headers = Some(h),
            Err(mut f) => errors.append(&mut f),
        }
    }
    if errors.is_empty() {
        Ok(change)
    } else {
        Err(errors)
    }
}

fn url(v: Option<&Value>, creating: bool) -> Result<Option<String>, FieldError> {
    let (code, message) = match v {
        None | Some(Value::Null) if !creating => return Ok(None),
        None | Some(Value::Null) => ("required", "url is required"),
        Some(Value::String(s)) if s.trim().is_empty() => ("required", "must not be empty"),
        Some(Value::String(s)) if s.chars().count() > URL_MAX => {
            ("too_long", "must be at most 2000 characters")
        }
        Some(Value::String(s)) => return Ok(Some(s.clone())),
        Some(_) => ("invalid_type", "must be a string"),
    };
    Err(FieldError::new("/url", code, message))
}

fn text(o: &Map<String, Value>, key: &str, max: usize) -> Result<Option<String>, FieldError> {
    match o.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(String::new())),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(FieldError::new(
            format!("/{key}"),
            "too_long",
            format!("must be at most {max} characters"),
        )),
        Some(_) => Err(FieldError::new(
            format!("/{key}"),
            "invalid_type",
            "must be a string",
        )),
    }
}

fn event_types(v: &Value) -> Result<Option<Vec<String>>, FieldError> {
    let list = match v {
        Value::Null => return Ok(None),
        Value::Array(a) if a.is_empty() => {
            return Err(FieldError::new(
                "/event_types",
                "too_short",
                "must be null (every type) or a non-empty list",
            ));
        }
        Value::Array(a) => a,
        _ => {
            return Err(FieldError::new(
                "/event_types",
                "invalid_type",
                "must be null or a list of event types",
            ));
        }
    };
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        match t.as_str().filter(|t| EVENT_TYPES.contains(t)) {
            Some(t) if !out.iter().any(|o| o == t) => out.push(t.to_string()),
            Some(_) => {
                return Err(FieldError::new(
                    format!("/event_types/{i}"),
                    "duplicate_value",
                    "this event type is listed twice",
                ));
            }
            None => {
                return Err(FieldError::new(
                    format!("/event_types/{i}"),
                    "unknown_event_type",
                    format!("must be one of {}", EVENT_TYPES.join(", ")),
                ));
            }
        }
    }
    Ok(Some(out))
}

fn filter(v: &Value) -> Result<Option<Filter>, Vec<FieldError>> {
    let o = match v {
        Value::Null => return Ok(None),
        Value::Object(o) if o.len() <= FILTER_KEYS_MAX => o,
        Value::Object(_) => {
            return Err(vec![FieldError::new(
                "/filter",
                "invalid_filter",
                format!("at most {FILTER_KEYS_MAX} keys"),
            )]);
        }
        _ => {
            return Err(vec![FieldError::new(
                "/filter",
                "invalid_filter",
                "must be null or an object of key: [allowed values]",
            )]);
        }
    };
    let mut out = Vec::with_capacity(o.len());
    let mut errors = Vec::new();
    for (key, values) in o {
        match filter_entry(key, values) {
            Ok(values) => out.push((key.clone(), values)),
            Err(message) => errors.push(FieldError::new(
                format!("/filter/{}", escape(key)),
                "invalid_filter",
                message,
            )),
        }
    }
    if errors.is_empty() {
        Ok(Some(out))
    } else {
        Err(errors)
    }
}

fn filter_entry(key: &str, values: &Value) -> Result<Vec<Value>, String> {
    if !filter_key(key) {
        return Err(format!(
            "`{key}` is not a field of an event: use a top-level key (`action_id`, `value`, …) or one level into `user`, `message_metadata` or `values` (`values.topic`)"
        ));
    }
    let list = values
        .as_array()
        .filter(|a| (1..=FILTER_VALUES_MAX).contains(&a.len()))
        .ok_or_else(|| format!("must be a list of 1 to {FILTER_VALUES_MAX} values"))?;
    if list
        .iter()
        .any(|v| !(v.is_string() || v.is_number() || v.is_boolean()))
    {
        return Err("each value is a string, a number or a boolean".into());
    }
    Ok(list.clone())
}

/// A top-level scalar key of an event, or one level into `user`,
/// `message_metadata` or `values`.
fn filter_key(key: &str) -> bool {
    if key.is_empty() || key.chars().count() > FILTER_KEY_MAX {
        return false;
    }
    match key.split_once('.') {
        None => EVENT_KEYS.contains(&key),
        Some(("user", inner)) => USER_KEYS.contains(&inner),
        Some(("message_metadata" | "values", inner)) => !inner.is_empty() && !inner.contains('.'),
        Some(_) => false,
    }
}

fn headers(v: &Value) -> Result<Vec<(String, String)>, Vec<FieldError>> {
    let o = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Object(o) if o.len() <= HEADERS_MAX => o,
        Value::Object(_) => {
            return Err(vec![FieldError::new(
                "/headers",
                "too_many",
                format!("at most {HEADERS_MAX} headers"),
            )]);
        }
        _ => {
            return Err(vec![FieldError::new(
                "/headers",
                "invalid_type",
                "must be an object of name: value",
            )]);
        }
    };
    let mut out: Vec<(String, String)> = Vec::with_capacity(o.len());
    let mut errors = Vec::new();
    for (name, value) in o {
        let lower = name.to_ascii_lowercase();
        let problem =
            if FORBIDDEN_HEADERS.contains(&lower.as_str()) || lower.starts_with("webhook-") {
                Some((
                    "forbidden_header",
                    "this header is set by the delivery itself".to_string(),
                ))
            } else if name.is_empty() || !name.bytes().all(token_char) {
                Some(("invalid_header", "not a valid header name".to_string()))
            } else if name.len() > HEADER_NAME_MAX {
                Some((
                    "too_long",
                    format!("header names are at most {HEADER_NAME_MAX} characters"),
                ))
            } else if out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                Some(("duplicate_header", "this header is named twice".to_string()))
            } else {
                match value.as_str() {
                    None => Some(("invalid_type", "the value must be a string".to_string())),
                    Some(s) if s.len() > HEADER_VALUE_MAX => Some((
                        "too_long",
                        format!("header values are at most {HEADER_VALUE_MAX} bytes"),
                    )),
                    Some(s) if !s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f)) => {
                        Some(("invalid_header", "not a valid header value".to_string()))
                    }
                    Some(s) => {
                        out.push((name.clone(), s.to_string()));
                        None
                    }
                }
            };
        if let Some((code, message)) = problem {
            errors.push(FieldError::new(
                format!("/headers/{}", escape(name)),
                code,
                message,
            ));
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// A character of an HTTP token (RFC 9110 `tchar`).
fn token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `key` as a JSON pointer token (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(body: Value, creating: bool) -> Vec<(String, &'static str)> {
        match parse_change(&body, creating) {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|f| (f.field, f.code)).collect(),
        }
    }

    fn one(field: &str, code: &'static str) -> Vec<(String, &'static str)> {
        vec![(field.to_string(), code)]
    }

    #[test]
    fn a_full_body_is_read_with_its_order_kept() {
        let body = json!({
            "url": "https://crm.example.com/hook", "description": "CRM",
            "event_types": ["interaction.form_submitted"],
            "filter": {"values.topic": ["billing", "sales"], "action_id": ["send"], "user.kind": ["visitor"]},
            "replies": true, "rate_limit": "10/min", "headers": {"X-B": "2", "X-A": "1"}, "enabled": false
        });
        let c = parse_change(&body, true).expect("valid");
        assert_eq!(c.url.as_deref(), Some("https://crm.example.com/hook"));
        assert_eq!(
            c.event_types,
            Some(Some(vec!["interaction.form_submitted".to_string()]))
        );
        let keys: Vec<_> = c
            .filter
            .clone()
            .flatten()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["values.topic", "action_id", "user.kind"]);
        assert_eq!(
            c.headers,
            Some(vec![("X-B".into(), "2".into()), ("X-A".into(), "1".into())])
        );
        assert_eq!(c.rate_limit, Some(RateLimit::parse("10/min")));
        assert_eq!((c.replies, c.enabled), (Some(true), Some(false)));
    }

    #[test]
    fn a_patch_needs_no_url_and_null_resets() {
        let c = parse_change(
            &json!({"event_types": null, "filter": null, "rate_limit": null, "headers": null}),
            false,
        )
        .expect("valid");
        assert_eq!(c.url, None);
        assert_eq!(c.event_types, Some(None));
        assert_eq!(c.filter, Some(None));
        assert_eq!(c.rate_limit, Some(None));
        assert_eq!(c.headers, Some(Vec::new()));
        assert_eq!(problems(json!({}), true), one("/url", "required"));
    }

    #[test]
    fn unknown_event_types_are_named_by_index() {
        assert_eq!(
            problems(
                json!({"event_types": ["message.received", "message.sent"]}),
                false
            ),
            one("/event_types/1", "unknown_event_type")
        );
        assert_eq!(
            problems(json!({"event_types": [7]}), false),
            one("/event_types/0", "unknown_event_type")
        );
        assert_eq!(
            problems(json!({"event_types": []}), false),
            one("/event_types", "too_short")
        );
    }

    #[test]
    fn bad_filters_are_named_by_key() {
        for (filter, field) in [
            (json!({"nope": ["x"]}), "/filter/nope"),
            (json!({"user": ["x"]}), "/filter/user"),
            (json!({"user.email": ["x"]}), "/filter/user.email"),
            (json!({"values.a.b": ["x"]}), "/filter/values.a.b"),
            (json!({"values.": ["x"]}), "/filter/values."),
            (json!({"action_id": []}), "/filter/action_id"),
            (json!({"action_id": "send"}), "/filter/action_id"),
            (json!({"action_id": [{"a": 1}]}), "/filter/action_id"),
            (json!({"action_id": [null]}), "/filter/action_id"),
            (json!({"action_id": vec!["x"; 21]}), "/filter/action_id"),
            (json!({"a/b": ["x"]}), "/filter/a~1b"),
        ] {
            assert_eq!(
                problems(json!({ "filter": filter }), false),
                one(field, "invalid_filter"),
                "{filter}"
            );
        }
        let many: Map<String, Value> = (0..11)
            .map(|i| (format!("values.f{i}"), json!(["x"])))
            .collect();
        assert_eq!(
            problems(json!({ "filter": many }), false),
            one("/filter", "invalid_filter")
        );
        assert!(
            problems(
                json!({"filter": {"message_metadata.flow": ["a", 1, true]}}),
                false
            )
            .is_empty()
        );
    }

    #[test]
    fn forbidden_and_bad_headers_are_named() {
        for name in [
            "Content-Type",
            "content-length",
            "Host",
            "connection",
            "Transfer-Encoding",
            "TE",
            "upgrade",
            "Webhook-Signature",
            "webhook-anything",
        ] {
            assert_eq!(
                problems(json!({"headers": { name: "x" }}), false),
                one(&format!("/headers/{name}"), "forbidden_header"),
            );
        }
        assert_eq!(
            problems(json!({"headers": {"X Bad": "x"}}), false),
            one("/headers/X Bad", "invalid_header")
        );
        assert_eq!(
            problems(json!({"headers": {"X-A": "line\nbreak"}}), false),
            one("/headers/X-A", "invalid_header")
        );
        assert_eq!(
            problems(json!({"headers": {"X-A": 1}}), false),
            one("/headers/X-A", "invalid_type")
        );
        assert_eq!(
            problems(json!({"headers": {"X-A": "v".repeat(1025)}}), false),
            one("/headers/X-A", "too_long")
        );
        let long = "x".repeat(65);
        assert_eq!(
            problems(json!({"headers": { long.clone(): "v" }}), false),
            one(&format!("/headers/{long}"), "too_long")
        );
        assert_eq!(
            problems(json!({"headers": {"X-A": "1", "x-a": "2"}}), false),
            one("/headers/x-a", "duplicate_header")
        );
        let many: Map<String, Value> = (0..11).map(|i| (format!("X-{i}"), json!("v"))).collect();
        assert_eq!(
            problems(json!({ "headers": many }), false),
            one("/headers", "too_many")
        );
    }

    #[test]
    fn scalars_have_their_types_and_every_problem_is_reported() {
        assert_eq!(
            problems(
                json!({"url": 5, "description": "d".repeat(501), "replies": "yes", "enabled": 1,
                       "rate_limit": "5/day", "secret": "x"}),
                true
            ),
            vec![
                ("/secret".to_string(), "unknown_field"),
                ("/url".to_string(), "invalid_type"),
                ("/description".to_string(), "too_long"),
                ("/replies".to_string(), "invalid_type"),
                ("/enabled".to_string(), "invalid_type"),
                ("/rate_limit".to_string(), "invalid_rate_limit"),
            ]
        );
        assert_eq!(problems(json!([1]), true), one("", "invalid_type"));
        assert_eq!(
            problems(json!({"url": " "}), false),
            one("/url", "required")
        );
    }
}
