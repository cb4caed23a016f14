//! The JSON Schemas in `schemas/` and the fixtures in `fixtures/`: every
//! fixture validates against the schema it is named after, the event schemas
//! are strict, and every payload the server emits in a real flow validates
//! against its event's schema with exactly the keys of the contract. The
//! endpoint body schemas (§13) refuse and accept what the server does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jsonschema::{Resource, Validator};
use serde_json::{Value, json};

use crate::helpers::{Receiver, spawn_app, verify_signature};

const BUTTON_CLICKED: &[&str] = &[
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
    "message_metadata",
    "user",
    "clicked_at",
    "response_url",
    "delivery_attempt",
];

const FORM_SUBMITTED: &[&str] = &[
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
    "form_id",
    "values",
    "message_metadata",
    "user",
    "submitted_at",
    "response_url",
    "delivery_attempt",
];

const MESSAGE_RECEIVED: &[&str] = &[
    "api_version",
    "block_kit_version",
    "event",
    "type",
    "event_id",
    "chatbot_id",
    "conversation_id",
    "message_id",
    "user",
    "text",
    "received_at",
    "response_url",
    "delivery_attempt",
];

const WEBHOOK_TEST: &[&str] = &[
    "api_version",
    "block_kit_version",
    "event",
    "type",
    "event_id",
    "chatbot_id",
    "sent_at",
    "delivery_attempt",
];

/// The keys §4 (and §3 for `webhook.test`) fix for each event.
fn contract_keys(event: &str) -> &'static [&'static str] {
    match event {
        "interaction.button_clicked" => BUTTON_CLICKED,
        "interaction.form_submitted" => FORM_SUBMITTED,
        "message.received" => MESSAGE_RECEIVED,
        "webhook.test" => WEBHOOK_TEST,
        other => panic!("no such event {other}"),
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every `*.schema.json` under `schemas/`, by file name.
fn schema_files() -> Vec<(String, Value)> {
    fn visit(dir: &Path, out: &mut Vec<(String, Value)>) {
        for entry in std::fs::read_dir(dir).expect("schemas dir") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                visit(&p, out);
            } else if let Some(name) = p.file_name().and_then(|n| n.to_str())
                && name.ends_with(".schema.json")
            {
                out.push((name.to_string(), read_json(&p)));
            }
        }
    }
    let mut out = Vec::new();
    visit(&root().join("schemas"), &mut out);
    out
}

/// Compiles the schema file `name`, with every schema on disk available by
/// its `$id`, validating formats too.
fn compile(name: &str) -> Validator {
    let files = schema_files();
    let mut opts = jsonschema::options().should_validate_formats(true);
    for (_, v) in &files {
        let id = v["$id"]
            .as_str()
            .expect("every schema has an $id")
            .to_string();
        opts = opts.with_resource(id, Resource::from_contents(v.clone()).expect("resource"));
    }
    let (_, schema) = files
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no schema file {name}"));
    opts.build(schema)
        .unwrap_or_else(|e| panic!("{name} does not compile: {e}"))
}

fn errors(v: &Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

fn fixture(name: &str) -> Value {
    read_json(&root().join("fixtures").join(name))
}

#[test]
fn every_fixture_validates_against_the_schema_it_is_named_after() {
    let mut names: Vec<String> = std::fs::read_dir(root().join("fixtures"))
        .expect("fixtures dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    for required in [
        "interaction.button_clicked.json",
        "interaction.form_submitted.json",
        "message.json",
        "message.received.json",
        "reply.json",
        "webhook.test.json",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "missing fixture {required}"
        );
    }
    for name in &names {
        let stem = name.trim_end_matches(".json");
        let v = compile(&format!("{stem}.schema.json"));
        let instance = fixture(name);
        let errs = errors(&v, &instance);
        assert!(errs.is_empty(), "{name}: {errs:#?}");
        if let Some(event) = instance.get("event").and_then(Value::as_str) {
            let mut keys: Vec<&str> = instance
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort();
            let mut expected = contract_keys(event).to_vec();
            expected.sort();
            assert_eq!(keys, expected, "{name} has exactly the keys of §4");
        }
    }
}

