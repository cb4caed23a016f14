//! §9 The widget on a customer's own site, in a real headless Chromium: the
//! host page comes from a second origin (a small server started by the
//! test), the widget from the app, as a business would embed it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::cdp::{Chrome, Tab};
use crate::helpers::{ADMIN_TOKEN, Bot, Receiver, TestApp, spawn_app};

const WAIT: Duration = Duration::from_secs(15);

/// The customer's site: pages by path, on its own port (another origin).
struct Site {
    origin: String,
    pages: Arc<Mutex<HashMap<String, String>>>,
    server: actix_web::dev::ServerHandle,
}

impl Site {
    async fn start() -> Site {
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

    fn put(&self, path: &str, body: String) -> String {
        self.pages.lock().insert(path.to_string(), body);
        format!("{}{path}", self.origin)
    }

    async fn stop(&self) {
        self.server.stop(false).await;
    }
}

/// A shop page with the one-tag embed; `head` goes into its `<head>`.
fn shop_page(script_src: &str, bot: &Bot, head: &str, body: &str) -> String {
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
fn q(sel: &str) -> String {
    format!(
        "document.querySelector('[data-blockhook-launcher]')?.shadowRoot?.querySelector({})",
        json!(sel)
    )
}

/// The text shown in the launcher's panel.
fn panel_text() -> String {
    format!("({} || {{}}).innerText || ''", q(".bh-panel"))
}

async fn bot_for(app: &TestApp, webhook: &str, origins: Value) -> Bot {
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
async fn open_panel(tab: &Tab, bot: &Bot) -> String {
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

fn conv_of(cid: &str) -> crate::helpers::Conv {
    crate::helpers::Conv {
        id: cid.to_string(),
        token: String::new(),
        visitor: Value::Null,
    }
}

async fn post_bot_message(app: &TestApp, bot: &Bot, cid: &str, body: Value) -> Value {
    app.bot_message(bot, &conv_of(cid), body).await
}

#[actix_web::test]
async fn the_launcher_opens_the_panel_and_clicks_forms_and_replies_go_both_ways() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let site = Site::start().await;
    let bot = bot_for(&app, &rx.url, json!([site.origin])).await;
    let url = site.put("/", shop_page(&app.url("/widget.js"), &bot, "", ""));
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&url, 1280, 800).await;

    let cid = open_panel(&tab, &bot).await;
    post_bot_message(
        &app,
        &bot,
        &cid,
        json!({"text": "Approve the order?", "blocks": [{"type": "actions", "block_id": "b1",
        "elements": [{"type": "button", "action_id": "approve", "label": "Approve"},
                     {"type": "button", "action_id": "deny", "label": "Deny"}]}]}),
    )
    .await;
    tab.wait_for(
        &format!("{}.includes('Approve the order?')", panel_text()),
        "the bot's message, live",
    )
    .await;

    // A click: the receiver gets it; the choice shows; focus stays on the group.
    tab.eval::<Value>(&format!("{}.click()", q("[data-action-id=approve]")))
        .await;
    tab.wait_for(
        &format!("{}.includes('You chose “Approve”.')", panel_text()),
        "the choice",
    )
    .await;
    let clicked = rx
        .next(WAIT)
        .await
        .expect("the click reached the receiver")
        .json();
    assert_eq!(clicked["type"], "interaction.button_clicked");
    assert_eq!(clicked["action_id"], "approve");
    // (The stream may show the choice before the click's own answer comes.)
    tab.wait_for(
        "(() => { const a = document.querySelector('[data-blockhook-launcher]').shadowRoot.activeElement; \
          return a && a.hasAttribute('data-focus-group') && a.closest('[data-block-id]')?.dataset.blockId === 'b1'; })()",
        "focus on the chosen button's group",
    )
    .await;

    // A form: a bad value shows inline and sends nothing; fixed, it is sent
    // and then shown read-only with what was sent.
    post_bot_message(&app, &bot, &cid, json!({"text": "Want a callback?", "blocks": [{"type": "form", "block_id": "fb", "form_id": "callback",
        "submit_label": "Call me", "disable_on_submit": true, "fields": [
        {"name": "full_name", "type": "text", "label": "Your name", "required": true},
        {"name": "email", "type": "email", "label": "Your email", "required": true}]}]})).await;
    tab.wait_for(&q("form[data-form-id=callback]"), "the form")
        .await;
    let fill = |name: &str, email: &str| {
        format!(
            "(() => {{ const f = {}; f.elements.full_name.value = {}; f.elements.email.value = {}; f.requestSubmit(); return true; }})()",
            q("form[data-form-id=callback]"),
            json!(name),
            json!(email)
        )
    };
    tab.eval::<bool>(&fill("Ana", "not-an-email")).await;
    tab.wait_for(
        &format!(
            "{}?.innerText.trim().length > 0",
            q("[data-name=email] .bh-field-error")
        ),
        "the inline error under the email field",
    )
    .await;
    assert!(
        rx.next(Duration::from_millis(500)).await.is_none(),
        "a refused form was sent"
    );
    tab.eval::<bool>(&fill("Ana", "ana@example.com")).await;
    let sent = rx
        .next(WAIT)
        .await
        .expect("the form reached the receiver")
        .json();
    assert_eq!(sent["type"], "interaction.form_submitted");
    assert_eq!(sent["values"]["email"], "ana@example.com");
    tab.wait_for(
        &format!("{}.includes('Sent.')", panel_text()),
        "the form's sent state",
    )
    .await;
    let shown: Value = tab
        .eval(&format!(
            "(() => {{ const f = {}; return [f.elements.email.value, f.elements.email.readOnly]; }})()",
            q("form[data-form-id=callback]")
        ))
        .await;
    assert_eq!(shown, json!(["ana@example.com", true]));

    // The bot answers through the click's response_url: the panel follows.
    let response_url = clicked["response_url"].as_str().expect("response_url");
    let r = app
        .client
        .post(response_url)
        .json(&json!({"text": "Approved, thank you!"}))
        .send()
        .await
        .expect("reply");
    assert!(r.status().is_success(), "reply: {}", r.status());
    tab.wait_for(
        &format!("{}.includes('Approved, thank you!')", panel_text()),
        "the reply, live",
    )
    .await;

    // The launcher closes the panel again; nothing went unhandled.
    tab.eval::<Value>(&format!("{}.click()", q(".bh-launcher")))
        .await;
    let hidden: bool = tab.eval(&format!("{}.hidden", q(".bh-panel"))).await;
    assert!(hidden, "the panel closes");
    let rejections: Vec<String> = tab.eval("window.__rejections").await;
    assert!(rejections.is_empty(), "{rejections:?}");
    chrome.close().await;
    site.stop().await;
}

#[actix_web::test]
async fn a_page_whose_origin_the_chatbot_does_not_allow_gets_a_polite_notice_and_sends_nothing() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let site = Site::start().await;
    let bot = bot_for(&app, &rx.url, json!(["https://elsewhere.example"])).await;
    let url = site.put("/", shop_page(&app.url("/widget.js"), &bot, "", ""));
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&url, 1280, 800).await;

