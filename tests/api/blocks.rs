//! §14 Richer blocks over real HTTP on both stores: the new field types,
//! `placeholder`/`hint`/`default`/`pattern`, a button's `confirm`; typed
//! values in the event, the inbox's `payload.fields` and the reviewer's
//! answer, and a refused value that leaves nothing stored and sends nothing.

mod generated;

use serde_json::{Value, json};

use crate::core::{expect_field_error, field_errors, problem};
use crate::helpers::*;

const SUBMITTED: &str = "interaction.form_submitted";

/// A form with one field of every §14 type (and a patterned text).
pub fn every_type_form(disable_on_submit: bool) -> Value {
    let opts = json!([{"value": "a", "label": "Alpha"}, {"value": "b", "label": "Beta"}, {"value": "c", "label": "Gamma"}]);
    json!({"text": "Tell us more", "blocks": [{"type": "form", "block_id": "fb", "form_id": "f",
        "disable_on_submit": disable_on_submit, "fields": [
        {"name": "r", "type": "radio", "label": "Radio", "options": opts, "default": "a", "hint": "one"},
        {"name": "m", "type": "multiselect", "label": "Multi", "options": opts, "max": 2, "default": ["b"]},
        {"name": "d", "type": "date", "label": "Day", "min": "2026-01-01", "max": "2026-12-31"},
        {"name": "t", "type": "time", "label": "Time", "min": "09:00", "max": "17:30", "default": "10:00"},
        {"name": "u", "type": "url", "label": "Page", "max": 60, "placeholder": "https://…"},
        {"name": "p", "type": "tel", "label": "Phone"},
        {"name": "s", "type": "rating", "label": "Stars", "max": 5},
        {"name": "o", "type": "text", "label": "Order", "pattern": "ORD-[0-9]{3}"}]}]})
}

async fn events(app: &TestApp, bot: &Bot) -> Vec<Value> {
    app.events(bot)
        .await
        .into_iter()
        .filter(|e| e["type"] == SUBMITTED)
        .collect()
}

async fn respond(app: &TestApp, bot: &Bot, id: &str, key: &str, body: Value) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/api/v1/interactions/{id}/responses")))
        .bearer_auth(&bot.api_key)
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .expect("request")
}

store_test! {
async fn every_new_type_is_stored_shown_and_typed_in_the_event() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.bot_message(&bot, &conv, every_type_form(true)).await;
    let fields = &m["blocks"][0]["fields"];
    assert_eq!(fields[0]["default"], "a");
    assert_eq!(fields[0]["hint"], "one");
    assert_eq!(fields[1]["default"], json!(["b"]));
    assert_eq!(fields[2]["min"], "2026-01-01");
    assert_eq!(fields[4]["placeholder"], "https://…");
    assert_eq!(fields[7]["pattern"], "ORD-[0-9]{3}");
    let mid = m["id"].as_str().unwrap();

    // As the widget sends them: a multiselect as a list, a rating as a
    // numeric string.
    let r = app
        .submit(&conv, mid, "f", json!({"r": "c", "m": ["c", "a"], "d": "2026-07-01", "t": "09:30",
            "u": "https://example.com/help", "p": "+1 (555) 010-9999", "s": "4", "o": "ORD-123"}))
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let e = events(&app, &bot).await;
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0]["payload"]["values"],
        json!({"r": "c", "m": ["a", "c"], "d": "2026-07-01", "t": "09:30",
               "u": "https://example.com/help", "p": "+1 (555) 010-9999", "s": 4, "o": "ORD-123"})
    );
    // The event, with a list, an integer rating, a date and a time among
    // its values, validates against its published schema.
    crate::schemas::check_payload(&e[0]["payload"]);
}
}

store_test! {
async fn omitted_values_are_empty_never_the_default() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.bot_message(&bot, &conv, every_type_form(true)).await;
    let r = app.submit(&conv, m["id"].as_str().unwrap(), "f", json!({"d": "", "s": ""})).await;
    assert_eq!(r.status(), 200);
    let e = events(&app, &bot).await;
    assert_eq!(
        e[0]["payload"]["values"],
        json!({"r": "", "m": [], "d": null, "t": null, "u": "", "p": "", "s": null, "o": ""})
    );
    crate::schemas::check_payload(&e[0]["payload"]);
}
}

