//! The OpenAPI 3.1 document at `/openapi.json`, generated from the
//! handlers' `#[utoipa::path]` annotations and then completed by rules that
//! hold for every operation, so a handler only states what is its own:
//!
//! - the three bearer credentials are declared security schemes
//!   (`admin_token`, `api_key`, `visitor_token`); an operation names one in
//!   `security(...)` and gets `401` (and `429` where §10 limits it);
//! - an operation under `/api/v1` or `/widget/v1` gets `503` (the database
//!   out of reach, with `Retry-After`);
//! - an operation with a request body gets `400` (malformed JSON), `413`,
//!   `415` and `422`; one with a path parameter gets `404`; one under
//!   `/widget/v1` gets `403` (origin not allowed);
//! - every error response is `application/problem+json` with the
//!   `Problem` schema (a handler may list an error with only a description);
//! - the JSON Schemas of `schemas/` are put into `components.schemas` as
//!   they are (their `$defs` lifted next to them) and referenced by name:
//!   `NewMessage`, `Reply`, `Blocks`, `MessageBlock` (a stored block: a
//!   definition of `Blocks` plus its `state`), and the events under
//!   `webhooks`.

use serde_json::{Map, Value, json};
use utoipa::openapi::{Ref, RefOr, Schema};

/// A request body defined by a file of `schemas/`: use it as
/// `request_body = openapi::NewMessage` and the operation references the
/// component put in from the file.
macro_rules! file_schema {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        pub struct $name;
        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                RefOr::Ref(Ref::from_schema_name(stringify!($name)))
            }
        }
        // The component comes from the file, not from this type.
        impl utoipa::ToSchema for $name {}
    };
}

file_schema!(NewMessage, "`schemas/message.schema.json`.");
file_schema!(Reply, "`schemas/reply.schema.json`.");
file_schema!(NewEndpoint, "`schemas/endpoint.create.schema.json`.");
file_schema!(EndpointChange, "`schemas/endpoint.schema.json`.");

/// The schema files of `schemas/`, each with its component name.
const FILES: &[(&str, &str, &str)] = &[
    (
        "Blocks",
        "blocks.schema.json",
        include_str!("../../schemas/blocks.schema.json"),
    ),
    (
        "NewMessage",
        "message.schema.json",
        include_str!("../../schemas/message.schema.json"),
    ),
    (
        "Reply",
        "reply.schema.json",
        include_str!("../../schemas/reply.schema.json"),
    ),
    (
        "EndpointChange",
        "endpoint.schema.json",
        include_str!("../../schemas/endpoint.schema.json"),
    ),
    (
        "NewEndpoint",
        "endpoint.create.schema.json",
        include_str!("../../schemas/endpoint.create.schema.json"),
    ),
    (
        "ButtonClickedEvent",
        "events/interaction.button_clicked.schema.json",
        include_str!("../../schemas/events/interaction.button_clicked.schema.json"),
    ),
    (
        "FormSubmittedEvent",
        "events/interaction.form_submitted.schema.json",
        include_str!("../../schemas/events/interaction.form_submitted.schema.json"),
    ),
    (
        "MessageReceivedEvent",
        "events/message.received.schema.json",
        include_str!("../../schemas/events/message.received.schema.json"),
    ),
];

/// Webhook events (OpenAPI `webhooks`) and their schema components.
const WEBHOOKS: &[(&str, &str)] = &[
    ("interaction.button_clicked", "ButtonClickedEvent"),
    ("interaction.form_submitted", "FormSubmittedEvent"),
    ("message.received", "MessageReceivedEvent"),
];

const SCHEMA_BASE: &str = "https://blockhook.dev/schemas/";

