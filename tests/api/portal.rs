//! §17 the customer portal over HTTP: links made with the chatbot's key,
//! their exchange for a session, what a session may see and do (its own
//! chatbot's deliveries only; nothing that changes state when read-only),
//! and the page's framing policy. The page itself in a browser:
//! `pages/portal.rs`.

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Bot, TestApp, open_store, spawn_app};
use blockhook::domain::token::TokenKey;
use blockhook::domain::token::portal::{PortalGrant, PortalKind};

pub async fn link(app: &TestApp, bot: &Bot, body: Value) -> (u16, Value) {
    let r = app.post("/api/v1/portal-links", &bot.api_key, &body).await;
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub fn token_of(url: &str) -> String {
    url.split_once('#')
        .map(|(_, t)| t.to_string())
        .unwrap_or_default()
}

pub async fn session(app: &TestApp, body: Value) -> (u16, Value) {
    let r = app
        .client
        .post(app.url("/api/v1/portal-sessions"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A session of `bot` (read-only or not).
pub async fn session_of(app: &TestApp, bot: &Bot, read_only: bool) -> String {
    let (s, l) = link(app, bot, json!({"read_only": read_only})).await;
    assert_eq!(s, 201, "{l}");
    let (s, v) = session(
        app,
        json!({"token": token_of(l["url"].as_str().expect("url"))}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    v["session"].as_str().expect("session").to_string()
}

async fn call(app: &TestApp, method: reqwest::Method, path: &str, bearer: &str) -> (u16, Value) {
    let mut r = app
        .client
        .request(method.clone(), app.url(path))
        .bearer_auth(bearer);
    if method != reqwest::Method::GET {
        r = r.json(&json!({}));
    }
    let r = r.send().await.expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The server's own token key, read from its store (to make a link that
/// has already expired without waiting for one to).
async fn server_key(app: &TestApp) -> TokenKey {
    let hex = open_store(app)
        .await
        .meta_get_or_init("server_key", String::new())
        .await
        .expect("server key");
    TokenKey::new(&data_encoding::HEXLOWER.decode(hex.as_bytes()).expect("hex"))
}

async fn test_event(app: &TestApp, bearer: &str) -> String {
    let (s, v) = call(app, reqwest::Method::POST, "/api/v1/events/test", bearer).await;
    assert_eq!(s, 202, "{v}");
    v["event_id"].as_str().expect("event_id").to_string()
}

store_test! {
async fn portal_links_are_made_with_the_chatbot_key_and_checked() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let before = chrono::Utc::now();
    let (s, v) = link(&app, &bot, json!({})).await;
    assert_eq!(s, 201, "{v}");
    let url = v["url"].as_str().expect("url");
    assert!(url.starts_with(&format!("{}/portal#pl_", app.address)), "{url}");
    let expires = chrono::DateTime::parse_from_rfc3339(v["expires_at"].as_str().expect("expires_at"))
        .expect("RFC 3339");
    let ttl = expires.signed_duration_since(before).num_seconds();
    assert!((3595..=3605).contains(&ttl), "default ttl 1h, got {ttl}s");
    assert_eq!(v["read_only"], false);

    let (s, v) = link(&app, &bot, json!({"ttl": "7d", "read_only": true})).await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["read_only"], true);
    let (s, _) = link(&app, &bot, json!({"ttl": 60})).await;
    assert_eq!(s, 201);

    for (body, field, code) in [
        (json!({"ttl": "59s"}), "/ttl", "too_small"),
        (json!({"ttl": "8d"}), "/ttl", "too_large"),
        (json!({"ttl": "soon"}), "/ttl", "invalid_duration"),
        (json!({"read_only": "yes"}), "/read_only", "invalid_type"),
        (json!({"scope": "all"}), "/scope", "unknown_field"),
    ] {
        let (s, v) = link(&app, &bot, body.clone()).await;
        assert_eq!(s, 422, "{body}: {v}");
        assert_eq!(v["code"], "validation_failed");
        assert_eq!(v["errors"][0]["field"], field, "{v}");
        assert_eq!(v["errors"][0]["code"], code, "{v}");
    }
    // The key is needed; a portal session is not a key for making links.
    let r = app.client.post(app.url("/api/v1/portal-links")).json(&json!({})).send().await.expect("request");
    assert_eq!(r.status(), 401);
    let s = session_of(&app, &bot, false).await;
    let (status, _) = call(&app, reqwest::Method::POST, "/api/v1/portal-links", &s).await;
    assert_eq!(status, 401);
}
}

store_test! {
async fn a_session_shows_its_chatbot_only_and_a_read_only_one_changes_nothing() {
    let app = spawn_app().await;
    let a = app.create_bot("http://127.0.0.1:9/a").await;
    let b = app.create_bot("http://127.0.0.1:9/b").await;
    let a_event = test_event(&app, &a.api_key).await;
    let b_event = test_event(&app, &b.api_key).await;

    let rw = session_of(&app, &a, false).await;
    let ro = session_of(&app, &a, true).await;
    for s in [&rw, &ro] {
        let (status, v) = call(&app, reqwest::Method::GET, "/api/v1/events", s).await;
        assert_eq!(status, 200, "{v}");
        let ids: Vec<&str> = v["data"].as_array().expect("data").iter().filter_map(|e| e["event_id"].as_str()).collect();
        assert_eq!(ids, vec![a_event.as_str()], "only chatbot A's events");
        let (status, _) = call(&app, reqwest::Method::GET, &format!("/api/v1/events/{a_event}"), s).await;
        assert_eq!(status, 200);
        // Chatbot B's event does not exist for A's session.
        let (status, _) = call(&app, reqwest::Method::GET, &format!("/api/v1/events/{b_event}"), s).await;
        assert_eq!(status, 404);
        let (status, v) = call(&app, reqwest::Method::GET, "/api/v1/chatbot", s).await;
        assert_eq!(status, 200);
        assert_eq!(v["id"], a.id.as_str());
        // Nothing outside the deliveries: conversations, interactions, the admin's routes.
        for path in ["/api/v1/interactions", "/api/v1/chatbots", "/api/v1/conversations", "/api/v1/conversations/conv_x/messages"] {
            let (status, _) = call(&app, reqwest::Method::GET, path, s).await;
            assert_eq!(status, 401, "{path}");
        }
    }
    let (status, _) = call(&app, reqwest::Method::POST, &format!("/api/v1/events/{b_event}/redeliver"), &rw).await;
    assert_eq!(status, 404, "B's event cannot be redelivered with A's session");

    // Read-only: every change refused with 403 read_only, nothing sent.
    for path in [
        "/api/v1/events/test".to_string(),
        format!("/api/v1/events/{a_event}/redeliver"),
        "/api/v1/chatbot/rotate-secret".to_string(),
    ] {
        let (status, v) = call(&app, reqwest::Method::POST, &path, &ro).await;
        assert_eq!(status, 403, "{path}: {v}");
        assert_eq!(v["code"], "read_only");
    }
    let (status, v) = call(&app, reqwest::Method::GET, "/api/v1/events", &ro).await;
    assert_eq!(status, 200);
    assert_eq!(v["data"].as_array().map(Vec::len), Some(1), "the read-only session sent nothing: {v}");

    // Read-write: a test event and a rotated secret.
    test_event(&app, &rw).await;
    let (status, v) = call(&app, reqwest::Method::POST, "/api/v1/chatbot/rotate-secret", &rw).await;
    assert_eq!(status, 200, "{v}");
    let secret = v["signing_secret"].as_str().expect("secret");
    assert!(secret.starts_with("whsec_") && secret != a.signing_secret, "{v}");
    let (status, v) = call(&app, reqwest::Method::GET, "/api/v1/events", &rw).await;
    assert_eq!(status, 200);
    assert_eq!(v["data"].as_array().map(Vec::len), Some(2), "{v}");
}
}

store_test! {
async fn altered_foreign_and_expired_links_open_no_session() {
    let app = spawn_app().await;
    let a = app.create_bot("http://127.0.0.1:9/a").await;
    let b = app.create_bot("http://127.0.0.1:9/b").await;
    let (_, l) = link(&app, &a, json!({})).await;
    let token = token_of(l["url"].as_str().expect("url"));

    // One character changed anywhere: not found.
    let mut altered = token.clone().into_bytes();
    let i = altered.len() / 2;
    altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
    let (s, v) = session(&app, json!({"token": String::from_utf8(altered).expect("utf-8")})).await;
    assert_eq!(s, 404, "{v}");
    // A's link opened for B's page: not found.
    let (s, _) = session(&app, json!({"token": token, "chatbot_id": b.id})).await;
    assert_eq!(s, 404);
    let (s, _) = session(&app, json!({"token": token, "chatbot_id": a.id})).await;
    assert_eq!(s, 201);
    let (s, v) = session(&app, json!({})).await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["errors"][0]["field"], "/token");

    // Expired: 410, and a session that has expired is refused.
    let key = server_key(&app).await;
    let past = PortalGrant { chatbot_id: blockhook::domain::ids::ChatbotId::stored(a.id.clone()), expires_at: chrono::Utc::now().timestamp_millis() - 1000, read_only: false };
    let (s, v) = session(&app, json!({"token": key.issue_portal(PortalKind::Link, &past)})).await;
    assert_eq!(s, 410, "{v}");
    assert_eq!(v["code"], "portal_link_expired");
    let old = key.issue_portal(PortalKind::Session, &past);
    let (s, _) = call(&app, reqwest::Method::GET, "/api/v1/events", &old).await;
    assert_eq!(s, 401);
    // A link is not a session.
    let (s, _) = call(&app, reqwest::Method::GET, "/api/v1/events", &token).await;
    assert_eq!(s, 401);
}
}

store_test! {
async fn the_portal_page_may_be_framed_from_the_chatbots_allowed_origins_only() {
    let app = spawn_app().await;
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "Shop", "webhook_url": "http://127.0.0.1:9/h",
                    "allowed_origins": ["https://admin.shop.example", "http://localhost:3000"]}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let listed: Value = r.json().await.expect("json");
    let any = app.create_bot("http://127.0.0.1:9/any").await;
    let csp = |path: String| {
        let app = &app;
        async move {
            let r = app.client.get(app.url(&path)).send().await.expect("request");
            assert_eq!(r.status(), 200, "{path}");
            r.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
        }
    };
    let c = csp(format!("/portal/{}", listed["id"].as_str().expect("id"))).await;
    assert!(c.contains("frame-ancestors 'self' https://admin.shop.example http://localhost:3000"), "{c}");
    let c = csp(format!("/portal/{}", any.id)).await;
    assert!(c.contains("frame-ancestors *"), "{c}");
    let c = csp("/portal/cb_00000000000000000000000000".into()).await;
    assert!(c.contains("frame-ancestors 'none'"), "{c}");
    // The link's own address shows no chatbot's data and moves on.
    let c = csp("/portal".into()).await;
    assert!(c.contains("default-src 'self'"), "{c}");
}
}

store_test! {
async fn a_session_manages_its_chatbots_endpoints_only_and_a_read_only_one_none() {
    let app = spawn_app().await;
    let a = app.create_bot("http://127.0.0.1:9/a").await;
    let b = app.create_bot("http://127.0.0.1:9/b").await;
    let r = app.post("/api/v1/endpoints", &b.api_key, &json!({"url": "http://127.0.0.1:9/b-second"})).await;
    assert_eq!(r.status(), 201);
    let b_ep: Value = r.json().await.expect("json");
    let b_ep = b_ep["id"].as_str().expect("id").to_string();
    let rw = session_of(&app, &a, false).await;
    let ro = session_of(&app, &a, true).await;

    // A's session lists A's endpoints only; B's is not found.
    for s in [&rw, &ro] {
        let (status, v) = call(&app, reqwest::Method::GET, "/api/v1/endpoints", s).await;
        assert_eq!(status, 200, "{v}");
        let urls: Vec<&str> = v["data"].as_array().expect("data").iter().filter_map(|e| e["url"].as_str()).collect();
        assert_eq!(urls, vec!["http://127.0.0.1:9/a"]);
        let (status, _) = call(&app, reqwest::Method::GET, &format!("/api/v1/endpoints/{b_ep}"), s).await;
        assert_eq!(status, 404);
    }
    for (method, path) in [
        (reqwest::Method::PATCH, format!("/api/v1/endpoints/{b_ep}")),
        (reqwest::Method::DELETE, format!("/api/v1/endpoints/{b_ep}")),
        (reqwest::Method::POST, format!("/api/v1/endpoints/{b_ep}/test")),
        (reqwest::Method::POST, format!("/api/v1/endpoints/{b_ep}/rotate-secret")),
    ] {
        let (status, v) = call(&app, method.clone(), &path, &rw).await;
        assert_eq!(status, 404, "{method} {path}: {v}");
    }

    // Read-only: every endpoint write refused with 403 read_only.
    let r = app
        .client
        .post(app.url("/api/v1/endpoints"))
        .bearer_auth(&ro)
        .json(&json!({"url": "http://127.0.0.1:9/new"}))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 403);
    let (_, v) = call(&app, reqwest::Method::GET, "/api/v1/endpoints", &ro).await;
    let default = v["data"][0]["id"].as_str().expect("default id").to_string();
    for (method, path) in [
        (reqwest::Method::PATCH, format!("/api/v1/endpoints/{default}")),
        (reqwest::Method::DELETE, format!("/api/v1/endpoints/{default}")),
        (reqwest::Method::POST, format!("/api/v1/endpoints/{default}/test")),
        (reqwest::Method::POST, format!("/api/v1/endpoints/{default}/rotate-secret")),
    ] {
        let (status, v) = call(&app, method.clone(), &path, &ro).await;
        assert_eq!(status, 403, "{method} {path}: {v}");
        assert_eq!(v["code"], "read_only");
    }
    let (_, v) = call(&app, reqwest::Method::GET, "/api/v1/endpoints", &ro).await;
    assert_eq!(v["data"].as_array().map(Vec::len), Some(1), "nothing added: {v}");
    let (_, v) = call(&app, reqwest::Method::GET, "/api/v1/events", &ro).await;
    assert_eq!(v["data"], json!([]), "nothing sent: {v}");

    // Read-write: an endpoint added, changed and deleted with the session.
    let r = app
        .client
        .post(app.url("/api/v1/endpoints"))
        .bearer_auth(&rw)
        .json(&json!({"url": "http://127.0.0.1:9/a-second"}))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    assert!(v["signing_secret"].as_str().is_some_and(|s| s.starts_with("whsec_")), "{v}");
    let id = v["id"].as_str().expect("id");
    let (status, _) = call(&app, reqwest::Method::DELETE, &format!("/api/v1/endpoints/{id}"), &rw).await;
    assert_eq!(status, 204);
    let (status, v) = call(&app, reqwest::Method::DELETE, &format!("/api/v1/endpoints/{default}"), &rw).await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["code"], "default_endpoint");
}
}
