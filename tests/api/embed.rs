//! §9 Embedding on a customer's site, over real HTTP: a chatbot's
//! `allowed_origins`, CORS on the widget API and the static files, and
//! nothing of it on `/api/v1`.

use std::time::Duration;

use reqwest::{Method, Response, header::HeaderMap};
use serde_json::{Value, json};

use crate::core::{
    NOWHERE, expect_field_error, field_errors, form_message, json_of, patch, problem,
    widget_message,
};
use crate::helpers::{ADMIN_TOKEN, Bot, Conv, Receiver, TestApp, spawn_app};

const SHOP: &str = "http://shop.example:8443";
const EVIL: &str = "https://evil.example";

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// `Access-Control-Allow-Origin: <origin>` and `Vary` naming `Origin`.
fn assert_cors(h: &HeaderMap, origin: &str, what: &str) {
    assert_eq!(
        header(h, "access-control-allow-origin"),
        Some(origin),
        "{what}: {h:?}"
    );
    assert_vary(h, what);
}

fn assert_vary(h: &HeaderMap, what: &str) {
    assert!(
        h.get_all("vary")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v
                .split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("origin"))),
        "{what}: no Vary: Origin in {h:?}"
    );
}

fn assert_no_cors(h: &HeaderMap, what: &str) {
    let cors: Vec<_> = h
        .keys()
        .filter(|k| k.as_str().starts_with("access-control-"))
        .collect();
    assert!(cors.is_empty(), "{what}: CORS headers {cors:?}");
}

async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    origin: Option<&str>,
    token: &str,
    body: Option<Value>,
) -> Response {
    let mut req = app.client.request(method, app.url(path));
    if let Some(o) = origin {
        req = req.header("Origin", o);
    }
    if !token.is_empty() {
        req = req.bearer_auth(token);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.expect("request")
}

async fn bot_with_origins(app: &TestApp, webhook: &str, origins: Value) -> Bot {
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "Shop bot", "webhook_url": webhook, "allowed_origins": origins}),
        )
        .await;
    let v = json_of(r, 201).await;
    Bot {
        id: v["id"].as_str().expect("id").into(),
        api_key: v["api_key"].as_str().expect("key").into(),
        signing_secret: v["signing_secret"].as_str().expect("secret").into(),
        json: v,
    }
}

/// A conversation started from `origin`.
async fn conv_from(app: &TestApp, bot: &Bot, origin: &str) -> Conv {
    let r = send(
        app,
        Method::POST,
        &format!("/widget/v1/chatbots/{}/conversations", bot.id),
        Some(origin),
        "",
        Some(json!({})),
    )
    .await;
    assert_cors(r.headers(), origin, "create conversation");
    let v = json_of(r, 201).await;
    Conv {
        id: v["conversation_id"].as_str().expect("cid").into(),
        token: v["visitor_token"].as_str().expect("token").into(),
        visitor: v["visitor"].clone(),
    }
}

