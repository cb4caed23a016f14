//! Each endpoint has its own secret, rotated with the 24 h overlap of §1;
//! the default endpoint's is its chatbot's, so rotating either rotates both.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::{call, create, default_id, json_with};
use crate::core::NOWHERE;
use crate::delivery::conversation_with_click;
use crate::helpers::{ADMIN_TOKEN, Receiver, open_store, spawn_app, verify_signature};

const DAY_MS: i64 = 24 * 3600 * 1000;

store_test! {
async fn a_rotated_endpoint_secret_keeps_the_old_one_for_a_day() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let e = create(&app, &bot, json!({"url": "http://127.0.0.1:9/a"})).await;
    let id = e["id"].as_str().expect("id").to_string();
    let old = e["signing_secret"].as_str().expect("secret").to_string();
    let before = chrono::Utc::now().timestamp_millis();
    let v = json_with(
        call(&app, &bot, Method::POST, &format!("/api/v1/endpoints/{id}/rotate-secret"), Some(&json!({}))).await,
        200,
    )
    .await;
    let new = v["signing_secret"].as_str().expect("secret").to_string();
    assert!(new.starts_with("whsec_") && new != old);
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");

    // What delivery will sign with (read as part two reads it).
    let store = open_store(&app).await;
    let all = store.endpoints_of(&bot.id).await.expect("endpoints");
    let ep = all.iter().find(|x| x.id == id).expect("the endpoint");
    assert_eq!(ep.signing_secret, new);
    let (prev, until) = ep.previous_secret.clone().expect("the previous secret");
    assert_eq!(prev, old);
    let after = chrono::Utc::now().timestamp_millis();
    assert!(until >= before + DAY_MS && until <= after + DAY_MS, "{until}");
    assert_eq!(ep.live_secrets(after), [new.as_str(), old.as_str()]);
    assert_eq!(ep.live_secrets(until + 1), [new.as_str()]);
    // Another endpoint's and the chatbot's secrets did not move.
    assert_eq!(all[0].signing_secret, bot.signing_secret);
    assert_eq!(all[0].previous_secret, None);
    let got = json_with(call(&app, &bot, Method::GET, &format!("/api/v1/endpoints/{id}"), None).await, 200).await;
    assert!(got.get("signing_secret").is_none());
}
}

store_test! {
async fn rotating_the_default_endpoint_rotates_the_chatbots_secret_and_back() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let old = bot.signing_secret.clone();
    let v = json_with(
        call(&app, &bot, Method::POST, &format!("/api/v1/endpoints/{}/rotate-secret", default_id(&bot)), Some(&json!({}))).await,
        200,
    )
    .await;
    let new = v["signing_secret"].as_str().expect("secret").to_string();
    assert_ne!(new, old);
    let store = open_store(&app).await;
    let b = store.get_chatbot(&bot.id).await.expect("chatbot");
    assert_eq!(b.signing_secret, new, "the chatbot's secret is the default endpoint's");
    assert_eq!(b.previous_secret.as_ref().map(|p| p.0.as_str()), Some(old.as_str()));

    // For a day, deliveries carry both signatures.
    conversation_with_click(&app, &bot).await;
    let r = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let sig = r.header("webhook-signature").expect("signature");
    assert_eq!(sig.split(' ').count(), 2, "{sig}");
    assert!(verify_signature(&new, &r) && verify_signature(&old, &r));

    // Rotated as the chatbot (§1): the default endpoint's secret follows.
    let r = app
        .post(&format!("/api/v1/chatbots/{}/rotate-secret", bot.id), ADMIN_TOKEN, &json!({}))
        .await;
    let third = json_with(r, 200).await["signing_secret"].as_str().expect("secret").to_string();
    let d = store.endpoints_of(&bot.id).await.expect("endpoints").remove(0);
    assert_eq!(d.id, default_id(&bot));
    assert_eq!(d.signing_secret, third);
    assert_eq!(d.previous_secret.map(|p| p.0), Some(new.clone()));
    conversation_with_click(&app, &bot).await;
    let r = rx.take(1, Duration::from_secs(5)).await.remove(0);
    assert!(verify_signature(&third, &r) && verify_signature(&new, &r));
    assert!(!verify_signature(&old, &r), "the first secret no longer signs");
}
}
