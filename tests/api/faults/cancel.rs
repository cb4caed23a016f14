//! `POST /api/v1/interactions/{id}/cancel` and the `interaction_id` of a
//! 409 `dialog_pending` (§15): a question left open can be found and
//! withdrawn.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Receiver, spawn_app};

store_test! {
async fn a_pending_question_is_named_by_dialog_pending_and_withdrawn_by_cancel() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let ask_path = format!("/api/v1/conversations/{}/ask", conv.id);

    // A held ask.
    let client = app.client.clone();
    let url = app.url(&ask_path);
    let key = bot.api_key.clone();
    let held = tokio::spawn(async move {
        let r = client
            .post(url)
            .bearer_auth(key)
            .json(&json!({"message": "Deploy?", "timeout": "10m"}))
            .send()
            .await
            .expect("ask");
        let id = r
            .headers()
            .get("blockhook-interaction-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = r.text().await.expect("answer");
        (id, serde_json::from_str::<Value>(text.trim()).expect("json"))
    });

    // The next ask names the one that waits.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let waiting = loop {
        let v: Value = app
            .get(&format!("/api/v1/interactions?status=pending&conversation_id={}", conv.id), &bot.api_key)
            .await
            .json()
            .await
            .expect("json");
        if let Some(id) = v["data"][0]["id"].as_str() {
            break id.to_string();
        }
        assert!(tokio::time::Instant::now() < deadline, "the first ask never became pending");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let r = app.post(&ask_path, &bot.api_key, &json!({"message": "Again?", "wait": false})).await;
    assert_eq!(r.status(), 409);
    let p: Value = r.json().await.expect("problem");
    assert_eq!(p["code"], "dialog_pending", "{p}");
    let pending_id = p["interaction_id"].as_str().expect("interaction_id named").to_string();
    assert_eq!(pending_id, waiting);
    assert!(pending_id.starts_with("int_"), "{pending_id}");

    // Another chatbot's key, or an unknown id: not found; nothing changes.
    let other = app.create_bot(&rx.url).await;
    let cancel = |id: &str| format!("/api/v1/interactions/{id}/cancel");
    assert_eq!(app.post(&cancel(&pending_id), &other.api_key, &json!({})).await.status(), 404);
    assert_eq!(
        app.post(&cancel("int_00000000000000000000000000"), &bot.api_key, &json!({})).await.status(),
        404
    );
    assert_eq!(app.client.post(app.url(&cancel(&pending_id))).send().await.expect("req").status(), 401);

    let r = app.post(&cancel(&pending_id), &bot.api_key, &json!({})).await;
    assert_eq!(r.status(), 200);
    let i: Value = r.json().await.expect("interaction");
    assert_eq!((i["id"].as_str(), i["status"].as_str()), (Some(pending_id.as_str()), Some("cancelled")));

    // The held ask is told, and knew the id from the start.
    let (header_id, answer) = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("the held ask ends")
        .expect("task");
    assert_eq!(answer, json!({"answer": "withdrawn"}));
    assert_eq!(header_id.as_deref(), Some(pending_id.as_str()));

    // Its block is off with reason withdrawn.
    let msgs: Value = app
        .get(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token)
        .await
        .json()
        .await
        .expect("messages");
    let text = msgs.to_string();
    assert!(text.contains("withdrawn"), "{text}");

    // Not pending any more: 409.
    let r = app.post(&cancel(&pending_id), &bot.api_key, &json!({})).await;
    assert_eq!(r.status(), 409);
    assert_eq!(r.json::<Value>().await.expect("problem")["code"], "interaction_not_pending");

    // The conversation can be asked again.
    let r = app.post(&ask_path, &bot.api_key, &json!({"message": "Now?", "wait": false})).await;
    assert_eq!(r.status(), 202);
}
}