store_test! {
async fn allowed_origins_default_to_any_and_are_set_validated_and_shown() {
    let app = spawn_app().await;
    let any = app.create_bot(NOWHERE).await;
    assert_eq!(any.json["allowed_origins"], json!(["*"]));

    let bot = bot_with_origins(
        &app,
        NOWHERE,
        json!(["HTTP://Shop.Example:8443", "https://www.example.com:443", "https://www.example.com"]),
    )
    .await;
    let want = json!(["http://shop.example:8443", "https://www.example.com"]);
    assert_eq!(bot.json["allowed_origins"], want);
    let path = format!("/api/v1/chatbots/{}", bot.id);
    let got = json_of(app.get(&path, ADMIN_TOKEN).await, 200).await;
    assert_eq!(got["allowed_origins"], want);

    // PATCH replaces the list; other fields stay.
    let v = json_of(
        patch(&app, &path, ADMIN_TOKEN, &json!({"allowed_origins": ["https://b.example"]})).await,
        200,
    )
    .await;
    assert_eq!(v["allowed_origins"], json!(["https://b.example"]));
    assert_eq!(v["name"], "Shop bot");
    let v = json_of(patch(&app, &path, ADMIN_TOKEN, &json!({"name": "Renamed"})).await, 200).await;
    assert_eq!(v["allowed_origins"], json!(["https://b.example"]));
    let v = json_of(patch(&app, &path, ADMIN_TOKEN, &json!({"allowed_origins": ["*"]})).await, 200).await;
    assert_eq!(v["allowed_origins"], json!(["*"]));

    // Each bad entry is named; nothing is changed.
    let bad = json!({"allowed_origins": ["https://ok.example", "https://shop.example/path", "shop.example", "*", 7]});
    let errs = expect_field_error(
        patch(&app, &path, ADMIN_TOKEN, &bad).await,
        "/allowed_origins/1",
        "invalid_origin",
    )
    .await;
    for i in 2..=4 {
        assert!(
            errs.contains(&(format!("/allowed_origins/{i}"), "invalid_origin".into())),
            "{errs:?}"
        );
    }
    assert!(!errs.iter().any(|(f, _)| f == "/allowed_origins/0"), "{errs:?}");
    let got = json_of(app.get(&path, ADMIN_TOKEN).await, 200).await;
    assert_eq!(got["allowed_origins"], json!(["*"]));
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "x", "webhook_url": NOWHERE, "allowed_origins": ["ftp://files.example"]}),
        )
        .await;
    expect_field_error(r, "/allowed_origins/0", "invalid_origin").await;
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "x", "webhook_url": NOWHERE, "allowed_origins": "*"}),
        )
        .await;
    let v = problem(r, 422, "validation_failed").await;
    assert_eq!(field_errors(&v), vec![("/allowed_origins".into(), "invalid_type".into())]);
}
}

#[actix_web::test]
async fn widget_js_and_assets_may_be_loaded_from_any_origin_and_cached() {
    let app = spawn_app().await;
    for path in [
        "/widget.js",
        "/assets/widget/main.js",
        "/assets/widget.css",
        "/assets/lib/sse.js",
    ] {
        let r = send(&app, Method::GET, path, Some(SHOP), "", None).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(
            header(r.headers(), "access-control-allow-origin"),
            Some("*"),
            "{path}"
        );
        let etag = header(r.headers(), "etag").expect("ETag").to_string();
        let again = app
            .client
            .get(app.url(path))
            .header("Origin", SHOP)
            .header("If-None-Match", &etag)
            .send()
            .await
            .expect("request");
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(
            header(again.headers(), "access-control-allow-origin"),
            Some("*")
        );
        assert_eq!(header(again.headers(), "etag"), Some(etag.as_str()));
    }
    // Without Origin too (a plain <script> fetch), and the favicon is there.
    let r = send(&app, Method::GET, "/widget.js", None, "", None).await;
    assert_eq!(
        header(r.headers(), "access-control-allow-origin"),
        Some("*")
    );
    let r = send(&app, Method::GET, "/favicon.ico", None, "", None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(r.headers(), "content-type"), Some("image/svg+xml"));
}

store_test! {
async fn every_widget_route_answers_a_preflight_with_204() {
    let app = spawn_app().await;
    let routes = [
        ("POST", "/widget/v1/chatbots/cb_x/conversations"),
        ("GET", "/widget/v1/conversations/conv_x/messages"),
        ("POST", "/widget/v1/conversations/conv_x/messages"),
        ("GET", "/widget/v1/conversations/conv_x/stream"),
        ("POST", "/widget/v1/messages/m_x/clicks"),
        ("POST", "/widget/v1/messages/m_x/forms/f1"),
    ];
    for (method, path) in routes {
        let r = app
            .client
            .request(Method::OPTIONS, app.url(path))
            .header("Origin", SHOP)
            .header("Access-Control-Request-Method", method)
            .header("Access-Control-Request-Headers", "authorization,content-type,last-event-id")
            .send()
            .await
            .expect("preflight");
        assert_eq!(r.status(), 204, "{method} {path}");
        let h = r.headers();
        assert_cors(h, SHOP, path);
        let methods = header(h, "access-control-allow-methods").expect("methods");
        assert!(methods.split(',').any(|m| m.trim() == method), "{methods}");
        let allowed = header(h, "access-control-allow-headers").expect("headers").to_ascii_lowercase();
        for name in ["authorization", "content-type", "last-event-id"] {
            assert!(allowed.split(',').any(|x| x.trim() == name), "{name} in {allowed}");
        }
        let age: u64 = header(h, "access-control-max-age").expect("max-age").parse().expect("number");
        assert!(age >= 600, "max-age {age}");
    }
}
}