/// Completes the generated document (see the module's doc).
pub fn complete(mut api: utoipa::openapi::OpenApi) -> Value {
    add_schema::<crate::http::error::Problem>(&mut api);
    let mut doc = serde_json::to_value(api).unwrap_or_else(|_| json!({}));
    doc["openapi"] = json!("3.1.0");
    doc["info"] = json!({
        "title": "blockhook",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Signed, durable webhook events for chat-widget buttons and forms.",
    });
    let components = doc
        .as_object_mut()
        .map(|d| d.entry("components").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(c) = components {
        c.insert("securitySchemes".into(), security_schemes());
        let schemas = c
            .entry("schemas")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(s) = schemas {
            file_schemas(s);
        }
    }
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, op) in item.iter_mut() {
                complete_operation(path, method, op);
            }
        }
    }
    // A body that may be left out: `{}` or nothing.
    if let Some(rb) = doc
        .pointer_mut("/paths/~1api~1v1~1events~1test/post/requestBody")
        .and_then(Value::as_object_mut)
    {
        rb.insert("required".into(), json!(false));
    }
    let hooks: Map<String, Value> = WEBHOOKS
        .iter()
        .map(|(name, schema)| {
            (
                name.to_string(),
                json!({"post": {
                    "operationId": format!("webhook_{}", name.replace('.', "_")),
                    "summary": format!("`{name}`, delivered to the chatbot's webhook_url (signed, Standard Webhooks)"),
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}},
                    "responses": {"2XX": {"description": "Accepted; a JSON reply body is applied as a response_url POST would be"}}
                }}),
            )
        })
        .collect();
    doc["webhooks"] = Value::Object(hooks);
    doc
}

/// Puts `T` (and what it refers to) into `components.schemas`.
pub fn add_schema<T: utoipa::ToSchema>(api: &mut utoipa::openapi::OpenApi) {
    let components = api.components.get_or_insert_with(Default::default);
    components
        .schemas
        .insert(T::name().into_owned(), T::schema());
    let mut deps = Vec::new();
    T::schemas(&mut deps);
    components.schemas.extend(deps);
}

fn security_schemes() -> Value {
    let bearer = |what: &str| json!({"type": "http", "scheme": "bearer", "description": what});
    json!({
        "admin_token": bearer("The admin token (printed once on first start)."),
        "api_key": bearer("A chatbot's API key `sk_…` (shown once when the chatbot is created)."),
        "visitor_token": bearer("A visitor token `vt_…` (one conversation)."),
    })
}

/// Rewrites the `$ref`s of the file `name` to component names.
fn rewrite_refs(v: &mut Value, name: &str) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get_mut("$ref") {
                if let Some(def) = r.strip_prefix("#/$defs/") {
                    *r = format!("#/components/schemas/{name}_{def}");
                } else if let Some(file) = r.strip_prefix(SCHEMA_BASE) {
                    let target = FILES
                        .iter()
                        .find(|(_, f, _)| *f == file)
                        .map(|(n, _, _)| *n)
                        .unwrap_or("Blocks");
                    *r = format!("#/components/schemas/{target}");
                }
            }
            o.values_mut().for_each(|x| rewrite_refs(x, name));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_refs(x, name)),
        _ => {}
    }
}

