//! §0 ids and timestamps; §8 health, readiness and the OpenAPI document.

use serde_json::{Value, json};

use super::{NOWHERE, is_id, is_timestamp, json_of};
use crate::helpers::spawn_app;

store_test! {
async fn health_and_readiness_answer_200() {
    let app = spawn_app().await;
    let h = json_of(app.get("/healthz", "").await, 200).await;
    assert_eq!(h["status"], "ok");
    let r = json_of(app.get("/readyz", "").await, 200).await;
    assert_eq!(r["status"], "ready");
}
}

/// `/a/{x}/b` → `/a/{}/b`: parameter names are the server's to choose.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|s| if s.starts_with('{') { "{}" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every path and method of the contract this service serves.
const CONTRACT: &[(&str, &str)] = &[
    ("post", "/api/v1/chatbots"),
    ("get", "/api/v1/chatbots"),
    ("get", "/api/v1/chatbot"),
    ("get", "/api/v1/chatbots/{id}"),
    ("patch", "/api/v1/chatbots/{id}"),
    ("post", "/api/v1/chatbots/{id}/rotate-secret"),
    ("post", "/widget/v1/chatbots/{chatbot_id}/conversations"),
    ("get", "/widget/v1/conversations/{cid}/messages"),
    ("post", "/widget/v1/conversations/{cid}/messages"),
    ("get", "/widget/v1/conversations/{cid}/stream"),
    ("post", "/widget/v1/messages/{mid}/clicks"),
    ("post", "/widget/v1/messages/{mid}/forms/{form_id}"),
    ("post", "/api/v1/conversations/{cid}/messages"),
    ("get", "/api/v1/conversations/{cid}/messages"),
    ("post", "/api/v1/conversations/{cid}/takeover"),
    ("get", "/api/v1/events"),
    ("get", "/api/v1/events/{event_id}"),
    ("post", "/api/v1/events/{event_id}/redeliver"),
    ("post", "/api/v1/events/redeliver"),
    ("post", "/api/v1/events/test"),
    ("post", "/api/v1/endpoints"),
    ("get", "/api/v1/endpoints"),
    ("get", "/api/v1/endpoints/{id}"),
    ("patch", "/api/v1/endpoints/{id}"),
    ("delete", "/api/v1/endpoints/{id}"),
    ("post", "/api/v1/endpoints/{id}/rotate-secret"),
    ("post", "/api/v1/responses/{token}"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
];

store_test! {
async fn the_openapi_document_is_3_1_and_lists_every_contract_path() {
    let app = spawn_app().await;
    let doc = json_of(app.get("/openapi.json", "").await, 200).await;
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    assert_eq!(doc["info"]["title"], "blockhook");
    let paths = doc["paths"].as_object().expect("paths");
    let served: Vec<(String, String)> = paths
        .iter()
        .flat_map(|(p, item)| {
            item.as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .map(move |m| (m.to_string(), shape(p)))
        })
        .collect();
    let missing: Vec<_> = CONTRACT
        .iter()
        .filter(|(m, p)| !served.contains(&(m.to_string(), shape(p))))
        .collect();
    assert!(missing.is_empty(), "not documented: {missing:?}");
}
}

/// Collects every string under a key named like an id or a timestamp.
fn walk<'a>(v: &'a Value, key: &str, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::Object(o) => o.iter().for_each(|(k, x)| walk(x, k, out)),
        Value::Array(a) => a.iter().for_each(|x| walk(x, key, out)),
        Value::String(s) => out.push((key.to_string(), s)),
        _ => {}
    }
}

store_test! {
async fn ids_are_prefixed_time_ordered_and_timestamps_have_milliseconds() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let first = app.bot_message(&bot, &conv, json!({"text": "one"})).await;
    let m = app
        .bot_message(
            &bot,
            &conv,
            json!({"blocks": [{"type": "actions", "elements": [
                {"type": "button", "action_id": "go", "label": "Go"}]}]}),
        )
        .await;
    let block_id = m["blocks"][0]["block_id"].as_str().unwrap().to_string();
    let clicked = json_of(
        app.click(&conv, m["id"].as_str().unwrap(), &block_id, "go")
            .await,
        200,
    )
    .await;
    let event = app.events(&bot).await.remove(0);

    assert!(is_id(&bot.id, "cb"));
    assert!(is_id(&conv.id, "conv"));
    assert!(is_id(conv.visitor["id"].as_str().unwrap(), "vs"));
    assert!(is_id(&block_id, "blk"), "{block_id}");
    assert!(is_id(event["event_id"].as_str().unwrap(), "evt"));
    for msg in [&first, &m] {
        assert!(is_id(msg["id"].as_str().unwrap(), "m"), "{msg}");
    }
    assert!(
        first["id"].as_str().unwrap() < m["id"].as_str().unwrap(),
        "UUIDv7 ids sort by creation time"
    );

    let mut strings = Vec::new();
    for v in [&bot.json, &first, &clicked, &event] {
        walk(v, "", &mut strings);
    }
    let stamps: Vec<_> = strings.iter().filter(|(k, _)| k.ends_with("_at")).collect();
    assert!(stamps.len() >= 6, "{stamps:?}");
    for (k, s) in stamps {
        assert!(is_timestamp(s), "{k}: {s}");
    }
}
}