    tab.wait_for(&q(".bh-launcher"), "the launcher").await;
    tab.eval::<Value>(&format!("{}.click()", q(".bh-launcher")))
        .await;
    tab.wait_for(
        &format!(
            "{}.includes('The chat is unavailable right now. Please try again later.')",
            panel_text()
        ),
        "the polite notice",
    )
    .await;
    let composer_hidden: bool = tab.eval(&format!("{}.hidden", q(".bh-composer"))).await;
    assert!(composer_hidden, "nothing to write into");
    let rejections: Vec<String> = tab.eval("window.__rejections").await;
    assert!(rejections.is_empty(), "{rejections:?}");
    assert!(app.events(&bot).await.is_empty());
    assert!(
        rx.next(Duration::from_millis(300)).await.is_none(),
        "something was sent"
    );
    chrome.close().await;
    site.stop().await;
}

#[actix_web::test]
async fn a_widget_whose_modules_cannot_be_loaded_says_so_politely() {
    let app = spawn_app().await;
    let site = Site::start().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    // The loader served from a place that has no /assets: its modules fail.
    let loader = app
        .client
        .get(app.url("/widget.js"))
        .send()
        .await
        .expect("widget.js")
        .text()
        .await
        .expect("text");
    let src = site.put("/widget.js", loader);
    let url = site.put("/", shop_page(&src, &bot, "", ""));
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&url, 1280, 800).await;
    tab.wait_for(&q(".bh-launcher"), "the launcher").await;
    tab.eval::<Value>(&format!("{}.click()", q(".bh-launcher")))
        .await;
    tab.wait_for(
        &format!(
            "{}.includes('The chat is unavailable right now.')",
            panel_text()
        ),
        "the polite notice",
    )
    .await;
    let rejections: Vec<String> = tab.eval("window.__rejections").await;
    assert!(rejections.is_empty(), "{rejections:?}");
    chrome.close().await;
    site.stop().await;
}

/// Computed styles of the launcher and of the panel's parts, as the
/// visitor's browser applies them.
const STYLES: &str = r#"(() => {
  const root = document.querySelector('[data-blockhook-launcher]').shadowRoot;
  const props = ['display', 'position', 'width', 'height', 'font-size', 'font-family', 'color',
    'background-color', 'border-top-width', 'border-top-left-radius', 'padding-top', 'visibility'];
  const out = {};
  for (const sel of ['.bh-launcher', '.bh-panel', '.bh-widget', '.bh-header', '.bh-bubble',
                     '[data-action-id=yes]', '.bh-input', '.bh-composer .bh-btn']) {
    const el = root.querySelector(sel);
    if (!el) { out[sel] = null; continue; }
    const cs = getComputedStyle(el);
    out[sel] = Object.fromEntries(props.map((p) => [p, cs.getPropertyValue(p)]));
  }
  return out;
})()"#;

