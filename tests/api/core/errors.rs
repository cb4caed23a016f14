//! §0 Errors as `application/problem+json`: 400, 413, 415, 401, and 404
//! across tenants.

use serde_json::json;

use super::{NOWHERE, json_of, post_raw, problem};
use crate::helpers::{ADMIN_TOKEN, Bot, Conv, TestApp, spawn_app};

store_test! {
async fn malformed_json_is_400() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let click = format!("/widget/v1/messages/{}/clicks", m["id"].as_str().unwrap());
    let r = post_raw(
        &app,
        &click,
        &conv.token,
        "application/json",
        "{\"block_id\": ",
    )
    .await;
    problem(r, 400, "malformed_json").await;
    let r = post_raw(
        &app,
        &format!("/api/v1/conversations/{}/messages", conv.id),
        &bot.api_key,
        "application/json",
        "{not json}",
    )
    .await;
    problem(r, 400, "malformed_json").await;
    let r = post_raw(
        &app,
        "/api/v1/chatbots",
        ADMIN_TOKEN,
        "application/json",
        "[1,",
    )
    .await;
    problem(r, 400, "malformed_json").await;
    assert!(app.events(&bot).await.is_empty());
}
}

store_test! {
async fn a_wrong_content_type_is_415() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let r = post_raw(
        &app,
        &format!("/widget/v1/conversations/{}/messages", conv.id),
        &conv.token,
        "text/plain",
        "{\"text\": \"hi\"}",
    )
    .await;
    problem(r, 415, "unsupported_media_type").await;
    let r = post_raw(
        &app,
        "/api/v1/chatbots",
        ADMIN_TOKEN,
        "application/x-www-form-urlencoded",
        "name=x",
    )
    .await;
    problem(r, 415, "unsupported_media_type").await;
}
}

store_test! {
async fn bodies_over_the_limit_are_413_64_kib_on_the_widget_1_mib_elsewhere() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let big = json!({"text": "x".repeat(70 * 1024)}).to_string();
    let r = post_raw(
        &app,
        &format!("/widget/v1/conversations/{}/messages", conv.id),
        &conv.token,
        "application/json",
        big.clone(),
    )
    .await;
    problem(r, 413, "payload_too_large").await;

    // The same body is within the limit of the bot API (and then too long a text).
    let r = post_raw(
        &app,
        &format!("/api/v1/conversations/{}/messages", conv.id),
        &bot.api_key,
        "application/json",
        big,
    )
    .await;
    problem(r, 422, "validation_failed").await;

    let huge = json!({"text": "x".repeat(1024 * 1024 + 1)}).to_string();
    let r = post_raw(
        &app,
        &format!("/api/v1/conversations/{}/messages", conv.id),
        &bot.api_key,
        "application/json",
        huge,
    )
    .await;
    problem(r, 413, "payload_too_large").await;
    assert!(app.events(&bot).await.is_empty());
}
}

store_test! {
async fn missing_or_invalid_credentials_are_401() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    let bot_path = format!("/api/v1/conversations/{}/messages", conv.id);
    let widget_path = format!("/widget/v1/conversations/{}/messages", conv.id);

    let none = app.client.get(app.url(&bot_path)).send().await.unwrap();
    problem(none, 401, "unauthorized").await;
    problem(
        app.get(&bot_path, "sk_not_a_key").await,
        401,
        "unauthorized",
    )
    .await;
    problem(app.get(&bot_path, &conv.token).await, 401, "unauthorized").await;
    problem(app.get(&bot_path, ADMIN_TOKEN).await, 401, "unauthorized").await;
    problem(app.get("/api/v1/events", "").await, 401, "unauthorized").await;

    problem(
        app.get(&widget_path, "vt_not_a_token").await,
        401,
        "unauthorized",
    )
    .await;
    problem(
        app.get(&widget_path, &bot.api_key).await,
        401,
        "unauthorized",
    )
    .await;
    let no_auth_click = app
        .client
        .post(app.url(&format!("/widget/v1/messages/{mid}/clicks")))
        .json(&json!({"block_id": "b1", "action_id": "approve"}))
        .send()
        .await
        .unwrap();
    problem(no_auth_click, 401, "unauthorized").await;
    let basic = app
        .client
        .get(app.url(&bot_path))
        .header("authorization", format!("Basic {}", bot.api_key))
        .send()
        .await
        .unwrap();
    problem(basic, 401, "unauthorized").await;
    assert!(
        app.events(&bot).await.is_empty(),
        "the unauthenticated click did nothing"
    );
}
}