store_test! {
async fn an_allowed_origin_gets_its_cors_headers_on_every_answer() {
    let app = spawn_app().await;
    let bot = bot_with_origins(&app, NOWHERE, json!([SHOP])).await;
    let conv = conv_from(&app, &bot, SHOP).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let mid = msg["id"].as_str().expect("id");
    let click = |action: &str| json!({"block_id": "b1", "action_id": action});
    let clicks = format!("/widget/v1/messages/{mid}/clicks");

    let r = send(&app, Method::POST, &clicks, Some(SHOP), &conv.token, Some(click("approve"))).await;
    assert_cors(r.headers(), SHOP, "click");
    json_of(r, 200).await;
    // Errors too: 409, 422, 404, 401.
    let r = send(&app, Method::POST, &clicks, Some(SHOP), &conv.token, Some(click("deny"))).await;
    assert_cors(r.headers(), SHOP, "409");
    problem(r, 409, "block_disabled").await;
    let r = send(&app, Method::POST, &clicks, Some(SHOP), &conv.token, Some(json!({}))).await;
    assert_cors(r.headers(), SHOP, "422");
    problem(r, 422, "validation_failed").await;
    let r = send(&app, Method::POST, "/widget/v1/messages/m_nope/clicks", Some(SHOP), &conv.token, Some(click("approve"))).await;
    assert_cors(r.headers(), SHOP, "404");
    problem(r, 404, "not_found").await;
    // Without a valid token the chatbot is unknown: the answer is still
    // readable, so that the widget can start over.
    let r = send(&app, Method::POST, &clicks, Some(SHOP), "vt_wrong", Some(click("approve"))).await;
    assert_cors(r.headers(), SHOP, "401");
    problem(r, 401, "unauthorized").await;

    let msgs = format!("/widget/v1/conversations/{}/messages", conv.id);
    let r = send(&app, Method::GET, &msgs, Some(SHOP), &conv.token, None).await;
    assert_cors(r.headers(), SHOP, "list");
    json_of(r, 200).await;
    let r = send(&app, Method::POST, &msgs, Some(SHOP), &conv.token, Some(json!({"text": "hi"}))).await;
    assert_cors(r.headers(), SHOP, "post message");
    json_of(r, 201).await;

    let form = form_message(&app, &bot, &conv, true).await;
    let fid = form["blocks"][0]["form_id"].as_str().expect("form_id");
    let submit = format!("/widget/v1/messages/{}/forms/{fid}", form["id"].as_str().expect("id"));
    let r = send(&app, Method::POST, &submit, Some(SHOP), &conv.token, Some(json!({"values": {}}))).await;
    assert_cors(r.headers(), SHOP, "form 422");
    problem(r, 422, "validation_failed").await;

    // The live stream: headers first, then the events.
    let r = send(&app, Method::GET, &format!("/widget/v1/conversations/{}/stream", conv.id), Some(SHOP), &conv.token, None).await;
    assert_eq!(r.status(), 200);
    assert_cors(r.headers(), SHOP, "stream");
    drop(r);

    // A chatbot open to any origin echoes whichever origin asks.
    let any = app.create_bot(NOWHERE).await;
    conv_from(&app, &any, EVIL).await;
}
}

