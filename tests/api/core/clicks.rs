//! §2 Clicks: block state, events, link buttons, 404s, repeated clicks.

use serde_json::{Value, json};

use super::{NOWHERE, events_of, is_id, is_timestamp, json_of, problem, widget_message};
use crate::helpers::spawn_app;

fn ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap().to_string())
        .collect()
}

store_test! {
async fn a_click_answers_200_with_the_used_block_and_queues_one_event() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();

    let r = app.click(&conv, mid, "b1", "approve").await;
    let v = json_of(r, 200).await;
    assert_eq!(v["message"]["id"], mid);
    assert_eq!(
        v["message"]["blocks"][0]["state"],
        json!({"disabled": true, "reason": "used", "chosen_action_id": "approve", "answered_by": "visitor"})
    );
    assert_eq!(
        widget_message(&app, &conv, mid).await["blocks"][0]["state"],
        v["message"]["blocks"][0]["state"],
        "the state is stored"
    );

    let events = events_of(&app, &bot, "interaction.button_clicked").await;
    assert_eq!(events.len(), 1);
    assert!(is_id(events[0]["event_id"].as_str().unwrap(), "evt"));
    let p = &events[0]["payload"];
    assert_eq!(p["event_id"], events[0]["event_id"]);
    assert_eq!(p["chatbot_id"], bot.id.as_str());
    assert_eq!(p["conversation_id"], conv.id.as_str());
    assert_eq!(p["message_id"], mid);
    assert_eq!(p["block_id"], "b1");
    assert_eq!(p["action_id"], "approve");
    assert_eq!(p["value"], "req_991");
    assert_eq!(p["label"], "Approve");
    assert_eq!(p["message_metadata"], json!({"order_id": "4821"}));
    assert_eq!(p["user"], conv.visitor);
    assert!(is_timestamp(p["clicked_at"].as_str().unwrap()));
    assert_eq!(p["delivery_attempt"], 1);
    assert!(
        p["response_url"]
            .as_str()
            .unwrap()
            .starts_with(&app.url("/api/v1/responses/")),
        "{p}"
    );
}
}

store_test! {
async fn a_second_click_on_a_used_group_is_409_and_queues_nothing() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    json_of(app.click(&conv, mid, "b1", "deny").await, 200).await;
    problem(
        app.click(&conv, mid, "b1", "approve").await,
        409,
        "block_disabled",
    )
    .await;
    problem(
        app.click(&conv, mid, "b1", "deny").await,
        409,
        "block_disabled",
    )
    .await;
    let events = events_of(&app, &bot, "interaction.button_clicked").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["payload"]["action_id"], "deny");
    assert_eq!(
        events[0]["payload"]["value"], "",
        "a button without value sends \"\""
    );
    let state = &widget_message(&app, &conv, mid).await["blocks"][0]["state"];
    assert_eq!(
        state["chosen_action_id"], "deny",
        "the first click stays chosen"
    );
}
}

store_test! {
async fn a_link_button_is_422_and_sends_nothing() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    problem(
        app.click(&conv, mid, "b1", "docs").await,
        422,
        "link_button",
    )
    .await;
    assert!(app.events(&bot).await.is_empty());
    let state = &widget_message(&app, &conv, mid).await["blocks"][0]["state"];
    assert_eq!(state["disabled"], false, "the group is still usable");
    json_of(app.click(&conv, mid, "b1", "approve").await, 200).await;
}
}

async fn not_found(r: reqwest::Response) {
    problem(r, 404, "not_found").await;
}

store_test! {
async fn unknown_message_block_or_action_and_another_visitors_message_are_404() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let other = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    let f = super::super::form_message(&app, &bot, &conv, true).await;
    let fid = f["id"].as_str().unwrap();

    let unknown_mid = "m_01KXQ0ZT2REVR88Y42WDNGTN4V";
    not_found(app.click(&conv, unknown_mid, "b1", "approve").await).await;
    not_found(app.click(&conv, mid, "nope", "approve").await).await;
    not_found(app.click(&conv, mid, "b1", "nope").await).await;
    not_found(app.click(&other, mid, "b1", "approve").await).await;
    not_found(app.click(&conv, fid, "fb", "f1").await).await;
    not_found(app.submit(&conv, mid, "b1", json!({})).await).await;
    not_found(
        app.submit(
            &other,
            fid,
            "f1",
            json!({"full_name": "Ana", "email": "a@b.co", "consent": true}),
        )
        .await,
    )
    .await;

    assert!(
        app.events(&bot).await.is_empty(),
        "no event for any of them"
    );
    json_of(app.click(&conv, mid, "b1", "approve").await, 200).await;
}
}

store_test! {
async fn without_disable_on_click_every_click_is_accepted_with_its_own_event() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, false).await;
    let mid = m["id"].as_str().unwrap();
    for action in ["approve", "approve", "deny"] {
        let v = json_of(app.click(&conv, mid, "b1", action).await, 200).await;
        assert_eq!(v["message"]["blocks"][0]["state"]["disabled"], false, "{v}");
    }
    let events = events_of(&app, &bot, "interaction.button_clicked").await;
    assert_eq!(events.len(), 3);
    let mut unique = ids(&events);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 3, "each click has its own event_id");
    let mut actions: Vec<&str> = events
        .iter()
        .map(|e| e["payload"]["action_id"].as_str().unwrap())
        .collect();
    actions.sort();
    assert_eq!(actions, vec!["approve", "approve", "deny"]);
}
}

#[actix_web::test]
async fn a_click_and_its_event_are_in_the_database_file_when_answered() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    json_of(app.click(&conv, mid, "b1", "approve").await, 200).await;

    // A fresh connection to the same SQLite file sees the committed state
    // change and its outbox row together.
    let db = rusqlite::Connection::open_with_flags(
        &app.db_path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the database file");
    let (count, payload): (i64, Vec<u8>) = db
        .query_row(
            "SELECT count(*), max(payload) FROM events WHERE type = 'interaction.button_clicked'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("events");
    assert_eq!(count, 1);
    let p: Value = serde_json::from_slice(&payload).expect("payload json");
    assert_eq!(p["message_id"], mid);
    let doc: String = db
        .query_row("SELECT doc FROM messages WHERE id = ?1", [mid], |r| {
            r.get(0)
        })
        .expect("message");
    let doc: Value = serde_json::from_str(&doc).expect("doc");
    assert_eq!(doc["blocks"][0]["state"]["chosen_action_id"], "approve");
}

store_test! {
async fn a_click_body_is_checked_before_anything_happens() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let path = format!("/widget/v1/messages/{}/clicks", m["id"].as_str().unwrap());
    let cases = [
        (json!({"block_id": "b1"}), "/action_id", "required"),
        (json!({"action_id": "approve"}), "/block_id", "required"),
        (
            json!({"block_id": "b1", "action_id": "approve", "extra": true}),
            "/extra",
            "unknown_field",
        ),
        (
            json!({"block_id": "b1", "action_id": 7}),
            "/action_id",
            "invalid_type",
        ),
        (
            json!({"block_id": "b1", "action_id": "approve", "comment": "why"}),
            "/comment",
            "not_allowed",
        ),
    ];
    for (body, field, code) in cases {
        let r = app.post(&path, &conv.token, &body).await;
        super::super::expect_field_error(r, field, code).await;
    }
    assert!(app.events(&bot).await.is_empty());
    let state = &widget_message(&app, &conv, m["id"].as_str().unwrap()).await["blocks"][0]["state"];
    assert_eq!(state["disabled"], false);
}
}