fn file_schemas(out: &mut Map<String, Value>) {
    for (name, _, text) in FILES {
        let Ok(Value::Object(mut schema)) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        schema.remove("$schema");
        schema.remove("$id");
        let defs = schema.remove("$defs");
        let mut schema = Value::Object(schema);
        rewrite_refs(&mut schema, name);
        out.insert(name.to_string(), schema);
        if let Some(Value::Object(defs)) = defs {
            for (def, mut s) in defs {
                rewrite_refs(&mut s, name);
                out.insert(format!("{name}_{def}"), s);
            }
        }
    }
    // A stored block: its definition (ids and defaults filled in) plus `state`.
    let state = json!({"$ref": "#/components/schemas/BlockState"});
    out.insert(
        "BlockState".into(),
        json!({
            "type": "object",
            "required": ["disabled", "reason", "chosen_action_id"],
            "properties": {
                "disabled": {"type": "boolean"},
                "reason": {"type": ["string", "null"], "description": "`used`, `expired`, `takeover`, `storage_window` or `withdrawn`"},
                "chosen_action_id": {"type": ["string", "null"]}
            }
        }),
    );
    let mut variants = Vec::new();
    for (def, required) in [
        ("actions", &["block_id", "disable_on_click", "state"][..]),
        (
            "form",
            &[
                "block_id",
                "form_id",
                "submit_label",
                "disable_on_submit",
                "state",
            ][..],
        ),
    ] {
        let Some(mut s) = out.get(&format!("Blocks_{def}")).cloned() else {
            continue;
        };
        s["properties"]["state"] = state.clone();
        if let Some(r) = s.get_mut("required").and_then(Value::as_array_mut) {
            r.extend(required.iter().map(|k| json!(k)));
        }
        let name = format!("MessageBlock_{def}");
        variants.push(json!({"$ref": format!("#/components/schemas/{name}")}));
        out.insert(name, s);
    }
    out.insert(
        "MessageBlock".into(),
        json!({"description": "A block of a stored message (schemas/blocks.schema.json, ids and defaults filled in) with its state.", "oneOf": variants}),
    );
}

fn problem(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    })
}

/// The errors every operation of this kind can answer.
fn common_errors(
    path: &str,
    method: &str,
    op: &Map<String, Value>,
) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    let scheme = op
        .get("security")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_object)
        .and_then(|o| o.keys().next().cloned());
    if scheme.is_some() {
        out.push(("401", "unauthorized: missing or invalid credential"));
    }
    let rate_limited = scheme.as_deref() == Some("api_key")
        || path == "/widget/v1/chatbots/{chatbot_id}/conversations"
        || (path.starts_with("/widget/v1/") && (method == "post" || path.ends_with("/stream")));
    if rate_limited {
        out.push(("429", "rate_limited (with Retry-After)"));
    }
    if op.contains_key("requestBody") {
        out.push(("400", "malformed_json"));
        out.push(("413", "payload_too_large"));
        out.push(("415", "unsupported_media_type"));
        out.push(("422", "validation_failed (pointers into the body)"));
    }
    if path.contains('{') {
        out.push(("404", "not_found"));
    }
    if path.starts_with("/widget/v1/") {
        out.push(("403", "origin_not_allowed"));
    }
    if path.starts_with("/api/v1/") || path.starts_with("/widget/v1/") {
        out.push((
            "503",
            "store_unavailable: the store cannot be reached just now (with Retry-After)",
        ));
        // Query strings are checked too (limit, cursor, status filters).
        if op
            .get("parameters")
            .and_then(Value::as_array)
            .is_some_and(|p| p.iter().any(|x| x["in"] == "query"))
        {
            out.push(("422", "validation_failed (a query parameter)"));
        }
    }
    out
}

fn complete_operation(path: &str, method: &str, op: &mut Value) {
    let Some(o) = op.as_object_mut() else {
        return;
    };
    let extra = common_errors(path, method, o);
    let responses = o
        .entry("responses")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    let Some(responses) = responses else {
        return;
    };
    for (status, description) in extra {
        responses
            .entry(status)
            .or_insert_with(|| json!({"description": description}));
    }
    for (status, r) in responses.iter_mut() {
        let error = status.starts_with('4') || status.starts_with('5');
        if error && r.get("content").is_none() {
            let d = r["description"].as_str().unwrap_or("").to_string();
            *r = problem(&d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_refs_become_component_refs() {
        let mut s = serde_json::Map::new();
        file_schemas(&mut s);
        assert_eq!(
            s["NewMessage"]["properties"]["blocks"]["$ref"],
            "#/components/schemas/Blocks"
        );
        assert_eq!(
            s["Blocks"]["items"]["$ref"],
            "#/components/schemas/Blocks_block"
        );
        assert!(s.contains_key("MessageBlock_form"));
        assert_eq!(
            s["MessageBlock_actions"]["properties"]["elements"]["items"]["$ref"],
            "#/components/schemas/Blocks_button"
        );
    }
}