#[actix_web::test]
async fn a_hostile_page_stylesheet_neither_breaks_the_widget_nor_is_changed_by_it() {
    let app = spawn_app().await;
    let site = Site::start().await;
    let bot = bot_for(&app, "http://127.0.0.1:9/hook", json!([site.origin])).await;
    let hostile = "<style>* { all: unset !important; } button { display: none !important; } \
        div { color: red; font-size: 40px; } .bh-widget { border: 9px solid lime; }</style>";
    let decoys = r#"<button id="page-button">Page button</button><div class="bh-widget bh-bubble" id="decoy">Decoy</div>"#;
    let plain = site.put(
        "/plain",
        shop_page(&app.url("/widget.js"), &bot, "", decoys),
    );
    let rough = site.put(
        "/hostile",
        shop_page(&app.url("/widget.js"), &bot, hostile, decoys),
    );
    let chrome = Chrome::launch().await;

    let mut seen = Vec::new();
    for url in [plain, rough] {
        let tab = chrome.open(&url, 1280, 800).await;
        let cid = open_panel(&tab, &bot).await;
        post_bot_message(
            &app,
            &bot,
            &cid,
            json!({"text": "Shall we?", "blocks": [{"type": "actions", "block_id": "b1",
            "elements": [{"type": "button", "action_id": "yes", "label": "Yes"}]}]}),
        )
        .await;
        tab.wait_for(&q("[data-action-id=yes]"), "the bot's button")
            .await;
        let styles: Value = tab.eval(STYLES).await;
        // The page's own elements keep the page's rules, not the widget's.
        let decoy: Value = tab
            .eval("(() => { const d = getComputedStyle(document.getElementById('decoy')); \
                   return [d.getPropertyValue('border-top-left-radius'), d.getPropertyValue('background-color'), \
                   getComputedStyle(document.getElementById('page-button')).display]; })()")
            .await;
        seen.push((styles, decoy));
    }
    let (plain_styles, plain_decoy) = &seen[0];
    let (rough_styles, rough_decoy) = &seen[1];
    assert_eq!(
        plain_styles, rough_styles,
        "the hostile page changed the widget"
    );
    let launcher = &rough_styles[".bh-launcher"];
    assert_eq!(launcher["display"], "flex", "{launcher}");
    assert_eq!(launcher["position"], "fixed", "{launcher}");
    assert_eq!(launcher["width"], "56px", "{launcher}");
    let button = &rough_styles["[data-action-id=yes]"];
    // A flex item of its group: shown, at the widget's size.
    assert_eq!(button["display"], "flex", "{button}");
    assert_eq!(button["visibility"], "visible", "{button}");
    assert_eq!(button["font-size"], "14px", "{button}");
    // Neither page's decoy, which carries the widget's class names, took the
    // widget's look (its rounded corners, its white background).
    assert_eq!(plain_decoy[0], "0px", "{plain_decoy}");
    assert_eq!(rough_decoy[0], "0px", "{rough_decoy}");
    assert_ne!(plain_decoy[1], "rgb(255, 255, 255)", "{plain_decoy}");
    assert_eq!(
        rough_decoy[2], "none",
        "the page's own rule still hides its button"
    );
    chrome.close().await;
    site.stop().await;
}