#[test]
fn event_schemas_require_every_key_and_refuse_any_other() {
    for event in [
        "interaction.button_clicked",
        "interaction.form_submitted",
        "message.received",
        "webhook.test",
    ] {
        let schema = &schema_files()
            .into_iter()
            .find(|(n, _)| *n == format!("{event}.schema.json"))
            .expect("event schema")
            .1;
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        required.sort();
        let mut expected = contract_keys(event).to_vec();
        expected.sort();
        assert_eq!(required, expected, "{event}: every key of §4 is required");
        assert_eq!(schema["additionalProperties"], false, "{event}");

        let v = compile(&format!("{event}.schema.json"));
        let good = fixture(&format!("{event}.json"));
        for key in contract_keys(event) {
            let mut bad = good.clone();
            bad.as_object_mut().unwrap().remove(*key);
            assert!(!v.is_valid(&bad), "{event} without {key} must fail");
        }
        let mut extra = good.clone();
        extra["extra"] = json!(1);
        assert!(!v.is_valid(&extra), "{event} with an extra key must fail");

        let at = contract_keys(event)
            .iter()
            .find(|k| k.ends_with("_at"))
            .unwrap();
        for (key, bad_value) in [
            ("event_id", json!("evt_123")),
            ("event_id", json!("evt_01KXQ0ZT2REVR88Y42WDNGTN4U")), // U is not Crockford
            ("chatbot_id", json!("conv_01KXQ0ZT2REVR88Y42WDNGTN4V")),
            (*at, json!("2026-07-17T03:12:44Z")),
            (*at, json!("2026-07-17T03:12:44.120+02:00")),
            ("delivery_attempt", json!(2)),
            ("api_version", json!("2025-01-01")),
            ("type", json!("interaction.other")),
            (
                "user",
                json!({"kind": "bot", "id": "x", "display_name": "x"}),
            ),
        ] {
            let mut bad = good.clone();
            bad[key] = bad_value.clone();
            assert!(
                !v.is_valid(&bad),
                "{event} with {key} = {bad_value} must fail"
            );
        }
    }
}

/// Checks a payload the server sent: its schema, and exactly the §4 keys.
pub fn check_payload(p: &Value) {
    let event = p["type"].as_str().expect("type");
    assert_eq!(p["event"], p["type"]);
    let v = compile(&format!("{event}.schema.json"));
    let errs = errors(&v, p);
    assert!(errs.is_empty(), "{event} payload: {errs:#?}\n{p}");
    let mut keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    let mut expected = contract_keys(event).to_vec();
    expected.sort();
    assert_eq!(keys, expected, "{event} has exactly the keys of §4");
}

