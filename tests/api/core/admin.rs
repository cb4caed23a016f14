//! §1 Admin: chatbots.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::{NOWHERE, expect_field_error, is_id, is_timestamp, json_of, patch, problem};
use crate::helpers::{ADMIN_TOKEN, Receiver, spawn_app, spawn_app_with, verify_signature};

fn assert_secret(s: &str) {
    let b64 = s.strip_prefix("whsec_").expect("whsec_ prefix");
    let key = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("standard base64");
    assert_eq!(key.len(), 32, "32 random bytes");
}

store_test! {
async fn create_chatbot_answers_201_with_credentials_shown_once() {
    let app = spawn_app().await;
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "Support", "webhook_url": "https://93.184.215.14/hook"}),
        )
        .await;
    let v = json_of(r, 201).await;
    assert!(is_id(v["id"].as_str().unwrap(), "cb"), "{v}");
    assert_eq!(v["name"], "Support");
    assert_eq!(v["webhook_url"], "https://93.184.215.14/hook");
    assert_eq!(v["retention"], "90d", "default retention");
    assert!(v["api_key"].as_str().unwrap().starts_with("sk_"), "{v}");
    assert_secret(v["signing_secret"].as_str().unwrap());
    assert!(is_timestamp(v["created_at"].as_str().unwrap()), "{v}");

    let got = json_of(
        app.get(
            &format!("/api/v1/chatbots/{}", v["id"].as_str().unwrap()),
            ADMIN_TOKEN,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(got["id"], v["id"]);
    assert_eq!(got["name"], "Support");
    assert_eq!(got["retention"], "90d");
    assert!(
        got.get("api_key").is_none(),
        "api_key only at creation: {got}"
    );

    let other = app.create_bot(NOWHERE).await;
    assert_ne!(other.api_key, v["api_key"].as_str().unwrap());
    assert_ne!(other.signing_secret, v["signing_secret"].as_str().unwrap());
}
}

store_test! {
async fn create_chatbot_keeps_a_given_retention_and_checks_the_body() {
    let app = spawn_app().await;
    let v = json_of(
        app.post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "B", "webhook_url": "https://93.184.215.14/h", "retention": "30d"}),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(v["retention"], "30d");

    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"webhook_url": "https://93.184.215.14/h", "colour": "red"}),
        )
        .await;
    let errs = expect_field_error(r, "/name", "required").await;
    assert!(
        errs.contains(&("/colour".into(), "unknown_field".into())),
        "{errs:?}"
    );

    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "B", "webhook_url": "https://93.184.215.14/h", "retention": "soon"}),
        )
        .await;
    expect_field_error(r, "/retention", "invalid_duration").await;
}
}

store_test! {
async fn admin_routes_refuse_a_missing_or_wrong_token_with_401() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let body = json!({"name": "x", "webhook_url": "https://93.184.215.14/h"});
    let no_token = app
        .client
        .post(app.url("/api/v1/chatbots"))
        .json(&body)
        .send()
        .await
        .unwrap();
    problem(no_token, 401, "unauthorized").await;
    let wrong = app.post("/api/v1/chatbots", "adm_wrong", &body).await;
    problem(wrong, 401, "unauthorized").await;
    let bot_key = app.post("/api/v1/chatbots", &bot.api_key, &body).await;
    problem(bot_key, 401, "unauthorized").await;
    let get = app
        .get(&format!("/api/v1/chatbots/{}", bot.id), "adm_wrong")
        .await;
    problem(get, 401, "unauthorized").await;
    let rotate = app
        .post(
            &format!("/api/v1/chatbots/{}/rotate-secret", bot.id),
            &bot.api_key,
            &json!({}),
        )
        .await;
    problem(rotate, 401, "unauthorized").await;
}
}

