//! Ask-and-wait (§7): the shapes of a question, its bad requests, its
//! expiry and its withdrawal when the asker leaves.

use super::*;

/// Starts an ask in the background; returns its answer when it comes.
fn ask(
    app: &TestApp,
    bot: &Bot,
    conv: &Conv,
    body: Value,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let (client, url, key) = (
        app.client.clone(),
        app.url(&format!("/api/v1/conversations/{}/ask", conv.id)),
        bot.api_key.clone(),
    );
    tokio::spawn(async move {
        let r = client
            .post(url)
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(text.trim()).unwrap())
    })
}

async fn ask_message(app: &TestApp, conv: &Conv) -> Value {
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
async fn ask_confirmation_is_answered_by_a_click() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let waiting = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Deploy to prod?", "accept": "Deploy", "decline": "Keep"}),
    );
    let i = wait_pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "confirmation");
    assert_eq!(i["prompt"], "Deploy to prod?");
    let m = ask_message(&app, &conv).await;
    assert_eq!(m["blocks"][0]["elements"][0]["label"], "Deploy");
    // A second ask while this one waits: 409.
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/ask", conv.id),
            &bot.api_key,
            &json!({"message": "Again?"}),
        )
        .await;
    assert_eq!(r.status(), 409);
    assert_eq!(code(&r.json().await.unwrap()), "dialog_pending");

    assert_eq!(
        app.click(&conv, m["id"].as_str().unwrap(), "ask", "accept")
            .await
            .status(),
        200
    );
    let (status, answer) = waiting.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer, json!({"answer": "accepted"}));
    assert_eq!(
        rx.take(1, WAIT).await[0].json()["action_id"],
        "accept",
        "answers flow to the webhook too"
    );
}
}

store_test! {
async fn ask_shapes_choice_multiple_custom_and_comment() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;

    // One option, clicked.
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Where?", "options": ["prod", {"id": "staging", "label": "Staging", "detail": "safe"}]}),
    );
    let i = wait_pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "choice");
    assert_eq!(
        i["payload"]["options"][1],
        json!({"id": "staging", "label": "Staging", "detail": "safe"})
    );
    let m = ask_message(&app, &conv).await;
    app.click(&conv, m["id"].as_str().unwrap(), "ask", "staging")
        .await;
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "chose", "options": ["staging"]})
    );

    // Several options, as a form of checkboxes; at least one ticked.
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Which?", "options": ["a", "b", "c"], "multiple": true}),
    );
    wait_pending(&app, &bot, &conv).await;
    let m = ask_message(&app, &conv).await;
    let mid = m["id"].as_str().unwrap();
    let r = app.submit(&conv, mid, "ask", json!({})).await;
    assert_eq!(r.status(), 422);
    let r = app
        .submit(&conv, mid, "ask", json!({"a": "on", "c": true}))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "chose", "options": ["a", "c"]})
    );

    // Free text.
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Name it", "options": ["x"], "custom": true}),
    );
    wait_pending(&app, &bot, &conv).await;
    let m = ask_message(&app, &conv).await;
    assert_eq!(
        app.submit(
            &conv,
            m["id"].as_str().unwrap(),
            "custom",
            json!({"custom": "blue"})
        )
        .await
        .status(),
        200
    );
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "custom", "text": "blue"})
    );

    // Decline with a comment (approval).
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Ship?", "comment": true}),
    );
    let i = wait_pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "approval");
    let m = ask_message(&app, &conv).await;
    let r = app
        .post(
            &format!("/widget/v1/messages/{}/clicks", m["id"].as_str().unwrap()),
            &conv.token,
            &json!({"block_id": "ask", "action_id": "decline", "comment": "not today"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "declined", "comment": "not today"})
    );
}
}

store_test! {
async fn ask_bad_requests_are_422_with_pointers() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let path = format!("/api/v1/conversations/{}/ask", conv.id);
    for (body, field) in [
        (json!({"message": "x".repeat(601)}), "/message"),
        (json!({"message": "q", "title": "t".repeat(61)}), "/title"),
        (
            json!({"message": "q", "options": ["a"], "multiple": true}),
            "/multiple",
        ),
        (
            json!({"message": "q", "options": ["a"], "accept": "Yes"}),
            "/accept",
        ),
        (json!({"message": "q", "timeout": "1s"}), "/timeout"),
        (json!({"message": "q", "timeout": "2d"}), "/timeout"),
        (
            json!({"message": "q", "options": ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]}),
            "/options",
        ),
    ] {
        let r = app.post(&path, &bot.api_key, &body).await;
        assert_eq!(r.status(), 422, "{body}");
        let p: Value = r.json().await.unwrap();
        assert!(
            p["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == field),
            "{body} → {p}"
        );
    }
}
}

store_test! {
async fn an_unanswered_ask_expires_and_its_buttons_close() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Quick?", "timeout": 5}),
    );
    wait_pending(&app, &bot, &conv).await;
    assert_eq!(w.await.unwrap().1, json!({"answer": "expired"}));
    let m = ask_message(&app, &conv).await;
    assert_eq!(m["blocks"][0]["state"]["reason"], "expired");
    let r = app
        .click(&conv, m["id"].as_str().unwrap(), "ask", "accept")
        .await;
    assert_eq!(r.status(), 410);
    assert_eq!(r.json::<Value>().await.unwrap()["detail"], "expired");
    let v: Value = app
        .get(
            &format!(
                "/api/v1/interactions?status=expired&conversation_id={}",
                conv.id
            ),
            &bot.api_key,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
}
}

store_test! {
async fn a_client_that_leaves_withdraws_its_question() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let w = ask(&app, &bot, &conv, json!({"message": "Still there?"}));
    wait_pending(&app, &bot, &conv).await;
    w.abort();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let m = ask_message(&app, &conv).await;
        if m["blocks"][0]["state"]["reason"] == "withdrawn" {
            let r = app
                .click(&conv, m["id"].as_str().unwrap(), "ask", "accept")
                .await;
            assert_eq!(r.status(), 410);
            assert_eq!(r.json::<Value>().await.unwrap()["detail"], "withdrawn");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "question not withdrawn: {m}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A new question may be asked now.
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Again?", "timeout": 5}),
    );
    wait_pending(&app, &bot, &conv).await;
    w.abort();
}
}
