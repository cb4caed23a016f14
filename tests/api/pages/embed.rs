//! §9 The widget on a customer's own site, in a real headless Chromium: the
//! host page comes from a second origin (a small server started by the
//! test, `site`), the widget from the app, as a business would embed it.

use std::time::Duration;

use serde_json::{Value, json};

use super::cdp::Chrome;
use super::site::{Site, bot_for, open_panel, panel_text, post_bot_message, q, shop_page};
use crate::helpers::{Receiver, spawn_app};

const WAIT: Duration = Duration::from_secs(15);

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
    tab.wait_for(&q("[data-action-id=approve]"), "the bot's buttons")
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
    // The submit's answer and the stream may each render it: what is left
    // shown is the sent value, read-only.
    tab.wait_for(
        &format!(
            "(() => {{ const f = {}; return f.elements.email.value === 'ana@example.com' && f.elements.email.readOnly; }})()",
            q("form[data-form-id=callback]")
        ),
        "the sent form, read-only with what was sent",
    )
    .await;

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
    // What the page's developer reads in the console.
    let console = "<script>window.__errors = []; const e = console.error; \
        console.error = (...a) => { window.__errors.push(a.join(' ')); e(...a); };</script>";
    let url = site.put("/", shop_page(&app.url("/widget.js"), &bot, console, ""));
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&url, 1280, 800).await;

    tab.wait_for(&q(".bh-launcher"), "the launcher").await;
    tab.eval::<Value>(&format!("{}.click()", q(".bh-launcher")))
        .await;
    tab.wait_for(
        &format!(
            "{}.includes('This chat is not available on this site.')",
            panel_text()
        ),
        "the polite notice",
    )
    .await;
    // The developer learns it was the chatbot's allowed_origins list, with
    // this page's origin, on the page and in the console.
    tab.wait_for(&q(".bh-dev-hint"), "the hint for the developer")
        .await;
    let hint: String = tab
        .eval(&format!("{}.textContent", q(".bh-dev-hint")))
        .await;
    assert!(
        hint.contains(&site.origin) && hint.contains("allowed_origins"),
        "{hint}"
    );
    let errors: Vec<String> = tab.eval("window.__errors").await;
    assert!(
        errors.iter().any(|e| e.contains("allowed_origins")
            && e.contains(&site.origin)
            && e.contains(&bot.id)),
        "{errors:?}"
    );
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

#[actix_web::test]
async fn a_lost_connection_shows_reconnecting_until_the_stream_is_back() {
    let app = spawn_app().await;
    let site = Site::start().await;
    let bot = bot_for(&app, "http://127.0.0.1:9/hook", json!([site.origin])).await;
    let url = site.put("/", shop_page(&app.url("/widget.js"), &bot, "", ""));
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&url, 1280, 800).await;
    let cid = open_panel(&tab, &bot).await;
    let status = format!("{}.textContent", q(".bh-status"));
    let shown: String = tab.eval(&status).await;
    assert_eq!(shown, "", "nothing to say while live");
    // Off the network, and the open stream dropped (as a page's Stop does).
    tab.set_offline(true).await;
    tab.eval::<Value>("window.stop()").await;
    tab.wait_for(
        &format!("{status} === 'Reconnecting…'"),
        "the reconnecting state",
    )
    .await;
    let visible: bool = tab
        .eval(&format!("{}.offsetWidth > 0", q(".bh-status")))
        .await;
    assert!(visible, "the reconnecting state is visible");
    tab.set_offline(false).await;
    tab.wait_for(
        &format!("{}.classList.contains('is-live')", q(".bh-live")),
        "live again",
    )
    .await;
    // What came meanwhile is shown once back.
    post_bot_message(&app, &bot, &cid, json!({"text": "Still there?"})).await;
    tab.wait_for(
        &format!("{}.includes('Still there?')", panel_text()),
        "a message after the break",
    )
    .await;
    let shown: String = tab.eval(&status).await;
    assert_eq!(shown, "");
    chrome.close().await;
    site.stop().await;
}