/// The launcher closed and open, on a phone (360 px) and on a desktop, as
/// PNGs under `target/tmp/screenshots` (docs/screenshots holds a copy).
#[actix_web::test]
async fn screenshots_of_the_launcher_closed_and_open() {
    let app = spawn_app().await;
    let site = Site::start().await;
    let bot = bot_for(&app, "http://127.0.0.1:9/hook", json!(["*"])).await;
    let url = site.put(
        "/",
        shop_page(
            &app.url("/widget.js"),
            &bot,
            "<style>body { font: 16px/1.5 Georgia, serif; margin: 40px; color: #1f2937; background: #fdfaf3; }</style>",
            "<p>Our greenhouse is open every day from 9 to 18.</p>",
        ),
    );
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&out).expect("screenshot dir");
    let chrome = Chrome::launch().await;
    for (name, w, h) in [("mobile", 360, 740), ("desktop", 1280, 800)] {
        let tab = chrome.open(&url, w, h).await;
        tab.wait_for(&q(".bh-launcher"), "the launcher").await;
        tab.wait_for(
            &format!(
                "getComputedStyle({}).position === 'fixed'",
                q(".bh-launcher")
            ),
            "the launcher's styles",
        )
        .await;
        let closed = tab.screenshot().await;
        let cid = open_panel(&tab, &bot).await;
        if name == "mobile" {
            post_bot_message(&app, &bot, &cid, json!({"text": "Which plant are you looking for?", "blocks": [{"type": "actions", "block_id": "b1",
                "elements": [{"type": "button", "action_id": "fern", "label": "A fern", "style": "primary"},
                             {"type": "button", "action_id": "fig", "label": "A fig"}]}]})).await;
        } else {
            post_bot_message(&app, &bot, &cid, json!({"text": "Want us to call you back?", "blocks": [{"type": "form", "form_id": "cb",
                "submit_label": "Call me", "fields": [
                {"name": "full_name", "type": "text", "label": "Your name", "required": true},
                {"name": "phone", "type": "text", "label": "Phone"}]}]})).await;
        }
        tab.wait_for(&q(".bh-list .bh-block"), "the bot's block")
            .await;
        let open = tab.screenshot().await;
        for (state, png) in [("closed", closed), ("open", open)] {
            assert!(
                png.starts_with(b"\x89PNG\r\n\x1a\n"),
                "{name} {state} is a PNG"
            );
            std::fs::write(out.join(format!("launcher-{state}-{name}.png")), png)
                .expect("write screenshot");
        }
    }
    chrome.close().await;
    site.stop().await;
}

#[actix_web::test]
async fn a_team_answer_and_a_sent_form_show_in_every_tab() {
    let app = spawn_app().await;
    let site = Site::start().await;
    let bot = bot_for(&app, "http://127.0.0.1:9/hook", json!([site.origin])).await;
    let url = site.put("/", shop_page(&app.url("/widget.js"), &bot, "", ""));
    let chrome = Chrome::launch().await;
    let first = chrome.open(&url, 1280, 800).await;
    let cid = open_panel(&first, &bot).await;
    let buttons = post_bot_message(
        &app,
        &bot,
        &cid,
        json!({"text": "Ship today?", "blocks": [{"type": "actions", "block_id": "b1",
        "elements": [{"type": "button", "action_id": "ship", "label": "Ship it"},
                     {"type": "button", "action_id": "wait", "label": "Wait"}]}]}),
    )
    .await;
    post_bot_message(&app, &bot, &cid, json!({"text": "Your details?", "blocks": [{"type": "form", "form_id": "details",
        "submit_label": "Send", "fields": [{"name": "city", "type": "text", "label": "City", "required": true}]}]})).await;
    first
        .wait_for(&q("form[data-form-id=details]"), "the form")
        .await;
    first
        .eval::<bool>(&format!(
            "(() => {{ const f = {}; f.elements.city.value = 'Lyon'; f.requestSubmit(); return true; }})()",
            q("form[data-form-id=details]")
        ))
        .await;
    first
        .wait_for(
            &format!("{}.includes('Sent.')", panel_text()),
            "the sent form",
        )
        .await;

    // A team member answers the buttons from the inbox.
    let list: Value = app
        .get(
            &format!("/api/v1/interactions?status=pending&conversation_id={cid}"),
            &bot.api_key,
        )
        .await
        .json()
        .await
        .expect("json");
    let inter = list["data"]
        .as_array()
        .and_then(|d| d.iter().find(|i| i["message_id"] == buttons["id"]))
        .expect("the buttons' interaction");
    let r = app
        .client
        .post(app.url(&format!(
            "/api/v1/interactions/{}/responses",
            inter["id"].as_str().expect("id")
        )))
        .bearer_auth(&bot.api_key)
        .header("Idempotency-Key", "team-1")
        .json(&json!({"type": "choice", "option_ids": ["ship"]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 200);
    let team = "Answered by the team: “Ship it”.";
    first
        .wait_for(
            &format!("{}.includes({})", panel_text(), json!(team)),
            "the team's answer, live",
        )
        .await;

    // Another tab of the same visitor: the same conversation, the same states.
    let second = chrome.open(&url, 1280, 800).await;
    let again = open_panel(&second, &bot).await;
    assert_eq!(again, cid);
    second
        .wait_for(
            &format!("{}.includes({})", panel_text(), json!(team)),
            "the team's answer in the second tab",
        )
        .await;
    let text: String = second.eval(&panel_text()).await;
    assert!(!text.contains("You chose"), "{text}");
    let city: Value = second
        .eval(&format!(
            "(() => {{ const f = {}; return [f.elements.city.value, f.elements.city.readOnly, f.querySelector('button[type=submit]').disabled]; }})()",
            q("form[data-form-id=details]")
        ))
        .await;
    assert_eq!(
        city,
        json!(["Lyon", true, true]),
        "the sent form in the second tab"
    );
    chrome.close().await;
    site.stop().await;
}