store_test! {
async fn a_disallowed_origin_is_refused_and_nothing_is_created_accepted_or_sent() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = bot_with_origins(&app, &rx.url, json!([SHOP])).await;

    let start = format!("/widget/v1/chatbots/{}/conversations", bot.id);
    let r = send(&app, Method::POST, &start, Some(EVIL), "", Some(json!({}))).await;
    let h = r.headers().clone();
    assert_no_cors(&h, "create conversation");
    assert_vary(&h, "create conversation");
    problem(r, 403, "origin_not_allowed").await;

    // A conversation started elsewhere (no Origin: a server, curl).
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let mid = msg["id"].as_str().expect("id");
    let form = form_message(&app, &bot, &conv, true).await;
    let form_id = form["blocks"][0]["form_id"].as_str().expect("form_id");
    let fmid = form["id"].as_str().expect("id");
    let calls = [
        (Method::POST, format!("/widget/v1/messages/{mid}/clicks"), Some(json!({"block_id": "b1", "action_id": "approve"}))),
        (Method::POST, format!("/widget/v1/messages/{fmid}/forms/{form_id}"), Some(json!({"values": {"email": "a@b.example"}}))),
        (Method::POST, format!("/widget/v1/conversations/{}/messages", conv.id), Some(json!({"text": "hi"}))),
        (Method::GET, format!("/widget/v1/conversations/{}/messages", conv.id), None),
        (Method::GET, format!("/widget/v1/conversations/{}/stream", conv.id), None),
    ];
    for (method, path, body) in &calls {
        let r = send(&app, method.clone(), path, Some(EVIL), &conv.token, body.clone()).await;
        assert_no_cors(r.headers(), path);
        problem(r, 403, "origin_not_allowed").await;
    }
    // Nothing accepted, nothing sent.
    assert!(app.events(&bot).await.is_empty(), "an event was created");
    let m = widget_message(&app, &conv, mid).await;
    assert_eq!(m["blocks"][0]["state"]["disabled"], false, "{m}");
    let all = json_of(app.get(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token).await, 200).await;
    assert_eq!(all["data"].as_array().map(Vec::len), Some(2), "{all}");
    assert!(rx.next(Duration::from_millis(300)).await.is_none(), "the receiver got a request");

    // The allowed origin works, and the same calls without Origin are not
    // affected.
    let r = send(&app, Method::POST, &calls[0].1, Some(SHOP), &conv.token, calls[0].2.clone()).await;
    assert_cors(r.headers(), SHOP, "allowed click");
    json_of(r, 200).await;
    let r = send(&app, Method::POST, &calls[2].1, None, &conv.token, calls[2].2.clone()).await;
    assert_no_cors(r.headers(), "no Origin");
    json_of(r, 201).await;
    assert!(rx.next(Duration::from_secs(10)).await.is_some(), "the allowed click was not sent");

    // A change of the list applies to tokens already in use.
    let path = format!("/api/v1/chatbots/{}", bot.id);
    json_of(patch(&app, &path, ADMIN_TOKEN, &json!({"allowed_origins": [EVIL]})).await, 200).await;
    let r = send(&app, Method::GET, &calls[3].1, Some(EVIL), &conv.token, None).await;
    assert_cors(r.headers(), EVIL, "after PATCH");
    json_of(r, 200).await;
    let r = send(&app, Method::GET, &calls[3].1, Some(SHOP), &conv.token, None).await;
    problem(r, 403, "origin_not_allowed").await;
}
}

store_test! {
async fn the_api_sends_no_cors_headers() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let r = send(&app, Method::GET, "/api/v1/events", Some(SHOP), &bot.api_key, None).await;
    assert_eq!(r.status(), 200);
    assert_no_cors(r.headers(), "GET /api/v1/events");
    let r = send(&app, Method::GET, &format!("/api/v1/chatbots/{}", bot.id), Some(SHOP), ADMIN_TOKEN, None).await;
    assert_eq!(r.status(), 200);
    assert_no_cors(r.headers(), "GET chatbot");
    let r = app
        .client
        .request(Method::OPTIONS, app.url("/api/v1/chatbots"))
        .header("Origin", SHOP)
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "authorization,content-type")
        .send()
        .await
        .expect("preflight");
    assert_ne!(r.status(), 204);
    assert_no_cors(r.headers(), "preflight of /api/v1");
}
}
