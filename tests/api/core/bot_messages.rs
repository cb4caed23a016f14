//! §3 Bot messages: block defaults and definition checks with pointers.

use serde_json::{Value, json};

use super::{NOWHERE, field_errors, is_id, is_timestamp, problem, widget_messages};
use crate::helpers::spawn_app;

fn open_state() -> Value {
    json!({"disabled": false, "reason": null, "chosen_action_id": null})
}

store_test! {
async fn a_bot_message_fills_in_block_defaults() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app
        .bot_message(
            &bot,
            &conv,
            json!({"text": "Pick", "blocks": [
                {"type": "actions", "elements": [
                    {"type": "button", "action_id": "plain", "label": "Plain"},
                    {"type": "button", "action_id": "valued", "label": "Valued", "value": "v1"},
                    {"type": "button", "action_id": "link", "label": "Docs", "url": "https://example.com/docs"}]},
                {"type": "form", "fields": [{"name": "n", "type": "text", "label": "N"}]}]}),
        )
        .await;
    assert!(is_id(m["id"].as_str().unwrap(), "m"), "{m}");
    assert_eq!(m["conversation_id"], conv.id.as_str());
    assert_eq!(m["author"]["kind"], "bot");
    assert_eq!(m["text"], "Pick");
    assert_eq!(
        m["metadata"],
        json!({}),
        "metadata defaults to an empty object"
    );
    assert!(is_timestamp(m["created_at"].as_str().unwrap()));
    assert!(is_timestamp(m["updated_at"].as_str().unwrap()));

    let actions = &m["blocks"][0];
    assert!(
        is_id(actions["block_id"].as_str().unwrap(), "blk"),
        "{actions}"
    );
    assert_eq!(actions["disable_on_click"], true);
    assert_eq!(actions["state"], open_state());
    assert_eq!(actions["elements"][0]["value"], "", "neither value nor url");
    assert_eq!(actions["elements"][1]["value"], "v1");
    assert_eq!(actions["elements"][2]["url"], "https://example.com/docs");
    assert!(
        actions["elements"][2]["value"].is_null(),
        "a link button has no value: {actions}"
    );

    let form = &m["blocks"][1];
    assert!(is_id(form["block_id"].as_str().unwrap(), "blk"), "{form}");
    let form_id = form["form_id"].as_str().unwrap();
    assert!(!form_id.is_empty());
    assert_ne!(form["block_id"], actions["block_id"]);
    assert_eq!(form["disable_on_submit"], true);
    assert_eq!(form["state"], open_state());

    let listed = widget_messages(&app, &conv).await;
    assert_eq!(listed[0]["blocks"], m["blocks"], "stored as answered");
}
}

fn button(id: &str) -> Value {
    json!({"type": "button", "action_id": id, "label": "L", "value": "v"})
}

fn field(name: &str) -> Value {
    json!({"name": name, "type": "text", "label": "L"})
}

fn actions(elements: Vec<Value>) -> Value {
    json!({"type": "actions", "elements": elements})
}

fn form(fields: Vec<Value>) -> Value {
    json!({"type": "form", "fields": fields})
}

fn blocks(b: Vec<Value>) -> Value {
    json!({"text": "t", "blocks": b})
}