store_test! {
async fn bad_values_get_their_codes_and_nothing_is_stored_or_sent() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.bot_message(&bot, &conv, every_type_form(true)).await;
    let mid = m["id"].as_str().unwrap();
    let r = app
        .submit(&conv, mid, "f", json!({"r": "z", "m": ["a", "b", "c"], "d": "2026-02-30", "t": "18:00",
            "u": "javascript:alert(1)", "p": "call me", "s": 6, "o": "ord-123"}))
        .await;
    let v = problem(r, 422, "validation_failed").await;
    let mut errs = field_errors(&v);
    errs.sort();
    let mut want: Vec<(String, String)> = [
        ("/values/r", "invalid_option"),
        ("/values/m", "too_many"),
        ("/values/d", "invalid_date"),
        ("/values/t", "too_late"),
        ("/values/u", "invalid_url"),
        ("/values/p", "invalid_phone"),
        ("/values/s", "too_large"),
        ("/values/o", "pattern_mismatch"),
    ]
    .iter()
    .map(|(f, c)| (f.to_string(), c.to_string()))
    .collect();
    want.sort();
    assert_eq!(errs, want);
    for (values, field, code) in [
        (json!({"d": "2025-12-31"}), "/values/d", "too_early"),
        (json!({"t": "8:00"}), "/values/t", "invalid_time"),
        (json!({"s": "0"}), "/values/s", "too_small"),
        (json!({"s": "four"}), "/values/s", "not_a_number"),
        (json!({"m": ["z"]}), "/values/m", "invalid_option"),
        (json!({"u": format!("https://example.com/{}", "x".repeat(60))}), "/values/u", "too_long"),
    ] {
        expect_field_error(app.submit(&conv, mid, "f", values).await, field, code).await;
    }
    // Nothing sent, the block still open.
    assert!(events(&app, &bot).await.is_empty());
    let msgs: Value = app
        .get(&format!("/api/v1/conversations/{}/messages", conv.id), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    let state = &msgs["data"][0]["blocks"][0]["state"];
    assert_eq!(state["disabled"], false, "{state}");
    assert!(state.get("values").is_none(), "{state}");
}
}

store_test! {
async fn required_means_not_empty_for_every_type() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let mut body = every_type_form(true);
    for f in body["blocks"][0]["fields"].as_array_mut().unwrap() {
        f["required"] = json!(true);
    }
    body["blocks"][0]["fields"][1]["min"] = json!(2);
    // A default must itself be valid: one option is too few now.
    body["blocks"][0]["fields"][1]["default"] = json!(["a", "b"]);
    let m = app.bot_message(&bot, &conv, body).await;
    let mid = m["id"].as_str().unwrap();
    let r = app
        .submit(&conv, mid, "f", json!({"r": "", "m": [], "d": "", "t": "", "u": "", "p": "", "s": "", "o": ""}))
        .await;
    let v = problem(r, 422, "validation_failed").await;
    let errs = field_errors(&v);
    assert_eq!(errs.len(), 8, "{errs:?}");
    assert!(errs.iter().all(|(_, c)| c == "required"), "{errs:?}");
    // A multiselect's min asks for more than one.
    expect_field_error(app.submit(&conv, mid, "f", json!({"m": ["a"]})).await, "/values/m", "too_few").await;
    assert!(events(&app, &bot).await.is_empty());
}
}

