//! The customer's site of the embed tests: a second origin served by the
//! test itself, its pages, and steps on the widget it embeds.

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::{App, HttpResponse, HttpServer, web};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::cdp::Tab;
use crate::helpers::{ADMIN_TOKEN, Bot, TestApp};

/// The customer's site: pages by path, on its own port (another origin).
pub struct Site {
    pub origin: String,
    pages: Arc<Mutex<HashMap<String, String>>>,
    server: actix_web::dev::ServerHandle,
}

impl Site {
    pub async fn start() -> Site {
        let pages: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let shared = pages.clone();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = HttpServer::new(move || {
            let pages = shared.clone();
            App::new().default_service(web::to(move |req: actix_web::HttpRequest| {
                let page = pages.lock().get(req.path()).cloned();
                async move {
                    match page {
                        Some(body) if req.path().ends_with(".js") => HttpResponse::Ok()
                            .content_type("text/javascript")
                            .body(body),
                        Some(body) => HttpResponse::Ok()
                            .content_type("text/html; charset=utf-8")
                            .body(body),
                        None => HttpResponse::NotFound().finish(),
                    }
                }
            }))
        })
        .workers(1)
        .listen(listener)
        .expect("listen")
        .run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Site {
            // `localhost`, not the app's 127.0.0.1: another host as well as
            // another port.
            origin: format!("http://localhost:{port}"),
            pages,
            server: handle,
        }
    }

    pub fn put(&self, path: &str, body: String) -> String {
        self.pages.lock().insert(path.to_string(), body);
        format!("{}{path}", self.origin)
    }

    pub async fn stop(&self) {
        self.server.stop(false).await;
    }
}

/// A shop page with the one-tag embed; `head` goes into its `<head>`.
pub fn shop_page(script_src: &str, bot: &Bot, head: &str, body: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Shop</title>
<script>window.__rejections = []; addEventListener("unhandledrejection", (e) => window.__rejections.push(String(e.reason)));</script>
{head}</head><body>
<h1>Plant shop</h1><p>Ferns, figs and friends.</p>{body}
<script src="{script_src}" data-chatbot="{id}" data-greeting="Welcome to the plant shop!" async></script>
</body></html>"#,
        id = bot.id
    )
}

/// `document.querySelector` inside the launcher's shadow root.
pub fn q(sel: &str) -> String {
    format!(
        "document.querySelector('[data-blockhook-launcher]')?.shadowRoot?.querySelector({})",
        json!(sel)
    )
}

/// The text shown in the launcher's panel.
pub fn panel_text() -> String {
    format!("({} || {{}}).innerText || ''", q(".bh-panel"))
}

pub async fn bot_for(app: &TestApp, webhook: &str, origins: Value) -> Bot {
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "Plant shop", "webhook_url": webhook, "allowed_origins": origins}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    Bot {
        id: v["id"].as_str().expect("id").into(),
        api_key: v["api_key"].as_str().expect("key").into(),
        signing_secret: v["signing_secret"].as_str().expect("secret").into(),
        json: v,
    }
}

/// Opens the launcher and waits for the conversation to be live; returns
/// its id (kept by the widget in the page's localStorage).
pub async fn open_panel(tab: &Tab, bot: &Bot) -> String {
    tab.wait_for(&q(".bh-launcher"), "the launcher").await;
    let hidden: bool = tab.eval(&format!("{}.hidden", q(".bh-panel"))).await;
    assert!(hidden, "the panel starts closed");
    tab.eval::<Value>(&format!("{}.click()", q(".bh-launcher")))
        .await;
    tab.wait_for(
        &format!(
            "{}.getAttribute('aria-expanded') === 'true'",
            q(".bh-launcher")
        ),
        "the launcher opened",
    )
    .await;
    tab.wait_for(
        &format!("{}?.classList.contains('is-live')", q(".bh-live")),
        "the live stream",
    )
    .await;
    let text: String = tab.eval(&panel_text()).await;
    assert!(
        text.contains("Welcome to the plant shop!"),
        "no greeting in {text}"
    );
    let key = format!("blockhook.widget.{}", bot.id);
    tab.eval(&format!(
        "JSON.parse(localStorage.getItem({})).conversation_id",
        json!(key)
    ))
    .await
}

pub fn conv_of(cid: &str) -> crate::helpers::Conv {
    crate::helpers::Conv {
        id: cid.to_string(),
        token: String::new(),
        visitor: Value::Null,
    }
}

pub async fn post_bot_message(app: &TestApp, bot: &Bot, cid: &str, body: Value) -> Value {
    app.bot_message(bot, &conv_of(cid), body).await
}