/// Posts a message with buttons and a visitor's message (one event) in
/// `conv`; the message's id and the event's.
async fn buttons_and_an_event(app: &TestApp, bot: &Bot, conv: &Conv) -> (String, String) {
    let m = app.buttons(bot, conv, true).await;
    app.post(
        &format!("/widget/v1/conversations/{}/messages", conv.id),
        &conv.token,
        &json!({"text": "hi"}),
    )
    .await;
    let event = app.events(bot).await[0]["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    (m["id"].as_str().unwrap().to_string(), event)
}

store_test! {
async fn another_tenants_ids_are_404_never_403() {
    let app = spawn_app().await;
    let a = app.create_bot(NOWHERE).await;
    let b = app.create_bot(NOWHERE).await;
    let conv_a = app.create_conv(&a).await;
    let conv_b = app.create_conv(&b).await;
    let (mid, event_a) = buttons_and_an_event(&app, &a, &conv_a).await;
    let mid = mid.as_str();

    let msgs = format!("/api/v1/conversations/{}/messages", conv_a.id);
    problem(
        app.post(&msgs, &b.api_key, &json!({"text": "x"})).await,
        404,
        "not_found",
    )
    .await;
    problem(app.get(&msgs, &b.api_key).await, 404, "not_found").await;
    problem(
        app.post(
            &format!("/api/v1/conversations/{}/takeover", conv_a.id),
            &b.api_key,
            &json!({}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    problem(
        app.get(&format!("/api/v1/events/{event_a}"), &b.api_key)
            .await,
        404,
        "not_found",
    )
    .await;
    problem(
        app.post(
            &format!("/api/v1/events/{event_a}/redeliver"),
            &b.api_key,
            &json!({}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    assert!(app.events(&b).await.is_empty(), "b sees none of a's events");

    // A visitor of b's conversation cannot reach a's conversation or message.
    problem(
        app.get(
            &format!("/widget/v1/conversations/{}/messages", conv_a.id),
            &conv_b.token,
        )
        .await,
        404,
        "not_found",
    )
    .await;
    problem(
        app.post(
            &format!("/widget/v1/conversations/{}/messages", conv_a.id),
            &conv_b.token,
            &json!({"text": "x"}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    problem(
        app.click(&conv_b, mid, "b1", "approve").await,
        404,
        "not_found",
    )
    .await;

    // The owner still can.
    json_of(app.get(&msgs, &a.api_key).await, 200).await;
    json_of(app.click(&conv_a, mid, "b1", "approve").await, 200).await;
}
}

store_test! {
async fn unknown_routes_are_404_problems() {
    let app = spawn_app().await;
    problem(app.get("/api/v1/nothing-here", "").await, 404, "not_found").await;
}
}

store_test! {
async fn the_bearer_scheme_is_case_insensitive() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = app
            .client
            .get(app.url(&format!("/api/v1/chatbots/{}", bot.id)))
            .header("authorization", format!("{scheme} {ADMIN_TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(json_of(r, 200).await["id"], bot.id.as_str(), "{scheme}");
    }
}
}

store_test! {
async fn ids_of_another_kind_or_ill_formed_are_404_and_change_nothing() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let (mid, event) = buttons_and_an_event(&app, &bot, &conv).await;
    // The event's id with a letter Crockford base32 never uses.
    let altered = format!("{}U", &event[..event.len() - 1]);
    let key = &bot.api_key;

    // A real id of another kind where one kind is meant, an altered one
    // and a lower-cased one.
    for path in [
        format!("/api/v1/events/{}", conv.id),
        format!("/api/v1/events/{mid}"),
        format!("/api/v1/events/{altered}"),
        format!("/api/v1/events/{}", event.to_lowercase()),
        format!("/api/v1/conversations/{mid}/messages"),
        format!("/api/v1/interactions/{event}"),
        format!("/api/v1/endpoints/{}", bot.id),
    ] {
        problem(app.get(&path, key).await, 404, "not_found").await;
    }
    problem(
        app.get(&format!("/api/v1/chatbots/{}", conv.id), ADMIN_TOKEN)
            .await,
        404,
        "not_found",
    )
    .await;
    problem(
        app.post(
            &format!("/api/v1/conversations/{mid}/messages"),
            key,
            &json!({"text": "x"}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    problem(
        app.post(
            &format!("/api/v1/events/{}/redeliver", conv.id),
            key,
            &json!({}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    // A click on the conversation's id as if it were the message's.
    problem(
        app.click(&conv, &conv.id, "b1", "approve").await,
        404,
        "not_found",
    )
    .await;

    // Nothing was stored: one event (the visitor's message), and the
    // buttons still take the click.
    assert_eq!(app.events(&bot).await.len(), 1);
    json_of(app.click(&conv, &mid, "b1", "approve").await, 200).await;
    json_of(app.get(&format!("/api/v1/events/{event}"), key).await, 200).await;
}
}
