//! §2 Widget: conversations and visitor messages.

use std::time::Duration;

use serde_json::json;

use super::{NOWHERE, events_of, is_id, json_of, problem, widget_messages};
use crate::helpers::{Receiver, spawn_app, verify_signature};

store_test! {
async fn a_conversation_gets_a_visitor_with_a_default_display_name() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let path = format!("/widget/v1/chatbots/{}/conversations", bot.id);
    let v = json_of(app.post(&path, "", &json!({})).await, 201).await;
    assert!(is_id(v["conversation_id"].as_str().unwrap(), "conv"), "{v}");
    assert_eq!(v["visitor"]["kind"], "visitor");
    assert!(is_id(v["visitor"]["id"].as_str().unwrap(), "vs"), "{v}");
    let name = v["visitor"]["display_name"].as_str().unwrap();
    let digits = name.strip_prefix("Visitor ").expect("Visitor NNNN");
    assert!(
        digits.len() == 4 && digits.chars().all(|c| c.is_ascii_digit()),
        "{name}"
    );
    assert!(v["visitor_token"].as_str().unwrap().starts_with("vt_"));

    let named = json_of(
        app.post(&path, "", &json!({"display_name": "Ana"})).await,
        201,
    )
    .await;
    assert_eq!(named["visitor"]["display_name"], "Ana");
    assert_ne!(named["conversation_id"], v["conversation_id"]);
    assert_ne!(named["visitor_token"], v["visitor_token"]);

    let unknown = app
        .post(
            "/widget/v1/chatbots/cb_01KXQ0ZT2REVR88Y42WDNGTN4V/conversations",
            "",
            &json!({}),
        )
        .await;
    problem(unknown, 404, "not_found").await;
}
}

store_test! {
async fn a_visitor_message_is_stored_and_emits_message_received() {
    let mut rx = Receiver::start().await;
    let app = spawn_app().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let r = app
        .post(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
            &json!({"text": "Can someone call me?"}),
        )
        .await;
    let msg = json_of(r, 201).await;
    let mid = msg["id"].as_str().unwrap();
    assert!(is_id(mid, "m"), "{msg}");
    assert_eq!(msg["conversation_id"], conv.id.as_str());
    assert_eq!(msg["author"], conv.visitor);
    assert_eq!(msg["text"], "Can someone call me?");

    let listed = widget_messages(&app, &conv).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], mid);

    let events = events_of(&app, &bot, "message.received").await;
    assert_eq!(events.len(), 1, "one event in the outbox");
    let p = &events[0]["payload"];
    assert_eq!(p["message_id"], mid);
    assert_eq!(p["text"], "Can someone call me?");
    assert_eq!(p["user"], conv.visitor);

    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(got[0].json(), *p, "delivered bytes are the stored payload");
    assert_eq!(got[0].header("webhook-id"), events[0]["event_id"].as_str());
    assert!(verify_signature(&bot.signing_secret, &got[0]));
}
}

store_test! {
async fn a_visitor_message_needs_text() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let path = format!("/widget/v1/conversations/{}/messages", conv.id);
    let v = problem(
        app.post(&path, &conv.token, &json!({"text": "  ", "x": 1}))
            .await,
        422,
        "validation_failed",
    )
    .await;
    let errs = super::super::field_errors(&v);
    assert!(
        errs.contains(&("/text".into(), "required".into())),
        "{errs:?}"
    );
    assert!(
        errs.contains(&("/x".into(), "unknown_field".into())),
        "{errs:?}"
    );
    assert!(app.events(&bot).await.is_empty(), "nothing stored");
    assert!(widget_messages(&app, &conv).await.is_empty());
}
}

store_test! {
async fn message_lists_are_collections_newest_first() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let m = app
            .bot_message(&bot, &conv, json!({"text": format!("m{i}")}))
            .await;
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    let base = format!("/widget/v1/conversations/{}/messages", conv.id);
    let first = json_of(app.get(&format!("{base}?limit=2"), &conv.token).await, 200).await;
    let data: Vec<&str> = first["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(data, vec![ids[2].as_str(), ids[1].as_str()]);
    assert_eq!(first["page"]["has_more"], true);
    let cursor = first["page"]["next_cursor"].as_str().expect("cursor");
    let second = json_of(
        app.get(&format!("{base}?limit=2&cursor={cursor}"), &conv.token)
            .await,
        200,
    )
    .await;
    assert_eq!(second["data"].as_array().unwrap().len(), 1);
    assert_eq!(second["data"][0]["id"], ids[0].as_str());
    assert_eq!(second["page"]["has_more"], false);
    assert!(second["page"]["next_cursor"].is_null());

    let bot_view = json_of(
        app.get(
            &format!("/api/v1/conversations/{}/messages", conv.id),
            &bot.api_key,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(bot_view["data"].as_array().unwrap().len(), 3);
    assert_eq!(bot_view["data"][0]["id"], ids[2].as_str());

    problem(
        app.get(&format!("{base}?limit=0"), &conv.token).await,
        422,
        "validation_failed",
    )
    .await;
    problem(
        app.get(&format!("{base}?limit=101"), &conv.token).await,
        422,
        "validation_failed",
    )
    .await;
}
}
