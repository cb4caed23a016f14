//! Created, listed, read, changed and deleted; another chatbot's key sees
//! none of it; a delete takes the endpoint's unsent deliveries with it.

use reqwest::Method;
use serde_json::{Value, json};

use super::{call, count, create, default_id, json_with, list, sql};
use crate::core::{NOWHERE, is_id, is_timestamp, problem};
use crate::helpers::spawn_app;

store_test! {
async fn an_endpoint_is_created_listed_read_changed_and_deleted() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let made = create(
        &app,
        &bot,
        json!({
            "url": "http://127.0.0.1:9/crm", "description": "CRM",
            "event_types": ["interaction.form_submitted", "message.received"],
            "filter": {"values.topic": ["billing", 3, true], "form_id": ["callback"]},
            "rate_limit": "10/min", "headers": {"X-Api-Key": "k1", "Authorization": "Bearer t"}
        }),
    )
    .await;
    let id = made["id"].as_str().expect("id").to_string();
    assert!(is_id(&id, "ep"), "{id}");
    let secret = made["signing_secret"].as_str().expect("secret");
    assert!(secret.starts_with("whsec_") && secret.len() > 40, "{secret}");
    assert_ne!(secret, bot.signing_secret, "its own secret");
    assert_eq!(made["default"], false);
    assert_eq!(made["replies"], false, "replies default to false off the default");
    assert_eq!((made["enabled"].clone(), made["disabled_reason"].clone()), (json!(true), Value::Null));
    assert!(is_timestamp(made["created_at"].as_str().unwrap_or("")), "{made}");
    // The filter and the headers keep the order they were given in.
    let keys: Vec<&String> = made["filter"].as_object().expect("filter").keys().collect();
    assert_eq!(keys, ["values.topic", "form_id"]);
    assert_eq!(made["filter"]["values.topic"], json!(["billing", 3, true]));
    assert_eq!(made["headers"], json!({"X-Api-Key": "k1", "Authorization": "Bearer t"}));
    assert_eq!(made["rate_limit"], "10/min");

    // Listed after the default; read alone; the secret never again.
    let all = list(&app, &bot).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["id"], default_id(&bot));
    assert_eq!(all[1]["id"], id.as_str());
    let path = format!("/api/v1/endpoints/{id}");
    let got = json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await;
    let mut expected = made.clone();
    expected.as_object_mut().expect("object").remove("signing_secret");
    assert_eq!(got, expected);
    assert!(all.iter().all(|e| e.get("signing_secret").is_none()));

    // Changed: what the body names, nothing else; null resets.
    let patched = json_with(
        call(&app, &bot, Method::PATCH, &path,
             Some(&json!({"description": "CRM (EU)", "filter": null, "enabled": false, "replies": true}))).await,
        200,
    )
    .await;
    assert_eq!(patched["description"], "CRM (EU)");
    assert_eq!(patched["filter"], Value::Null);
    assert_eq!(patched["event_types"], made["event_types"]);
    assert_eq!(patched["headers"], made["headers"]);
    assert_eq!((patched["enabled"].clone(), patched["disabled_reason"].clone()), (json!(false), json!("paused")));
    assert_eq!(patched["replies"], true);
    assert_eq!(json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await, patched);
    let resumed = json_with(call(&app, &bot, Method::PATCH, &path, Some(&json!({"enabled": true}))).await, 200).await;
    assert_eq!((resumed["enabled"].clone(), resumed["disabled_reason"].clone()), (json!(true), Value::Null));

    // Deleted: gone from the list, 404 after.
    let r = call(&app, &bot, Method::DELETE, &path, None).await;
    assert_eq!(r.status(), 204);
    assert_eq!(list(&app, &bot).await.len(), 1);
    problem(call(&app, &bot, Method::GET, &path, None).await, 404, "not_found").await;
    problem(call(&app, &bot, Method::DELETE, &path, None).await, 404, "not_found").await;
}
}

