//! §2 Form submits: typed values with empty defaults, every validation code,
//! one error per bad field, and nothing stored or sent on failure.

use std::time::Duration;

use serde_json::{Value, json};

use super::{events_of, field_errors, form_message, json_of, problem, widget_message};
use crate::helpers::{Receiver, spawn_app};

const SUBMITTED: &str = "interaction.form_submitted";

store_test! {
async fn a_submit_carries_typed_values_with_empty_defaults() {
    let app = spawn_app().await;
    let bot = app.create_bot(super::super::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = form_message(&app, &bot, &conv, false).await;
    let mid = m["id"].as_str().unwrap();

    // Numbers as numeric strings and checkboxes as "on", as a browser sends.
    let r = app
        .submit(
            &conv,
            mid,
            "f1",
            json!({"full_name": "Ana", "email": "ana@example.com", "team_size": "25",
                   "topic": "sales", "details": "call after 5", "newsletter": "on", "consent": "on"}),
        )
        .await;
    let v = json_of(r, 200).await;
    assert_eq!(v["message"]["blocks"][0]["state"]["disabled"], false);

    // Only what is required; JSON types accepted too.
    let r = app
        .submit(
            &conv,
            mid,
            "f1",
            json!({"full_name": "Bo", "email": "bo@example.org", "consent": true}),
        )
        .await;
    json_of(r, 200).await;
    let r = app
        .submit(
            &conv,
            mid,
            "f1",
            json!({"full_name": "Cy", "email": "cy@example.org", "consent": true, "team_size": 7.5, "topic": ""}),
        )
        .await;
    json_of(r, 200).await;

    let mut events = events_of(&app, &bot, SUBMITTED).await;
    events.reverse(); // the log is newest first
    let values: Vec<&Value> = events.iter().map(|e| &e["payload"]["values"]).collect();
    assert_eq!(
        values,
        vec![
            &json!({"full_name": "Ana", "email": "ana@example.com", "team_size": 25, "topic": "sales",
                    "details": "call after 5", "newsletter": true, "consent": true}),
            &json!({"full_name": "Bo", "email": "bo@example.org", "team_size": null, "topic": "",
                    "details": "", "newsletter": false, "consent": true}),
            &json!({"full_name": "Cy", "email": "cy@example.org", "team_size": 7.5, "topic": "",
                    "details": "", "newsletter": false, "consent": true}),
        ]
    );
    let p = &events[0]["payload"];
    assert_eq!(p["form_id"], "f1");
    assert_eq!(p["action_id"], "f1", "action_id is the form_id");
    assert_eq!(p["block_id"], "fb");
    assert_eq!(p["message_metadata"], json!({"flow": "callback"}));
    assert!(
        p.get("value").is_none() && p.get("clicked_at").is_none(),
        "{p}"
    );
}
}

store_test! {
async fn an_accepted_submit_turns_the_form_off_and_a_second_is_409() {
    let app = spawn_app().await;
    let bot = app.create_bot(super::super::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = form_message(&app, &bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    let ok = json!({"full_name": "Ana", "email": "ana@example.com", "consent": true});
    let v = json_of(app.submit(&conv, mid, "f1", ok.clone()).await, 200).await;
    let state = &v["message"]["blocks"][0]["state"];
    assert_eq!(
        [&state["disabled"], &state["reason"], &state["chosen_action_id"], &state["answered_by"]],
        [&json!(true), &json!("used"), &json!("f1"), &json!("visitor")],
        "{state}"
    );
    // What was sent is kept with the block, for every widget of the
    // conversation to show.
    assert_eq!(state["values"]["full_name"], "Ana", "{state}");
    assert_eq!(state["values"]["email"], "ana@example.com", "{state}");
    assert_eq!(state["values"]["consent"], true, "{state}");
    problem(
        app.submit(&conv, mid, "f1", ok).await,
        409,
        "block_disabled",
    )
    .await;
    assert_eq!(events_of(&app, &bot, SUBMITTED).await.len(), 1);
    problem(
        app.submit(&conv, mid, "nope", json!({})).await,
        404,
        "not_found",
    )
    .await;
}
}

store_test! {
/// What a visitor types is stored and sent as typed, whatever quotes,
/// backslashes or SQL it holds: in the event and in the message's state
/// (PostgreSQL writes a click batch's values into the text of its
/// statements).
async fn quotes_backslashes_and_sql_in_values_come_back_byte_for_byte() {
    let app = spawn_app().await;
    let bot = app.create_bot(super::super::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = form_message(&app, &bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    let name = r"O'Br\ien";
    let details = "it's \\' \\\\x00ff E'\\'' $1 $$ ?; '); DROP TABLE events; --\n\t\"é\" \u{1F600} %s {}[]";
    let sent = json!({"full_name": name, "email": "o'brien@example.com", "details": details, "consent": true});
    let v = json_of(app.submit(&conv, mid, "f1", sent).await, 200).await;
    assert_eq!(v["message"]["blocks"][0]["state"]["values"]["details"], details);

    let events = events_of(&app, &bot, SUBMITTED).await;
    assert_eq!(events.len(), 1);
    let values = &events[0]["payload"]["values"];
    assert_eq!(values["full_name"], name);
    assert_eq!(values["email"], "o'brien@example.com");
    assert_eq!(values["details"], details);
    let stored = widget_message(&app, &conv, mid).await;
    let state = &stored["blocks"][0]["state"];
    assert_eq!(state["values"]["details"], details, "{state}");
    assert_eq!(state["values"]["full_name"], name, "{state}");
    // Nothing else was touched: the form is off, a second submit refused.
    assert_eq!(state["disabled"], true, "{state}");
    problem(
        app.submit(&conv, mid, "f1", json!({"full_name": "Ana", "email": "a@example.com", "consent": true}))
            .await,
        409,
        "block_disabled",
    )
    .await;
}
}

fn sorted(mut v: Vec<(String, String)>) -> Vec<(String, String)> {
    v.sort();
    v
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    sorted(
        p.iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect(),
    )
}

store_test! {
async fn each_bad_field_gets_one_error_and_nothing_is_stored_or_sent() {
    let mut rx = Receiver::start().await;
    let app = spawn_app().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let m = form_message(&app, &bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();

    let cases: Vec<(Value, Vec<(String, String)>)> = vec![
        (
            json!({"full_name": "A much too long name", "email": "not-an-email", "team_size": "many",
                   "topic": "support", "bogus": 1}),
            pairs(&[
                ("/values/full_name", "too_long"),
                ("/values/email", "invalid_email"),
                ("/values/team_size", "not_a_number"),
                ("/values/topic", "invalid_option"),
                ("/values/consent", "required"),
                ("/values/bogus", "unknown_field"),
            ]),
        ),
        (
            json!({"full_name": "A", "email": "a@b.co", "consent": true, "team_size": 0}),
            pairs(&[
                ("/values/full_name", "too_short"),
                ("/values/team_size", "too_small"),
            ]),
        ),
        (
            json!({"full_name": "Ana", "email": "a@b.co", "consent": "on", "team_size": "10001"}),
            pairs(&[("/values/team_size", "too_large")]),
        ),
        (
            json!({"email": "", "consent": false}),
            pairs(&[
                ("/values/full_name", "required"),
                ("/values/email", "required"),
                ("/values/consent", "required"),
            ]),
        ),
    ];
    for (values, expected) in cases {
        let r = app.submit(&conv, mid, "f1", values.clone()).await;
        let v = problem(r, 422, "validation_failed").await;
        assert_eq!(sorted(field_errors(&v)), expected, "for {values}");
    }

    assert!(
        events_of(&app, &bot, SUBMITTED).await.is_empty(),
        "the outbox is unchanged"
    );
    let state = &widget_message(&app, &conv, mid).await["blocks"][0]["state"];
    assert_eq!(state["disabled"], false, "the form is still open");

    // Nothing went to the receiver: the next thing it gets is the valid
    // submit that follows.
    let ok = json!({"full_name": "Ana", "email": "ana@example.com", "consent": true});
    json_of(app.submit(&conv, mid, "f1", ok).await, 200).await;
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(got[0].json()["type"], SUBMITTED);
    assert_eq!(got[0].json()["values"]["full_name"], "Ana");
    assert_eq!(events_of(&app, &bot, SUBMITTED).await.len(), 1);
}
}
