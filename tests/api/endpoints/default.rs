//! The default endpoint is the chatbot's `webhook_url`: listed first, never
//! deleted, edited by either route, paused and re-enabled like the others.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{call, create, default_id, json_with, list, sql};
use crate::core::{NOWHERE, problem};
use crate::delivery::{conversation_with_click, get_bot, patch_bot, webhook_id};
use crate::helpers::{Answer, Receiver, spawn_app};

store_test! {
async fn the_default_endpoint_is_listed_first_and_never_deleted() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    create(&app, &bot, json!({"url": "http://127.0.0.1:9/a"})).await;
    let all = list(&app, &bot).await;
    let d = &all[0];
    assert_eq!(d["id"], default_id(&bot));
    assert_eq!(d["default"], true);
    assert_eq!(d["url"], NOWHERE);
    assert_eq!(d["replies"], true, "replies default to true on the default");
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(true), Value::Null));
    assert_eq!((d["event_types"].clone(), d["filter"].clone()), (Value::Null, Value::Null));
    assert_eq!((d["headers"].clone(), d["description"].clone()), (json!({}), json!("")));
    assert_eq!(d["created_at"], bot.json["created_at"]);
    assert!(d.get("signing_secret").is_none());
    assert_eq!(all[1]["default"], false);

    let path = format!("/api/v1/endpoints/{}", default_id(&bot));
    problem(call(&app, &bot, Method::DELETE, &path, None).await, 409, "default_endpoint").await;
    assert_eq!(list(&app, &bot).await[0]["id"], default_id(&bot));
    assert_eq!(json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await, *d);
}
}

store_test! {
async fn the_default_endpoint_and_the_chatbots_webhook_url_are_one() {
    let app = spawn_app().await;
    let mut first = Receiver::start().await;
    let mut second = Receiver::start().await;
    let bot = app.create_bot(&first.url).await;
    let path = format!("/api/v1/endpoints/{}", default_id(&bot));

    // Edited as an endpoint: the chatbot's webhook_url, and deliveries go there.
    let d = json_with(
        call(&app, &bot, Method::PATCH, &path,
             Some(&json!({"url": second.url, "description": "main", "headers": {"X-Team": "support"}}))).await,
        200,
    )
    .await;
    assert_eq!((d["url"].clone(), d["description"].clone()), (json!(second.url), json!("main")));
    assert_eq!(get_bot(&app, &bot).await["webhook_url"], second.url.as_str());
    let own = json_with(app.get("/api/v1/chatbot", &bot.api_key).await, 200).await;
    assert_eq!(own["webhook_url"], second.url.as_str());
    conversation_with_click(&app, &bot).await;
    assert!(second.next(Duration::from_secs(5)).await.is_some(), "delivered to the new url");
    assert!(first.next(Duration::from_millis(300)).await.is_none());

    // Edited as the chatbot: the default endpoint follows, its settings kept.
    patch_bot(&app, &bot, json!({"webhook_url": first.url})).await;
    let d = json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await;
    assert_eq!(d["url"], first.url.as_str());
    assert_eq!(d["description"], "main");
    assert_eq!(d["headers"], json!({"X-Team": "support"}));
    assert_eq!(list(&app, &bot).await[0], d);
}
}

store_test! {
async fn pausing_the_default_endpoint_holds_its_deliveries_until_enabled() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let path = format!("/api/v1/endpoints/{}", default_id(&bot));
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"enabled": false}))).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(false), json!("paused")));
    assert_eq!(get_bot(&app, &bot).await["endpoint_disabled"], true);
    conversation_with_click(&app, &bot).await;
    assert!(rx.next(Duration::from_millis(800)).await.is_none(), "a paused endpoint gets nothing");
    assert_eq!(app.events(&bot).await[0]["status"], "pending");
    assert_eq!(json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await["disabled_reason"], "paused");

    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"enabled": true}))).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(true), Value::Null));
    assert!(rx.next(Duration::from_secs(5)).await.is_some(), "the held delivery goes out");
}
}

store_test! {
async fn a_gone_default_endpoint_is_enabled_again_by_a_new_url_or_enabled_true() {
    let app = spawn_app().await;
    let mut rx = Receiver::start_with(vec![Answer::status(410)]).await;
    let bot = app.create_bot(&rx.url).await;
    let path = format!("/api/v1/endpoints/{}", default_id(&bot));
    // A pause ended through the chatbot's own route is over for good: the
    // 410 below reads `gone`, not the old `paused`.
    call(&app, &bot, Method::PATCH, &path, Some(&json!({"enabled": false}))).await;
    patch_bot(&app, &bot, json!({"endpoint_disabled": false})).await;
    let d = json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(true), Value::Null));
    conversation_with_click(&app, &bot).await;
    let first = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut d = json!({});
    while tokio::time::Instant::now() < deadline {
        d = json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await;
        if d["enabled"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(false), json!("gone")), "{d}");

    // Enabled in place: the waiting delivery (the 410 one) goes out.
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"enabled": true}))).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(true), Value::Null));
    let again = rx.take(1, Duration::from_secs(5)).await.remove(0);
    assert_eq!(webhook_id(&again), webhook_id(&first));

    // Gone again, then a new url ends it.
    rx.push(Answer::status(410));
    conversation_with_click(&app, &bot).await;
    rx.take(1, Duration::from_secs(5)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < deadline
        && get_bot(&app, &bot).await["endpoint_disabled"] != true
    {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut other = Receiver::start().await;
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"url": other.url}))).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(true), Value::Null));
    assert!(other.next(Duration::from_secs(5)).await.is_some());
}
}

store_test! {
async fn a_gone_endpoint_is_enabled_again_by_a_new_url_or_enabled_true() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let e = create(&app, &bot, json!({"url": "http://127.0.0.1:9/a"})).await;
    let id = e["id"].as_str().expect("id").to_string();
    let path = format!("/api/v1/endpoints/{id}");
    // A 410 as part two's delivery records it.
    let mark_gone = format!("UPDATE endpoints SET enabled = 0, disabled_reason = 'gone' WHERE id = '{id}'");
    sql(&app, std::slice::from_ref(&mark_gone)).await;
    let d = json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(false), json!("gone")));
    // Another change leaves it gone; the same url too.
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"description": "x", "url": "http://127.0.0.1:9/a"}))).await, 200).await;
    assert_eq!(d["disabled_reason"], "gone");
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"url": "http://127.0.0.1:9/b"}))).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(true), Value::Null));

    sql(&app, std::slice::from_ref(&mark_gone)).await;
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"enabled": true}))).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(true), Value::Null));
    // A paused endpoint is not resumed by a new url.
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"enabled": false}))).await, 200).await;
    assert_eq!(d["disabled_reason"], "paused");
    let d = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"url": "http://127.0.0.1:9/c"}))).await, 200).await;
    assert_eq!((d["enabled"].clone(), d["disabled_reason"].clone()), (json!(false), json!("paused")));
}
}
