//! What a reviewer works with (§3): a signed `webhook.test` event through
//! the pipeline, bulk redelivery, the log's `type`/`event_id` filters, the
//! request headers each attempt sent, and the admin's view of chatbots.

use std::time::Duration;

use serde_json::{Value, json};

use super::signatures::reference_verifies;
use super::{click_ok, conversation_with_click, reusable_buttons};
use crate::helpers::{ADMIN_TOKEN, Answer, Receiver, spawn_app, spawn_app_with};

const WEBHOOK_TEST_KEYS: &[&str] = &[
    "api_version",
    "block_kit_version",
    "chatbot_id",
    "delivery_attempt",
    "event",
    "event_id",
    "sent_at",
    "type",
];

async fn json_of(r: reqwest::Response, status: u16) -> Value {
    let got = r.status().as_u16();
    let body = r.text().await.unwrap_or_default();
    assert_eq!(got, status, "{body}");
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

fn fields(problem: &Value) -> Vec<(String, String)> {
    problem["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["field"].as_str().unwrap_or("").to_string(),
                        e["code"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

store_test! {
async fn a_test_event_is_signed_delivered_and_verified_by_the_reference_library() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;

    let v = json_of(app.post("/api/v1/events/test", &bot.api_key, &json!({})).await, 202).await;
    let id = v["event_id"].as_str().expect("event_id").to_string();
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");

    let r = rx.take(1, Duration::from_secs(10)).await.remove(0);
    let body = r.json();
    let mut keys: Vec<&str> = body.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, WEBHOOK_TEST_KEYS, "exactly the keys of §3");
    assert_eq!(body["type"], "webhook.test");
    assert_eq!(body["event"], "webhook.test");
    assert_eq!(body["event_id"], id.as_str());
    assert_eq!(body["chatbot_id"], bot.id.as_str());
    assert_eq!(body["delivery_attempt"], 1);
    assert_eq!(r.header("webhook-id"), Some(id.as_str()));
    assert_eq!(r.header("x-myaichatbot-attempt"), Some("1"));
    assert!(reference_verifies(&bot.signing_secret, &r), "the reference verifier refused it");

    // In the deliveries log like any other event, found by type and by id.
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(5), |e| e["status"] == "succeeded")
        .await;
    assert_eq!(e["status"], "succeeded", "{e}");
    let by_type = json_of(app.get("/api/v1/events?type=webhook.test", &bot.api_key).await, 200).await;
    assert_eq!(by_type["data"].as_array().map(Vec::len), Some(1), "{by_type}");
    // Another chatbot cannot see it.
    let other = app.create_bot(&rx.url).await;
    assert_eq!(app.get(&format!("/api/v1/events/{id}"), &other.api_key).await.status(), 404);
    // No body is fine; a body with a key is not.
    let r = app.client.post(app.url("/api/v1/events/test")).bearer_auth(&bot.api_key).send().await.expect("request");
    assert_eq!(r.status(), 202);
    let p = json_of(app.post("/api/v1/events/test", &bot.api_key, &json!({"x": 1})).await, 422).await;
    assert_eq!(fields(&p), vec![("/x".to_string(), "unknown_field".to_string())]);
    assert_eq!(app.post("/api/v1/events/test", "sk_nope", &json!({})).await.status(), 401);
}
}

store_test! {
async fn each_attempt_keeps_the_request_headers_it_sent() {
    let app = spawn_app().await;
    let mut rx = Receiver::start_with(vec![Answer::status(500)]).await;
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;
    let got = rx.take(2, Duration::from_secs(10)).await;
    let id = got[0].header("webhook-id").expect("webhook-id").to_string();
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(5), |e| {
            e["attempts"].as_array().is_some_and(|a| a.len() == 2)
        })
        .await;
    let attempts = e["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{e}");
    for (a, r) in attempts.iter().zip(&got) {
        let h = &a["request_headers"];
        for name in ["content-type", "webhook-id", "webhook-timestamp", "webhook-signature", "x-myaichatbot-attempt", "content-length"] {
            assert_eq!(h[name].as_str(), r.header(name), "{name} as sent: {h}");
        }
    }
    assert_eq!(attempts[1]["request_headers"]["x-myaichatbot-attempt"], "2");
    // An attempt that sent nothing has no headers.
    let refused = app.create_bot("http://127.0.0.1:9/hook").await;
    conversation_with_click(&app, &refused).await;
    let first = app.events(&refused).await.remove(0);
    let fid = first["event_id"].as_str().expect("id").to_string();
    let e = app
        .wait_event(&refused, &fid, Duration::from_secs(5), |e| {
            e["attempts"].as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
    // A refused connection still sent a request's headers to the socket
    // (or none, when the connection never opened): never a made-up value.
    let h = &e["attempts"][0]["request_headers"];
    assert!(h.is_null() || h["webhook-id"] == fid.as_str(), "{h}");
}
}

store_test! {
async fn redelivering_every_dead_event_delivers_all_once_the_receiver_is_back() {
    let app = spawn_app_with(|c| c.retry_max_attempts = 1).await;
    let mut rx = Receiver::start().await;
    rx.set_default(Answer::status(503));
    let bot = app.create_bot(&rx.url).await;
    // Six conversations, the first with three clicks (one lane, in order).
    let first = conversation_with_click(&app, &bot).await;
    let mid = reusable_buttons(&app, &bot, &first).await;
    click_ok(&app, &first, &mid).await;
    click_ok(&app, &first, &mid).await;
    for _ in 0..5 {
        conversation_with_click(&app, &bot).await;
    }
    let ids: Vec<String> = app.events(&bot).await.iter().map(|e| e["event_id"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(ids.len(), 8);
    for id in &ids {
        let e = app.wait_event(&bot, id, Duration::from_secs(10), |e| e["status"] == "dead").await;
        assert_eq!(e["status"], "dead", "{e}");
    }
    rx.take(8, Duration::from_secs(5)).await;

    // Nothing failed: a redelivery of failed events counts none.
    let v = json_of(app.post("/api/v1/events/redeliver", &bot.api_key, &json!({"status": "failed"})).await, 202).await;
    assert_eq!(v, json!({"count": 0}));
    // `since` after every event: none.
    let later = "2999-01-01T00:00:00.000Z";
    let v = json_of(app.post("/api/v1/events/redeliver", &bot.api_key, &json!({"status": "dead", "since": later})).await, 202).await;
    assert_eq!(v, json!({"count": 0}));

    rx.set_default(Answer::status(200));
    let v = json_of(app.post("/api/v1/events/redeliver", &bot.api_key, &json!({"status": "dead", "since": "2020-01-01T00:00:00Z"})).await, 202).await;
    assert_eq!(v, json!({"count": 8}));
    let got = rx.take(8, Duration::from_secs(15)).await;
    let mut sent: Vec<String> = got.iter().map(|r| r.header("webhook-id").unwrap_or("").to_string()).collect();
    sent.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(sent, want, "each dead event once");
    for id in &ids {
        let e = app.wait_event(&bot, id, Duration::from_secs(10), |e| e["status"] == "succeeded").await;
        assert_eq!(e["status"], "succeeded", "{e}");
        assert_eq!(e["attempts"].as_array().map(Vec::len), Some(2), "{e}");
    }
    // The lane of the first conversation kept its order.
    let lane: Vec<String> = got
        .iter()
        .filter(|r| r.json()["conversation_id"] == first.id.as_str())
        .map(|r| r.header("webhook-id").unwrap_or("").to_string())
        .collect();
    let mut ordered = lane.clone();
    ordered.sort();
    assert_eq!(lane, ordered, "one conversation's events in the order accepted");
    assert!(rx.next(Duration::from_millis(300)).await.is_none(), "nothing twice");
    let dead = json_of(app.get("/api/v1/events?status=dead", &bot.api_key).await, 200).await;
    assert_eq!(dead["data"], json!([]));
}
}

store_test! {
async fn bulk_redelivery_refuses_bad_bodies_with_pointers() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    for (body, want) in [
        (json!({}), vec![("/status", "required")]),
        (json!({"status": "succeeded"}), vec![("/status", "invalid_value")]),
        (json!({"status": 3}), vec![("/status", "invalid_value")]),
        (json!({"status": "dead", "since": "yesterday"}), vec![("/since", "invalid_timestamp")]),
        (json!({"status": "dead", "since": 12}), vec![("/since", "invalid_type")]),
        (json!({"status": "dead", "extra": true}), vec![("/extra", "unknown_field")]),
    ] {
        let p = json_of(app.post("/api/v1/events/redeliver", &bot.api_key, &body).await, 422).await;
        assert_eq!(p["code"], "validation_failed");
        let want: Vec<(String, String)> = want.iter().map(|(f, c)| (f.to_string(), c.to_string())).collect();
        assert_eq!(fields(&p), want, "{body}");
    }
    assert_eq!(app.post("/api/v1/events/redeliver", "sk_nope", &json!({"status": "dead"})).await.status(), 401);
}
}

store_test! {
async fn the_log_filters_by_type_and_event_id() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = conversation_with_click(&app, &bot).await;
    let r = app
        .post(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token, &json!({"text": "Hello"}))
        .await;
    assert_eq!(r.status(), 201);
    rx.take(2, Duration::from_secs(10)).await;
    let all = app.events(&bot).await;
    assert_eq!(all.len(), 2);
    let clicked = json_of(app.get("/api/v1/events?type=interaction.button_clicked", &bot.api_key).await, 200).await;
    assert_eq!(clicked["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(clicked["data"][0]["type"], "interaction.button_clicked");
    let id = all[1]["event_id"].as_str().expect("id");
    let one = json_of(app.get(&format!("/api/v1/events?event_id={id}"), &bot.api_key).await, 200).await;
    assert_eq!(one["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["data"][0]["event_id"], id);
    let none = json_of(app.get("/api/v1/events?event_id=evt_nothing&status=succeeded", &bot.api_key).await, 200).await;
    assert_eq!(none["data"], json!([]));
    let p = json_of(app.get("/api/v1/events?type=&status=nope", &bot.api_key).await, 422).await;
    let mut f = fields(&p);
    f.sort();
    assert_eq!(f, vec![("/status".to_string(), "invalid_value".to_string()), ("/type".to_string(), "invalid_value".to_string())]);
}
}

store_test! {
async fn the_admin_lists_chatbots_and_acts_for_one_and_a_key_reads_its_own() {
    let app = spawn_app().await;
    let a = app.create_bot("http://127.0.0.1:9/a").await;
    let b = app.create_bot("http://127.0.0.1:9/b").await;
    let c = app.create_bot("http://127.0.0.1:9/c").await;

    let page = json_of(app.get("/api/v1/chatbots?limit=2", ADMIN_TOKEN).await, 200).await;
    let ids: Vec<&str> = page["data"].as_array().expect("data").iter().map(|x| x["id"].as_str().unwrap_or("")).collect();
    assert_eq!(ids, vec![c.id.as_str(), b.id.as_str()], "newest first");
    assert_eq!(page["page"]["has_more"], true);
    assert!(page["data"][0].get("signing_secret").is_none() && page["data"][0].get("api_key").is_none());
    let cursor = page["page"]["next_cursor"].as_str().expect("cursor");
    let rest = json_of(app.get(&format!("/api/v1/chatbots?limit=2&cursor={cursor}"), ADMIN_TOKEN).await, 200).await;
    assert_eq!(rest["data"][0]["id"], a.id.as_str());
    assert_eq!(rest["page"], json!({"has_more": false, "next_cursor": null}));
    assert_eq!(app.get("/api/v1/chatbots", &a.api_key).await.status(), 401);
    let p = json_of(app.get("/api/v1/chatbots?limit=0", ADMIN_TOKEN).await, 422).await;
    assert_eq!(fields(&p), vec![("/limit".to_string(), "out_of_range".to_string())]);
    let p = json_of(app.get("/api/v1/chatbots?cursor=zzz", ADMIN_TOKEN).await, 422).await;
    assert_eq!(fields(&p), vec![("/cursor".to_string(), "invalid_cursor".to_string())]);

    // A key reads its own chatbot, without secrets.
    let own = json_of(app.get("/api/v1/chatbot", &b.api_key).await, 200).await;
    assert_eq!(own["id"], b.id.as_str());
    assert_eq!(own["name"], "Test bot");
    assert_eq!(own["webhook_url"], "http://127.0.0.1:9/b");
    assert!(own.get("signing_secret").is_none());
    assert_eq!(app.get("/api/v1/chatbot", ADMIN_TOKEN).await.status(), 401);

    // The admin acts for a chatbot with Blockhook-Chatbot; a key cannot.
    let as_admin = |id: &str| {
        app.client.get(app.url("/api/v1/chatbot")).bearer_auth(ADMIN_TOKEN).header("Blockhook-Chatbot", id).send()
    };
    let v = json_of(as_admin(&a.id).await.expect("request"), 200).await;
    assert_eq!(v["id"], a.id.as_str());
    assert_eq!(as_admin("cb_01KV9S282REMQ8K9W39QSAEKF4").await.expect("request").status(), 404);
    let r = app.client.get(app.url("/api/v1/events")).bearer_auth(&b.api_key).header("Blockhook-Chatbot", &a.id).send().await.expect("request");
    let v = json_of(r, 200).await;
    assert_eq!(v["data"], json!([]));
    let mine = json_of(app.client.get(app.url("/api/v1/chatbot")).bearer_auth(&b.api_key).header("Blockhook-Chatbot", &a.id).send().await.expect("request"), 200).await;
    assert_eq!(mine["id"], b.id.as_str(), "a key stays its own chatbot's");
}
}

store_test! {
async fn the_inbox_gives_each_interaction_its_visitor_and_the_message_it_answers() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let conv = app.create_conv(&bot).await;
    let path = format!("/widget/v1/conversations/{}/messages", conv.id);
    for text in ["Hi, I was charged twice", "Order 4821, can you refund one?"] {
        let r = app.post(&path, &conv.token, &json!({"text": text})).await;
        assert_eq!(r.status(), 201);
    }
    let m = app.buttons(&bot, &conv, true).await;
    let quiet = app.create_conv(&bot).await;
    app.buttons(&bot, &quiet, true).await;

    let v = json_of(app.get("/api/v1/interactions?status=pending&expand=context", &bot.api_key).await, 200).await;
    let data = v["data"].as_array().expect("data");
    assert_eq!(data.len(), 2);
    let asked = data.iter().find(|i| i["message_id"] == m["id"]).expect("the interaction");
    assert_eq!(asked["context"]["visitor"], conv.visitor);
    assert_eq!(asked["context"]["option_styles"], json!({"approve": "primary"}));
    assert_eq!(asked["context"]["in_reply_to"]["text"], "Order 4821, can you refund one?");
    let other = data.iter().find(|i| i["conversation_id"] == quiet.id.as_str()).expect("other");
    assert_eq!(other["context"]["in_reply_to"], Value::Null, "no visitor message before it");
    assert_eq!(other["context"]["visitor"], quiet.visitor);
    // Without expand, the interaction is as before.
    let plain = json_of(app.get("/api/v1/interactions?status=pending", &bot.api_key).await, 200).await;
    assert!(plain["data"][0].get("context").is_none());
    let p = json_of(app.get("/api/v1/interactions?expand=everything", &bot.api_key).await, 422).await;
    assert_eq!(fields(&p), vec![("/expand".to_string(), "invalid_value".to_string())]);
}
}