store_test! {
async fn unknown_chatbot_ids_are_404() {
    let app = spawn_app().await;
    let id = "cb_01KXQ0ZT2REVR88Y42WDNGTN4V";
    problem(
        app.get(&format!("/api/v1/chatbots/{id}"), ADMIN_TOKEN)
            .await,
        404,
        "not_found",
    )
    .await;
    problem(
        patch(
            &app,
            &format!("/api/v1/chatbots/{id}"),
            ADMIN_TOKEN,
            &json!({"name": "x"}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
    problem(
        app.post(
            &format!("/api/v1/chatbots/{id}/rotate-secret"),
            ADMIN_TOKEN,
            &json!({}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
}
}

store_test! {
async fn patch_changes_name_webhook_url_and_retention() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let path = format!("/api/v1/chatbots/{}", bot.id);
    let v = json_of(
        patch(
            &app,
            &path,
            ADMIN_TOKEN,
            &json!({"name": "Renamed", "webhook_url": "https://93.184.215.15/new", "retention": "7d"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(v["id"], bot.id.as_str());
    assert_eq!(v["name"], "Renamed");
    assert_eq!(v["webhook_url"], "https://93.184.215.15/new");
    assert_eq!(v["retention"], "7d");
    let got = json_of(app.get(&path, ADMIN_TOKEN).await, 200).await;
    assert_eq!(
        (got["name"].clone(), got["retention"].clone()),
        (json!("Renamed"), json!("7d"))
    );

    let only_name = json_of(
        patch(&app, &path, ADMIN_TOKEN, &json!({"name": "Again"})).await,
        200,
    )
    .await;
    assert_eq!(
        only_name["webhook_url"], "https://93.184.215.15/new",
        "untouched keys stay"
    );

    expect_field_error(
        patch(&app, &path, ADMIN_TOKEN, &json!({"retention": 0})).await,
        "/retention",
        "too_small",
    )
    .await;
}
}

store_test! {
async fn rotate_secret_issues_a_new_secret_and_both_sign_for_a_while() {
    let mut rx = Receiver::start().await;
    let app = spawn_app().await;
    let bot = app.create_bot(&rx.url).await;
    let v = json_of(
        app.post(
            &format!("/api/v1/chatbots/{}/rotate-secret", bot.id),
            ADMIN_TOKEN,
            &json!({}),
        )
        .await,
        200,
    )
    .await;
    let new_secret = v["signing_secret"].as_str().unwrap().to_string();
    assert_secret(&new_secret);
    assert_ne!(new_secret, bot.signing_secret);
    assert_eq!(v.as_object().unwrap().len(), 1, "only the secret: {v}");

    let conv = app.create_conv(&bot).await;
    app.post(
        &format!("/widget/v1/conversations/{}/messages", conv.id),
        &conv.token,
        &json!({"text": "hello"}),
    )
    .await;
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert!(
        verify_signature(&new_secret, &got[0]),
        "signed by the new secret"
    );
    assert!(
        verify_signature(&bot.signing_secret, &got[0]),
        "and by the old one"
    );
    assert_eq!(
        got[0]
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        2,
        "two signatures, space-separated"
    );
}
}

store_test! {
async fn private_webhook_urls_are_refused_without_allow_private_webhooks() {
    let app = spawn_app_with(|c| c.allow_private_webhooks = false).await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest",
        "http://[::1]/hook",
    ] {
        let r = app
            .post(
                "/api/v1/chatbots",
                ADMIN_TOKEN,
                &json!({"name": "x", "webhook_url": url}),
            )
            .await;
        expect_field_error(r, "/webhook_url", "private_address").await;
    }
    let ok = json_of(
        app.post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "x", "webhook_url": "https://93.184.215.14/hook"}),
        )
        .await,
        201,
    )
    .await;
    let path = format!("/api/v1/chatbots/{}", ok["id"].as_str().unwrap());
    let r = patch(
        &app,
        &path,
        ADMIN_TOKEN,
        &json!({"webhook_url": "http://127.0.0.1:8080/x"}),
    )
    .await;
    expect_field_error(r, "/webhook_url", "private_address").await;
    let unchanged: Value = json_of(app.get(&path, ADMIN_TOKEN).await, 200).await;
    assert_eq!(unchanged["webhook_url"], "https://93.184.215.14/hook");
}
}