#[actix_web::test]
async fn every_payload_emitted_in_a_real_flow_validates_against_its_event_schema() {
    let mut rx = Receiver::start().await;
    let app = spawn_app().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;

    let r = app
        .post(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
            &json!({"text": "Hi, can someone call me back?"}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let m = app.bot_message(&bot, &conv, fixture("message.json")).await;
    let mid = m["id"].as_str().unwrap();
    let r = app.click(&conv, mid, "callback_offer", "approve").await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let r = app
        .submit(
            &conv,
            mid,
            "callback",
            json!({"full_name": "Ana Souza", "email": "ana@example.com", "team_size": "25", "consent": "on"}),
        )
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    // No metadata on the message: message_metadata is {}.
    let plain = app
        .bot_message(
            &bot,
            &conv,
            json!({"blocks": [{"type": "actions", "elements": [
                {"type": "button", "action_id": "ok", "label": "OK"}]}]}),
        )
        .await;
    let block = plain["blocks"][0]["block_id"].as_str().unwrap().to_string();
    let r = app
        .click(&conv, plain["id"].as_str().unwrap(), &block, "ok")
        .await;
    assert_eq!(r.status(), 200);

    let got = rx.take(4, Duration::from_secs(15)).await;
    let payloads: Vec<Value> = got.iter().map(|r| r.json()).collect();
    let types: Vec<&str> = payloads
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        vec![
            "message.received",
            "interaction.button_clicked",
            "interaction.form_submitted",
            "interaction.button_clicked"
        ],
        "in the order accepted"
    );
    for (r, p) in got.iter().zip(&payloads) {
        check_payload(p);
        assert!(verify_signature(&bot.signing_secret, r));
        assert_eq!(r.header("webhook-id"), p["event_id"].as_str());
    }
    assert_eq!(
        payloads[2]["values"],
        json!({"full_name": "Ana Souza", "email": "ana@example.com", "team_size": 25,
               "topic": "", "details": "", "consent": true})
    );
    assert_eq!(payloads[3]["value"], "");
    assert_eq!(payloads[3]["message_metadata"], json!({}));

    // The deliveries log holds the same payloads, and they validate too.
    for e in app.events(&bot).await {
        check_payload(&e["payload"]);
    }
}

#[actix_web::test]
async fn a_test_event_as_sent_validates_against_its_schema() {
    let mut rx = Receiver::start().await;
    let app = spawn_app().await;
    let bot = app.create_bot(&rx.url).await;
    let r = app
        .post("/api/v1/events/test", &bot.api_key, &json!({}))
        .await;
    assert_eq!(r.status(), 202);
    let got = rx.take(1, Duration::from_secs(10)).await.remove(0);
    check_payload(&got.json());
    assert!(verify_signature(&bot.signing_secret, &got));
}

/// `fixtures/fields/`: one message per field type of §14 (and a button's
/// `confirm`, a text `pattern`), each valid against `message.schema.json`.
#[test]
fn every_new_field_type_has_a_fixture_that_validates_against_the_message_schema() {
    let dir = root().join("fixtures").join("fields");
    let v = compile("message.schema.json");
    for kind in [
        "radio",
        "multiselect",
        "date",
        "time",
        "url",
        "tel",
        "rating",
        "pattern",
        "confirm",
    ] {
        let instance = read_json(&dir.join(format!("{kind}.json")));
        let errs = errors(&v, &instance);
        assert!(errs.is_empty(), "fields/{kind}.json: {errs:#?}");
        let types: Vec<&str> = instance["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|b| b["fields"].as_array().into_iter().flatten())
            .filter_map(|f| f["type"].as_str())
            .collect();
        if !matches!(kind, "pattern" | "confirm") {
            assert_eq!(types, vec![kind], "fields/{kind}.json shows its type");
        }
    }
    // The schema refuses what §14 forbids.
    for (bad, why) in [
        (
            json!({"name": "d", "type": "date", "label": "D", "min": 5}),
            "a date's bound is a date",
        ),
        (
            json!({"name": "r", "type": "rating", "label": "R", "max": 11}),
            "a rating's max is 2–10",
        ),
        (
            json!({"name": "t", "type": "text", "label": "T", "hint": "x".repeat(301)}),
            "hint ≤ 300",
        ),
        (
            json!({"name": "t", "type": "text", "label": "T", "pattern": "x".repeat(201)}),
            "pattern ≤ 200",
        ),
        (
            json!({"name": "n", "type": "number", "label": "N", "default": "3"}),
            "a number's default is a number",
        ),
    ] {
        let body = json!({"blocks": [{"type": "form", "fields": [bad]}]});
        assert!(!v.is_valid(&body), "{why}");
    }
    let long_confirm = json!({"blocks": [{"type": "actions", "elements": [{"type": "button",
        "action_id": "a", "label": "A", "confirm": {"text": "x".repeat(301)}}]}]});
    assert!(!v.is_valid(&long_confirm), "confirm text ≤ 300");
}

store_test! {
async fn the_endpoint_schemas_and_the_server_agree_on_what_is_a_valid_body() {
    let create = compile("endpoint.create.schema.json");
    let change = compile("endpoint.schema.json");
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let url = "http://127.0.0.1:9/x";
    let many = |n: usize, key: &dyn Fn(usize) -> String, v: Value| {
        Value::Object((0..n).map(|i| (key(i), v.clone())).collect())
    };
    let bodies = vec![
        (json!({"url": url}), true),
        (json!({"url": url, "event_types": null, "filter": null, "rate_limit": null, "headers": null, "description": null}), true),
        (json!({"url": url, "event_types": ["message.received"], "filter": {"user.kind": ["visitor"], "values.n": [1, true, "x"]}}), true),
        (json!({"url": url, "rate_limit": "3/h", "headers": {"X-A": "1"}, "replies": true, "enabled": false}), true),
        (json!({"url": url, "filter": many(10, &|i| format!("message_metadata.k{i}"), json!(["v"]))}), true),
        (json!({"url": url, "headers": many(10, &|i| format!("X-{i}"), json!("v"))}), true),
        (json!({}), false),
        (json!({"url": url, "event_types": ["message.sent"]}), false),
        (json!({"url": url, "event_types": []}), false),
        (json!({"url": url, "filter": {"nope": ["x"]}}), false),
        (json!({"url": url, "filter": {"user.email": ["x"]}}), false),
        (json!({"url": url, "filter": {"action_id": []}}), false),
        (json!({"url": url, "filter": {"action_id": [{"a": 1}]}}), false),
        (json!({"url": url, "filter": many(11, &|i| format!("values.k{i}"), json!(["v"]))}), false),
        (json!({"url": url, "headers": {"Content-Type": "x"}}), false),
        (json!({"url": url, "headers": {"WEBHOOK-ID": "x"}}), false),
        (json!({"url": url, "headers": {"te": "x"}}), false),
        (json!({"url": url, "headers": {"X A": "x"}}), false),
        (json!({"url": url, "headers": {"X-A": "line\nbreak"}}), false),
        (json!({"url": url, "headers": many(11, &|i| format!("X-{i}"), json!("v"))}), false),
        (json!({"url": url, "rate_limit": "5/day"}), false),
        (json!({"url": url, "rate_limit": "0/s"}), false),
        (json!({"url": url, "replies": "yes"}), false),
        (json!({"url": url, "signing_secret": "whsec_x"}), false),
    ];
    for (body, valid) in bodies {
        assert_eq!(errors(&create, &body).is_empty(), valid, "schema: {body}");
        let r = app.post("/api/v1/endpoints", &bot.api_key, &body).await;
        assert_eq!(r.status().as_u16(), if valid { 201 } else { 422 }, "server: {body}");
        // The change schema is the same without `url` required.
        let mut patch = body.clone();
        if let Some(o) = patch.as_object_mut() {
            o.remove("url");
        }
        let patch_valid = valid || body == json!({});
        assert_eq!(errors(&change, &patch).is_empty(), patch_valid, "change schema: {patch}");
    }
}
}
