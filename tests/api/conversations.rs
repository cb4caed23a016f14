//! `POST/GET /api/v1/conversations` with the chatbot's API key (§16).

use serde_json::{Value, json};

use crate::helpers::{Conv, Receiver, spawn_app};

store_test! {
async fn a_bot_starts_a_conversation_and_links_the_widget_to_it() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let r = app
        .post("/api/v1/conversations", &bot.api_key, &json!({"display_name": "  Ada  "}))
        .await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    let cid = v["conversation_id"].as_str().expect("id");
    assert!(cid.starts_with("conv_"), "{v}");
    assert_eq!(v["visitor"]["display_name"], "Ada", "{v}");
    assert_eq!(v["visitor"]["kind"], "visitor", "{v}");
    let token = v["visitor_token"].as_str().expect("token");
    assert!(token.starts_with("vt_"), "{v}");
    let link = url::Url::parse(v["widget_url"].as_str().expect("widget_url")).expect("url");
    assert_eq!(link.path(), "/widget", "{link}");
    assert!(link.as_str().starts_with(&app.address), "{link}");
    // The token rides in the fragment only.
    let before_fragment = link.as_str().split('#').next().unwrap_or_default();
    assert!(!before_fragment.contains(token), "{link}");
    let frag: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(link.fragment().expect("fragment").as_bytes())
            .into_owned()
            .collect();
    assert_eq!(frag["conversation_id"], cid);
    assert_eq!(frag["visitor_token"], token);
    assert!(link.query_pairs().any(|(k, v)| k == "chatbot" && v == bot.id));
    // The token is the conversation's: the widget reads it with it.
    let r = app
        .get(&format!("/widget/v1/conversations/{cid}/messages"), token)
        .await;
    assert_eq!(r.status(), 200);
    // And the bot can write to it.
    let conv = Conv {
        id: cid.to_string(),
        token: token.to_string(),
        visitor: v["visitor"].clone(),
    };
    app.buttons(&bot, &conv, true).await;

    // Without a body: a generated name.
    let r = app
        .client
        .post(app.url("/api/v1/conversations"))
        .bearer_auth(&bot.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 201, "{:?}", r.text().await);
    let r = app.post("/api/v1/conversations", &bot.api_key, &json!({})).await;
    let v: Value = r.json().await.expect("json");
    assert!(v["visitor"]["display_name"].as_str().is_some_and(|n| n.starts_with("Visitor ")));

    // Bad input and bad credentials.
    let r = app.post("/api/v1/conversations", "sk_nope", &json!({})).await;
    assert_eq!(r.status(), 401);
    let r = app.post("/api/v1/conversations", &conv.token, &json!({})).await;
    assert_eq!(r.status(), 401);
    let r = app
        .post("/api/v1/conversations", &bot.api_key, &json!({"display_name": "x".repeat(81)}))
        .await;
    assert_eq!(r.status(), 422);
    let p: Value = r.json().await.expect("json");
    assert_eq!(p["errors"][0]["field"], "/display_name", "{p}");
    let r = app
        .post("/api/v1/conversations", &bot.api_key, &json!({"nick": "x"}))
        .await;
    assert_eq!(r.status(), 422);
}
}

store_test! {
async fn a_bot_lists_its_conversations_newest_first_with_pages() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let other = app.create_bot(&rx.url).await;
    app.create_conv(&other).await;
    let first = app.create_conv(&bot).await;
    let r = app.post("/api/v1/conversations", &bot.api_key, &json!({})).await;
    let second: Value = r.json().await.expect("json");
    let third = app.create_conv(&bot).await;
    // A question waits in the first; the third has an answered-nothing
    // message too.
    app.buttons(&bot, &first, true).await;
    app.bot_message(&bot, &third, json!({"text": "hi"})).await;

    let r = app.get("/api/v1/conversations?limit=2", &bot.api_key).await;
    assert_eq!(r.status(), 200);
    let page: Value = r.json().await.expect("json");
    let data = page["data"].as_array().expect("data");
    assert_eq!(data.len(), 2, "{page}");
    assert_eq!(data[0]["id"], third.id.as_str(), "{page}");
    assert_eq!(data[1]["id"], second["conversation_id"], "{page}");
    assert_eq!(page["page"]["has_more"], true, "{page}");
    assert_eq!(data[0]["pending_interactions"], 0);
    assert!(data[0]["last_message_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{page}");
    assert_eq!(data[1]["last_message_at"], Value::Null, "{page}");
    assert!(data[1]["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{page}");
    assert_eq!(data[1]["visitor"], second["visitor"], "{page}");
    let cursor = page["page"]["next_cursor"].as_str().expect("cursor");
    let r = app
        .get(&format!("/api/v1/conversations?limit=2&cursor={cursor}"), &bot.api_key)
        .await;
    let page: Value = r.json().await.expect("json");
    let data = page["data"].as_array().expect("data");
    assert_eq!(data.len(), 1, "{page}");
    assert_eq!(data[0]["id"], first.id.as_str(), "{page}");
    assert_eq!(data[0]["pending_interactions"], 1, "{page}");
    assert_eq!(page["page"]["has_more"], false, "{page}");
    assert_eq!(page["page"]["next_cursor"], Value::Null, "{page}");

    for bad in ["limit=0", "limit=101", "cursor=nope"] {
        let r = app.get(&format!("/api/v1/conversations?{bad}"), &bot.api_key).await;
        assert_eq!(r.status(), 422, "{bad}");
    }
    let r = app.get("/api/v1/conversations", "").await;
    assert_eq!(r.status(), 401);
}
}