store_test! {
async fn definitions_are_checked_with_pointers_before_anything_is_stored() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let path = format!("/api/v1/conversations/{}/messages", conv.id);
    let form = |f: Value| json!({"blocks": [{"type": "form", "fields": [f]}]});
    let opts = json!([{"value": "a", "label": "A"}]);
    for (field, pointer, code) in [
        (json!({"name": "x", "type": "text", "label": "X", "pattern": "(unclosed"}), "/pattern", "invalid_pattern"),
        (json!({"name": "x", "type": "text", "label": "X", "pattern": "\\w{500}{500}"}), "/pattern", "invalid_pattern"),
        (json!({"name": "x", "type": "url", "label": "X", "options": opts}), "/options", "not_allowed"),
        (json!({"name": "x", "type": "radio", "label": "X"}), "/options", "required"),
        (json!({"name": "x", "type": "date", "label": "X", "min": "2026-05-01", "max": "2026-04-01"}), "/max", "min_greater_than_max"),
        (json!({"name": "x", "type": "time", "label": "X", "min": "25:00"}), "/min", "invalid_bound"),
        (json!({"name": "x", "type": "multiselect", "label": "X", "options": opts, "min": 3, "max": 1}), "/max", "min_greater_than_max"),
        (json!({"name": "x", "type": "rating", "label": "X", "default": 7}), "/default", "invalid_default"),
        (json!({"name": "x", "type": "radio", "label": "X", "options": opts, "default": "b"}), "/default", "invalid_default"),
        (json!({"name": "x", "type": "tel", "label": "X", "max": 5}), "/max", "not_allowed"),
    ] {
        let r = app.post(&path, &bot.api_key, &form(field.clone())).await;
        let v = problem(r, 422, "validation_failed").await;
        let errs = field_errors(&v);
        let want = (format!("/blocks/0/fields/0{pointer}"), code.to_string());
        assert!(errs.contains(&want), "{field}: {errs:?}");
    }
    let long = json!({"blocks": [{"type": "actions", "elements": [{"type": "button", "action_id": "a",
        "label": "A", "confirm": {"title": "x".repeat(61), "text": "Sure?"}}]}]});
    let r = app.post(&path, &bot.api_key, &long).await;
    expect_field_error(r, "/blocks/0/elements/0/confirm/title", "too_long").await;
    let msgs: Value = app.get(&path, &bot.api_key).await.json().await.unwrap();
    assert_eq!(msgs["data"], json!([]), "nothing stored");
}
}

store_test! {
async fn a_confirm_is_stored_and_shown_and_the_click_is_unchanged() {
    let mut rx = Receiver::start().await;
    let app = spawn_app().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let body: Value = serde_json::from_str(include_str!("../../fixtures/fields/confirm.json")).unwrap();
    let m = app.bot_message(&bot, &conv, body.clone()).await;
    assert_eq!(m["blocks"][0]["elements"][0]["confirm"], body["blocks"][0]["elements"][0]["confirm"]);
    let shown: Value = app
        .get(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["data"][0]["blocks"][0]["elements"][0]["confirm"]["deny"], "Keep it");
    let r = app.click(&conv, m["id"].as_str().unwrap(), "cancel_sub", "cancel").await;
    assert_eq!(r.status(), 200);
    let got = rx.take(1, std::time::Duration::from_secs(10)).await;
    let p = got[0].json();
    assert_eq!(p["action_id"], "cancel");
    assert_eq!(p["value"], "sub_42");
    assert!(p.get("confirm").is_none());
}
}

store_test! {
async fn every_fixture_of_a_new_type_is_accepted() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fields");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let body: Value = serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        app.bot_message(&bot, &conv, body).await;
        n += 1;
    }
    assert!(n >= 9);
}
}

store_test! {
async fn the_inbox_lists_and_answers_every_new_type() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.bot_message(&bot, &conv, every_type_form(true)).await;
    let list: Value = app
        .get(&format!("/api/v1/interactions?status=pending&conversation_id={}", conv.id), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    let i = &list["data"][0];
    assert_eq!(i["type"], "text");
    assert_eq!(i["payload"]["fields"], m["blocks"][0]["fields"], "payload.fields lists them as defined");
    let id = i["id"].as_str().unwrap();

    // A bad answer: the widget's codes, nothing stored.
    let r = respond(&app, &bot, id, "k1", json!({"type": "text", "values": {"m": ["a", "z"], "s": 9, "d": "tomorrow"}})).await;
    let v = problem(r, 422, "validation_failed").await;
    let mut errs = field_errors(&v);
    errs.sort();
    assert_eq!(errs, vec![
        ("/values/d".to_string(), "invalid_date".to_string()),
        ("/values/m".to_string(), "invalid_option".to_string()),
        ("/values/s".to_string(), "too_large".to_string()),
    ]);
    assert!(events(&app, &bot).await.is_empty());

    let r = respond(&app, &bot, id, "k2", json!({"type": "text", "values": {"r": "b", "m": ["b", "a"],
        "d": "2026-03-04", "t": "17:30", "u": "http://example.com", "p": "030 1234567", "s": 5, "o": "ORD-000"}})).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let e = events(&app, &bot).await;
    assert_eq!(e.len(), 1);
    let p = &e[0]["payload"];
    assert_eq!(p["user"]["kind"], "member");
    assert_eq!(p["values"], json!({"r": "b", "m": ["a", "b"], "d": "2026-03-04", "t": "17:30",
        "u": "http://example.com", "p": "030 1234567", "s": 5, "o": "ORD-000"}));
}
}