/// `(case, body, pointer, code)`: every definition error the contract names.
fn bad_definitions() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let long = "x".repeat(81);
    vec![
        (
            "duplicate action_id: the later one is named",
            blocks(vec![actions(vec![button("a"), button("b"), button("a")])]),
            "/blocks/0/elements/2/action_id",
            "duplicate",
        ),
        (
            "duplicate action_id across blocks",
            blocks(vec![actions(vec![button("a")]), actions(vec![button("a")])]),
            "/blocks/1/elements/0/action_id",
            "duplicate",
        ),
        (
            "duplicate field name",
            blocks(vec![form(vec![field("a"), field("b"), field("a")])]),
            "/blocks/0/fields/2/name",
            "duplicate",
        ),
        (
            "min greater than max points at max",
            blocks(vec![form(vec![
                json!({"name": "n", "type": "number", "label": "N", "min": 10, "max": 1}),
            ])]),
            "/blocks/0/fields/0/max",
            "min_greater_than_max",
        ),
        (
            "options on a non-select field",
            blocks(vec![form(vec![
                json!({"name": "n", "type": "text", "label": "N", "options": [{"value": "a", "label": "A"}]}),
            ])]),
            "/blocks/0/fields/0/options",
            "not_allowed",
        ),
        (
            "a button with both value and url: the url is named",
            blocks(vec![actions(vec![
                json!({"type": "button", "action_id": "a", "label": "A", "value": "v", "url": "https://example.com"}),
            ])]),
            "/blocks/0/elements/0/url",
            "value_and_url",
        ),
        (
            "unknown key on a button",
            blocks(vec![actions(vec![
                json!({"type": "button", "action_id": "a", "label": "A", "colour": "red"}),
            ])]),
            "/blocks/0/elements/0/colour",
            "unknown_field",
        ),
        (
            "unknown key on a field",
            blocks(vec![form(vec![
                json!({"name": "n", "type": "text", "label": "N", "size": 3}),
            ])]),
            "/blocks/0/fields/0/size",
            "unknown_field",
        ),
        (
            "unknown top-level key",
            json!({"text": "t", "buttons": []}),
            "/buttons",
            "unknown_field",
        ),
        (
            "unknown block type",
            blocks(vec![json!({"type": "carousel", "elements": []})]),
            "/blocks/0/type",
            "invalid_value",
        ),
        (
            "too many buttons",
            blocks(vec![actions(
                (0..11).map(|i| button(&format!("b{i}"))).collect(),
            )]),
            "/blocks/0/elements",
            "too_many",
        ),
        (
            "too many fields",
            blocks(vec![form(
                (0..21).map(|i| field(&format!("f{i}"))).collect(),
            )]),
            "/blocks/0/fields",
            "too_many",
        ),
        (
            "too many blocks",
            blocks(
                (0..11)
                    .map(|i| actions(vec![button(&format!("b{i}"))]))
                    .collect(),
            ),
            "/blocks",
            "too_many",
        ),
        (
            "an empty group",
            blocks(vec![actions(vec![])]),
            "/blocks/0/elements",
            "too_few",
        ),
        (
            "a label over 80 characters",
            blocks(vec![actions(vec![
                json!({"type": "button", "action_id": "a", "label": long}),
            ])]),
            "/blocks/0/elements/0/label",
            "too_long",
        ),
        (
            "an action_id over 64 characters",
            blocks(vec![actions(vec![button(&"a".repeat(65))])]),
            "/blocks/0/elements/0/action_id",
            "too_long",
        ),
        (
            "a text over 4000 characters",
            json!({"text": "x".repeat(4001)}),
            "/text",
            "too_long",
        ),
        (
            "a button without a label",
            blocks(vec![actions(vec![
                json!({"type": "button", "action_id": "a"}),
            ])]),
            "/blocks/0/elements/0/label",
            "required",
        ),
        (
            "neither text nor blocks",
            json!({"metadata": {}}),
            "",
            "required",
        ),
    ]
}

store_test! {
async fn bad_block_definitions_are_422_with_pointers_and_nothing_is_stored() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let path = format!("/api/v1/conversations/{}/messages", conv.id);
    for (case, body, pointer, code) in bad_definitions() {
        let r = app.post(&path, &bot.api_key, &body).await;
        let v = problem(r, 422, "validation_failed").await;
        let errs = field_errors(&v);
        assert!(
            errs.contains(&(pointer.to_string(), code.to_string())),
            "{case}: expected {pointer} {code}, got {errs:?}"
        );
    }
    assert!(
        widget_messages(&app, &conv).await.is_empty(),
        "no refused message was stored"
    );
}
}

store_test! {
async fn every_semantic_error_of_a_message_is_reported_at_once() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let body = blocks(vec![
        actions(vec![
            button("a"),
            json!({"type": "button", "action_id": "a", "label": "A", "value": "v", "url": "https://example.com"}),
        ]),
        form(vec![
            field("x"),
            field("x"),
            json!({"name": "n", "type": "text", "label": "N", "min": 5, "max": 2}),
        ]),
    ]);
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/messages", conv.id),
            &bot.api_key,
            &body,
        )
        .await;
    let mut errs = field_errors(&problem(r, 422, "validation_failed").await);
    errs.sort();
    let mut expected: Vec<(String, String)> = [
        ("/blocks/0/elements/1/action_id", "duplicate"),
        ("/blocks/0/elements/1/url", "value_and_url"),
        ("/blocks/1/fields/1/name", "duplicate"),
        ("/blocks/1/fields/2/max", "min_greater_than_max"),
    ]
    .iter()
    .map(|(f, c)| (f.to_string(), c.to_string()))
    .collect();
    expected.sort();
    assert_eq!(errs, expected);
}
}

store_test! {
async fn the_documented_example_message_is_accepted() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let body: Value =
        serde_json::from_str(include_str!("../../../fixtures/message.json")).expect("fixture");
    let m = app.bot_message(&bot, &conv, body.clone()).await;
    assert_eq!(m["metadata"], body["metadata"]);
    assert_eq!(m["blocks"][0]["block_id"], "callback_offer");
    assert_eq!(m["blocks"][1]["form_id"], "callback");
    assert_eq!(
        m["blocks"][1]["fields"].as_array().unwrap().len(),
        body["blocks"][1]["fields"].as_array().unwrap().len()
    );
}
}
