//! `"wait": false` on an ask, and `GET /api/v1/interactions/{id}/answer`.

use serde_json::{Value, json};

use crate::helpers::*;

/// Asks without waiting; returns the interaction id.
pub async fn ask_later(app: &TestApp, bot: &Bot, conv: &Conv, body: Value) -> String {
    let mut body = body;
    body["wait"] = json!(false);
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/ask", conv.id),
            &bot.api_key,
            &body,
        )
        .await;
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 202, "{v}");
    assert_eq!(v.as_object().unwrap().len(), 1, "only the id: {v}");
    v["interaction_id"].as_str().unwrap().to_string()
}

/// `GET …/answer?wait=` with the status and body.
pub async fn answer(app: &TestApp, key: &str, id: &str, wait: &str) -> (u16, Value) {
    let r = app
        .get(
            &format!("/api/v1/interactions/{id}/answer?wait={wait}"),
            key,
        )
        .await;
    (r.status().as_u16(), r.json().await.unwrap())
}

pub async fn last_message(app: &TestApp, conv: &Conv) -> Value {
    let v: Value = app
        .get(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
        )
        .await
        .json()
        .await
        .unwrap();
    v["data"][0].clone()
}

store_test! {
async fn an_ask_without_waiting_stays_pending_and_is_answered_while_a_wait_is_open() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let id = ask_later(&app, &bot, &conv, json!({"message": "Ship it?", "comment": true})).await;

    // No connection holds it: it is still pending, not withdrawn.
    assert_eq!(answer(&app, &bot.api_key, &id, "0").await, (200, json!({"answer": "pending"})));
    assert_eq!(answer(&app, &bot.api_key, &id, "1").await, (200, json!({"answer": "pending"})));
    let i: Value = app.get(&format!("/api/v1/interactions/{id}"), &bot.api_key).await.json().await.unwrap();
    assert_eq!(i["status"], "pending");

    // dialog_pending rules as for a waiting ask.
    let r = app
        .post(&format!("/api/v1/conversations/{}/ask", conv.id), &bot.api_key, &json!({"message": "Again?", "wait": false}))
        .await;
    assert_eq!(r.status(), 409);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "dialog_pending");

    // Bad waits, and other tenants.
    for bad in ["51", "-1", "soon"] {
        let (status, v) = answer(&app, &bot.api_key, &id, bad).await;
        assert_eq!(status, 422, "{bad}");
        assert_eq!(v["errors"][0]["field"], "/wait");
    }
    let other = app.create_bot(&rx.url).await;
    let (status, v) = answer(&app, &other.api_key, &id, "0").await;
    assert_eq!((status, v["code"].as_str()), (404, Some("not_found")));
    let (status, _) = answer(&app, &bot.api_key, "int_00000000000000000000000000", "0").await;
    assert_eq!(status, 404);

    // A wait open while the person answers returns that answer.
    let waiting = {
        let url = app.url(&format!("/api/v1/interactions/{id}/answer?wait=30"));
        let (client, key) = (app.client.clone(), bot.api_key.clone());
        tokio::spawn(async move {
            let r = client.get(url).bearer_auth(key).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    // Give the request time to reach the server; it has not answered.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "the wait is still open");
    let m = last_message(&app, &conv).await;
    let r = app
        .post(
            &format!("/widget/v1/messages/{}/clicks", m["id"].as_str().unwrap()),
            &conv.token,
            &json!({"block_id": "ask", "action_id": "decline", "comment": "not on a Friday"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        waiting.await.unwrap(),
        (200, json!({"answer": "declined", "comment": "not on a Friday"}))
    );
    // And later reads give the same answer at once.
    assert_eq!(
        answer(&app, &bot.api_key, &id, "50").await,
        (200, json!({"answer": "declined", "comment": "not on a Friday"}))
    );
}
}

store_test! {
async fn an_ask_without_waiting_expires_at_its_timeout() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let id = ask_later(
        &app,
        &bot,
        &conv,
        json!({"message": "Pick one", "options": ["a", "b"], "timeout": "5s"}),
    )
    .await;
    assert_eq!(answer(&app, &bot.api_key, &id, "0").await.1, json!({"answer": "pending"}));
    // The wait outlasts the timeout: the answer is `expired`.
    assert_eq!(answer(&app, &bot.api_key, &id, "20").await, (200, json!({"answer": "expired"})));
    let i: Value = app.get(&format!("/api/v1/interactions/{id}"), &bot.api_key).await.json().await.unwrap();
    assert_eq!(i["status"], "expired");
    let m = last_message(&app, &conv).await;
    assert_eq!(m["blocks"][0]["state"]["disabled"], true, "{m}");
    assert_eq!(m["blocks"][0]["state"]["reason"], "expired");
    let r = app.click(&conv, m["id"].as_str().unwrap(), "ask", "a").await;
    assert_eq!(r.status(), 410);
    // The conversation takes a new question.
    ask_later(&app, &bot, &conv, json!({"message": "Next?"})).await;
}
}
