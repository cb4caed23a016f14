//! Every 422 of §13, with its pointer and code, and nothing stored after
//! one.

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::{call, create, default_id, list};
use crate::core::{NOWHERE, field_errors, problem};
use crate::helpers::{spawn_app, spawn_app_with};

/// The `(field, code)` pairs a body gets, with a 422.
async fn refused(r: reqwest::Response) -> Vec<(String, String)> {
    field_errors(&problem(r, 422, "validation_failed").await)
}

fn one(field: &str, code: &str) -> Vec<(String, String)> {
    vec![(field.to_string(), code.to_string())]
}

fn many(n: usize, f: impl Fn(usize) -> (String, Value)) -> Value {
    Value::Object((0..n).map(f).collect::<Map<String, Value>>())
}

store_test! {
async fn every_bad_key_is_refused_with_its_pointer_and_code_and_nothing_is_stored() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let url = "http://127.0.0.1:9/x";
    let cases: Vec<(Value, Vec<(String, String)>)> = vec![
        (json!({}), one("/url", "required")),
        (json!({"url": ""}), one("/url", "required")),
        (json!({"url": 7}), one("/url", "invalid_type")),
        (json!({"url": "not a url"}), one("/url", "invalid_url")),
        (json!({"url": url, "event_types": ["message.received", "message.sent"]}), one("/event_types/1", "unknown_event_type")),
        (json!({"url": url, "event_types": ["webhook.test"]}), one("/event_types/0", "unknown_event_type")),
        (json!({"url": url, "event_types": []}), one("/event_types", "too_short")),
        (json!({"url": url, "filter": {"nope": ["x"]}}), one("/filter/nope", "invalid_filter")),
        (json!({"url": url, "filter": {"values.topic": []}}), one("/filter/values.topic", "invalid_filter")),
        (json!({"url": url, "filter": {"action_id": "approve"}}), one("/filter/action_id", "invalid_filter")),
        (json!({"url": url, "filter": {"action_id": [["a"]]}}), one("/filter/action_id", "invalid_filter")),
        (json!({"url": url, "filter": {"user.kind": vec!["visitor"; 21]}}), one("/filter/user.kind", "invalid_filter")),
        (json!({"url": url, "filter": {"values.a.b": ["x"]}}), one("/filter/values.a.b", "invalid_filter")),
        (json!({"url": url, "filter": many(11, |i| (format!("values.f{i}"), json!(["x"])))}), one("/filter", "invalid_filter")),
        (json!({"url": url, "filter": ["action_id"]}), one("/filter", "invalid_filter")),
        (json!({"url": url, "headers": {"Content-Type": "text/plain"}}), one("/headers/Content-Type", "forbidden_header")),
        (json!({"url": url, "headers": {"webhook-id": "x"}}), one("/headers/webhook-id", "forbidden_header")),
        (json!({"url": url, "headers": {"Host": "x"}}), one("/headers/Host", "forbidden_header")),
        (json!({"url": url, "headers": {"X-Long": "v".repeat(1025)}}), one("/headers/X-Long", "too_long")),
        (json!({"url": url, "headers": many(11, |i| (format!("X-H{i}"), json!("v")))}), one("/headers", "too_many")),
        (json!({"url": url, "rate_limit": "10/day"}), one("/rate_limit", "invalid_rate_limit")),
        (json!({"url": url, "rate_limit": "0/s"}), one("/rate_limit", "invalid_rate_limit")),
        (json!({"url": url, "replies": "yes"}), one("/replies", "invalid_type")),
        (json!({"url": url, "enabled": 0}), one("/enabled", "invalid_type")),
        (json!({"url": url, "description": "d".repeat(501)}), one("/description", "too_long")),
        (json!({"url": url, "signing_secret": "whsec_mine"}), one("/signing_secret", "unknown_field")),
    ];
    for (body, expected) in &cases {
        let r = call(&app, &bot, Method::POST, "/api/v1/endpoints", Some(body)).await;
        assert_eq!(&refused(r).await, expected, "{body}");
    }
    // Every problem of a body at once.
    let r = call(&app, &bot, Method::POST, "/api/v1/endpoints", Some(&json!({
        "url": url, "event_types": ["nope"], "filter": {"x": ["y"]}, "headers": {"Upgrade": "h2c"}
    }))).await;
    assert_eq!(refused(r).await, vec![
        ("/event_types/0".to_string(), "unknown_event_type".to_string()),
        ("/filter/x".to_string(), "invalid_filter".to_string()),
        ("/headers/Upgrade".to_string(), "forbidden_header".to_string()),
    ]);
    assert_eq!(list(&app, &bot).await.len(), 1, "nothing was stored");

    // A refused change leaves the endpoint as it was, the default too.
    let e = create(&app, &bot, json!({"url": url, "description": "before"})).await;
    for id in [e["id"].as_str().expect("id").to_string(), default_id(&bot)] {
        let path = format!("/api/v1/endpoints/{id}");
        let before = list(&app, &bot).await;
        for (body, expected) in cases.iter().skip(1) {
            let mut body = body.clone();
            if body.get("description").is_none() {
                body["description"] = json!("after");
            }
            let r = call(&app, &bot, Method::PATCH, &path, Some(&body)).await;
            assert_eq!(&refused(r).await, expected, "{body}");
        }
        assert_eq!(list(&app, &bot).await, before, "no change was stored");
    }
}
}

store_test! {
async fn a_url_on_a_private_address_is_refused() {
    let app = spawn_app_with(|c| c.allow_private_webhooks = false).await;
    // The chatbot is made while its URL is public; its endpoints are checked.
    let bot = app.create_bot("https://example.com/hook").await;
    for url in ["http://127.0.0.1:8080/hook", "http://10.1.2.3/hook", "http://[::1]/hook"] {
        let r = call(&app, &bot, Method::POST, "/api/v1/endpoints", Some(&json!({"url": url}))).await;
        assert_eq!(refused(r).await, one("/url", "private_address"), "{url}");
        let r = call(&app, &bot, Method::PATCH, &format!("/api/v1/endpoints/{}", default_id(&bot)), Some(&json!({"url": url}))).await;
        assert_eq!(refused(r).await, one("/url", "private_address"), "{url}");
    }
    let all = list(&app, &bot).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["url"], "https://example.com/hook");
}
}

store_test! {
async fn a_body_that_is_not_an_object_is_refused() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let r = call(&app, &bot, Method::POST, "/api/v1/endpoints", Some(&json!(["http://127.0.0.1:9/x"]))).await;
    assert_eq!(refused(r).await, one("", "invalid_type"));
    let r = app
        .client
        .post(app.url("/api/v1/endpoints"))
        .bearer_auth(&bot.api_key)
        .header("content-type", "application/json")
        .body("{\"url\": ")
        .send()
        .await
        .expect("request");
    problem(r, 400, "malformed_json").await;
    assert_eq!(list(&app, &bot).await.len(), 1);
}
}
