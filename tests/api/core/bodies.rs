//! §0: a request body is checked key by key before it is read into its
//! typed form. One 422 names every bad key with its pointer, nested keys
//! included, and nothing of the request is applied.

use serde_json::json;

use super::{NOWHERE, field_errors, json_of, patch, problem};
use crate::helpers::{ADMIN_TOKEN, spawn_app};

fn has(errs: &[(String, String)], field: &str, code: &str) -> bool {
    errs.contains(&(field.to_string(), code.to_string()))
}

/// Asserts that the 422 `v` names every `(field, code)` of `expected`.
fn names_all(v: &serde_json::Value, expected: &[(&str, &str)]) {
    let errs = field_errors(v);
    for (field, code) in expected {
        assert!(has(&errs, field, code), "{field} {code} in {errs:?}");
    }
}

store_test! {
async fn one_422_names_every_bad_key_and_nothing_is_applied() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;

    // A takeover whose member is wrong in two ways, with a key it does not take.
    let takeover = format!("/api/v1/conversations/{}/takeover", conv.id);
    let v = problem(
        app.post(
            &takeover,
            &bot.api_key,
            &json!({"member": {"id": " ", "nick": "Ann"}, "reason": "x"}),
        )
        .await,
        422,
        "validation_failed",
    )
    .await;
    names_all(
        &v,
        &[
            ("/reason", "unknown_field"),
            ("/member/nick", "unknown_field"),
            ("/member/id", "required"),
        ],
    );
    let v = problem(
        app.post(&takeover, &bot.api_key, &json!({"member": "Ann"})).await,
        422,
        "validation_failed",
    )
    .await;
    names_all(&v, &[("/member", "invalid_type")]);
    // Nothing was taken over: the buttons still answer a click.
    let mid = msg["id"].as_str().unwrap();
    let r = app
        .post(
            &format!("/widget/v1/messages/{mid}/clicks"),
            &conv.token,
            &json!({"block_id": "b1", "action_id": "approve"}),
        )
        .await;
    json_of(r, 200).await;

    // A visitor's new conversation: a blank name and an unknown key.
    let v = problem(
        app.post(
            &format!("/widget/v1/chatbots/{}/conversations", bot.id),
            "",
            &json!({"display_name": "  ", "colour": "red"}),
        )
        .await,
        422,
        "validation_failed",
    )
    .await;
    names_all(
        &v,
        &[("/display_name", "required"), ("/colour", "unknown_field")],
    );

    // A chatbot change with four bad keys changes nothing.
    let path = format!("/api/v1/chatbots/{}", bot.id);
    let v = problem(
        patch(
            &app,
            &path,
            ADMIN_TOKEN,
            &json!({"name": "", "endpoint_disabled": "yes", "retention": "0s", "x": 1}),
        )
        .await,
        422,
        "validation_failed",
    )
    .await;
    names_all(
        &v,
        &[
            ("/name", "required"),
            ("/endpoint_disabled", "invalid_type"),
            ("/retention", "too_small"),
            ("/x", "unknown_field"),
        ],
    );
    let after = json_of(app.get(&path, ADMIN_TOKEN).await, 200).await;
    assert_eq!(after["name"], bot.json["name"], "{after}");

    // An ask: shape problems and option problems in one answer, no question asked.
    let count = |v: serde_json::Value| v["data"].as_array().map(Vec::len);
    let before = count(json_of(app.get("/api/v1/interactions", &bot.api_key).await, 200).await);
    let v = problem(
        app.post(
            &format!("/api/v1/conversations/{}/ask", conv.id),
            &bot.api_key,
            &json!({"message": null, "title": 5, "wait": "no",
                    "options": [{"id": "a", "label": 3}, {"label": "B"}]}),
        )
        .await,
        422,
        "validation_failed",
    )
    .await;
    names_all(
        &v,
        &[
            ("/message", "required"),
            ("/title", "invalid_type"),
            ("/wait", "invalid_type"),
            ("/options/0/label", "invalid_type"),
            ("/options/1/id", "required"),
        ],
    );
    let after = count(json_of(app.get("/api/v1/interactions", &bot.api_key).await, 200).await);
    assert_eq!(after, before);
}
}