store_test! {
async fn the_list_pages_in_creation_order_after_the_default() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let mut ids = vec![default_id(&bot)];
    for i in 0..4 {
        let e = create(&app, &bot, json!({"url": format!("http://127.0.0.1:9/{i}")})).await;
        ids.push(e["id"].as_str().expect("id").to_string());
    }
    let mut seen = Vec::new();
    let mut path = "/api/v1/endpoints?limit=2".to_string();
    loop {
        let v = json_with(call(&app, &bot, Method::GET, &path, None).await, 200).await;
        seen.extend(v["data"].as_array().expect("data").iter().map(|e| e["id"].as_str().expect("id").to_string()));
        match v["page"]["next_cursor"].as_str() {
            Some(c) => {
                assert_eq!(v["page"]["has_more"], true);
                path = format!("/api/v1/endpoints?limit=2&cursor={c}");
            }
            None => break,
        }
    }
    assert_eq!(seen, ids);
}
}

store_test! {
async fn another_chatbots_key_gets_404_for_every_route() {
    let app = spawn_app().await;
    let owner = app.create_bot(NOWHERE).await;
    let other = app.create_bot(NOWHERE).await;
    let e = create(&app, &owner, json!({"url": "http://127.0.0.1:9/a", "description": "mine"})).await;
    for id in [e["id"].as_str().expect("id").to_string(), default_id(&owner), "ep_unknown".into()] {
        let path = format!("/api/v1/endpoints/{id}");
        problem(call(&app, &other, Method::GET, &path, None).await, 404, "not_found").await;
        problem(call(&app, &other, Method::PATCH, &path, Some(&json!({"description": "theirs"}))).await, 404, "not_found").await;
        problem(call(&app, &other, Method::DELETE, &path, None).await, 404, "not_found").await;
        problem(call(&app, &other, Method::POST, &format!("{path}/rotate-secret"), Some(&json!({}))).await, 404, "not_found").await;
    }
    // Nothing of the owner's changed, and the other lists only its own.
    let mine = list(&app, &owner).await;
    assert_eq!(mine.len(), 2);
    assert_eq!(mine[1]["description"], "mine");
    assert_eq!(mine[0]["url"], NOWHERE);
    let theirs = list(&app, &other).await;
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0]["id"], default_id(&other));
    // Without a key: 401.
    let r = app.client.get(app.url("/api/v1/endpoints")).send().await.expect("request");
    problem(r, 401, "unauthorized").await;
}
}

store_test! {
async fn deleting_an_endpoint_drops_its_deliveries_that_have_not_succeeded() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let gone = create(&app, &bot, json!({"url": "http://127.0.0.1:9/a"})).await;
    let kept = create(&app, &bot, json!({"url": "http://127.0.0.1:9/b"})).await;
    let (gone, kept) = (gone["id"].as_str().expect("id"), kept["id"].as_str().expect("id"));
    // The rows routing writes (part two of §13), one of each status per endpoint.
    let mut rows = Vec::new();
    let mut seq = 100;
    for ep in [gone, kept] {
        for status in ["pending", "failed", "dead", "succeeded"] {
            seq += 1;
            rows.push(format!(
                "INSERT INTO deliveries (seq, event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at)
                 VALUES ({seq}, {seq}, 'evt_{seq}', '{ep}', '{}', 'conv_1', '{status}', 0, 0)",
                bot.id
            ));
            rows.push(format!(
                "INSERT INTO delivery_attempts (delivery_seq, number, event_id, endpoint_id, at, status_code, duration_ms)
                 VALUES ({seq}, 1, 'evt_{seq}', '{ep}', 0, 500, 3)"
            ));
        }
    }
    sql(&app, &rows).await;
    let of = |ep: &str, what: &str| format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{ep}' {what}");
    assert_eq!(count(&app, &of(gone, "")).await, 4);

    let r = call(&app, &bot, Method::DELETE, &format!("/api/v1/endpoints/{gone}"), None).await;
    assert_eq!(r.status(), 204);
    assert_eq!(count(&app, &of(gone, "")).await, 1, "only the succeeded delivery is kept");
    assert_eq!(count(&app, &of(gone, "AND status = 'succeeded'")).await, 1);
    assert_eq!(
        count(&app, &format!("SELECT count(*) FROM delivery_attempts WHERE endpoint_id = '{gone}'")).await,
        1,
        "the attempts of the dropped deliveries go with them"
    );
    assert_eq!(count(&app, &of(kept, "")).await, 4, "another endpoint's are untouched");
    assert_eq!(
        count(&app, &format!("SELECT count(*) FROM delivery_attempts WHERE endpoint_id = '{kept}'")).await,
        4
    );
}
}
