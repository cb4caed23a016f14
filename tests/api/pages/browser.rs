//! The widget in a real headless Chromium: what a visitor sees after load.
//! Chromium is required: a missing browser fails these tests, never skips.

use serde_json::json;
use std::path::PathBuf;

use crate::helpers::{Bot, Conv, TestApp, spawn_app};

/// `BLOCKHOOK_CHROMIUM`, or Debian's `/usr/bin/chromium`.
pub fn chromium() -> PathBuf {
    let path = std::env::var_os("BLOCKHOOK_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "Chromium is required for the browser tests and is not at {}: \
         install it (apt-get install -y chromium) or set BLOCKHOOK_CHROMIUM",
        path.display()
    );
    path
}

/// Loads `url` in a fresh headless Chromium and returns the DOM, shadow
/// roots included, once the widget shows its messages.
async fn dump_dom(url: &str) -> String {
    let chrome = super::cdp::Chrome::launch().await;
    let tab = chrome.open(url, 1280, 900).await;
    tab.wait_for(
        "document.querySelector('[data-blockhook-widget]')?.shadowRoot?.querySelector('.bh-list .bh-msg')",
        "the widget's messages",
    )
    .await;
    let dom: String = tab.eval(super::cdp::DUMP).await;
    chrome.close().await;
    dom
}

/// The demo page resuming `conv` (the fragment hands the widget the
/// conversation its host page started).
fn widget_url(app: &TestApp, bot: &Bot, conv: &Conv) -> String {
    format!(
        "{}/widget?chatbot={}#conversation_id={}&visitor_token={}",
        app.address, bot.id, conv.id, conv.token
    )
}

#[actix_web::test]
async fn the_widget_renders_a_bot_messages_buttons_and_chosen_state() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let mid = msg["id"].as_str().expect("id");
    assert_eq!(app.click(&conv, mid, "b1", "deny").await.status(), 200);
    app.bot_message(
        &bot,
        &conv,
        json!({"text": "Which plan?", "blocks": [{"type": "actions", "block_id": "plan",
            "elements": [{"type": "button", "action_id": "free", "label": "Free plan"},
                         {"type": "button", "action_id": "pro", "label": "Pro plan"}]}]}),
    )
    .await;

    let dom = dump_dom(&widget_url(&app, &bot, &conv)).await;

    for text in [
        "Approve?",
        "Approve",
        "Deny",
        "Docs",
        "Which plan?",
        "Free plan",
        "Pro plan",
    ] {
        assert!(dom.contains(text), "{text} is not shown:\n{dom}");
    }
    // The first group was used: its choice is shown, its buttons are off.
    assert!(dom.contains("You chose “Deny”."), "{dom}");
    assert!(dom.contains(r#"aria-pressed="true""#), "{dom}");
    // A link button is a link that opens a new tab, never a POST.
    assert!(
        dom.contains(r#"href="https://example.com/docs" target="_blank""#),
        "{dom}"
    );
    // Oldest first: the question precedes the later message.
    let first = dom.find("Approve?").expect("first");
    let later = dom.find("Which plan?").expect("later");
    assert!(first < later, "messages are not oldest-first");
}

#[actix_web::test]
async fn the_widget_renders_every_form_field_type_and_the_takeover_reason() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let conv = app.create_conv(&bot).await;
    app.bot_message(
        &bot,
        &conv,
        json!({"text": "Want a callback?", "blocks": [{"type": "form", "form_id": "callback",
            "submit_label": "Call me", "fields": [
            {"name": "full_name", "type": "text", "label": "Your name", "required": true},
            {"name": "email", "type": "email", "label": "Your email"},
            {"name": "team_size", "type": "number", "label": "Team size"},
            {"name": "topic", "type": "select", "label": "Topic",
             "options": [{"value": "sales", "label": "Sales talk"}]},
            {"name": "details", "type": "textarea", "label": "Details"},
            {"name": "consent", "type": "checkbox", "label": "I agree"}]}]}),
    )
    .await;
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/takeover", conv.id),
            &bot.api_key,
            &json!({"member": {"id": "mem_agent", "display_name": "Agent"}}),
        )
        .await;
    assert_eq!(r.status(), 200);

    let dom = dump_dom(&widget_url(&app, &bot, &conv)).await;

    for text in [
        "Your name",
        "Your email",
        "Team size",
        "Sales talk",
        "Details",
        "I agree",
        "Call me",
        r#"name="full_name""#,
        r#"type="email""#,
        "<select",
        "<textarea",
        r#"type="checkbox""#,
    ] {
        assert!(dom.contains(text), "{text} is not shown:\n{dom}");
    }
    assert!(
        dom.contains("A team member has taken over this conversation."),
        "{dom}"
    );
}

#[actix_web::test]
async fn the_widget_links_a_questions_attachment_for_download() {
    use base64::Engine;
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let conv = app.create_conv(&bot).await;
    let bytes: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/ask", conv.id),
            &bot.api_key,
            &json!({"message": "Approve the report?", "wait": false, "attachment": {
                "filename": "report-q3.pdf", "content_type": "application/pdf",
                "data": base64::engine::general_purpose::STANDARD.encode(&bytes)}}),
        )
        .await;
    assert_eq!(r.status(), 202);

    let chrome = super::cdp::Chrome::launch().await;
    let tab = chrome.open(&widget_url(&app, &bot, &conv), 1280, 900).await;
    tab.bypass_csp_and_reload().await;
    const LINK: &str =
        "document.querySelector('[data-blockhook-widget]')?.shadowRoot?.querySelector('a.bh-file')";
    // Fetched with the visitor token and linked as the downloaded bytes.
    tab.wait_for(
        &format!("{LINK}?.dataset.ready === 'true'"),
        "the attachment's link, ready",
    )
    .await;
    let dom: String = tab.eval(super::cdp::DUMP).await;
    assert!(dom.contains("Approve the report?"), "{dom}");
    assert!(dom.contains(r#"class="bh-file""#), "a file link:\n{dom}");
    assert!(dom.contains("report-q3.pdf"), "its name:\n{dom}");
    assert!(dom.contains("(2.9 KB)"), "its size:\n{dom}");
    assert!(dom.contains(r#"href="blob:"#), "a blob: link:\n{dom}");
    assert!(dom.contains(r#"download="report-q3.pdf""#), "{dom}");
    // What the link downloads is the file that was asked with, byte for byte.
    let downloaded: String = tab
        .eval(&format!(
            "(async () => {{ const b = new Uint8Array(await (await fetch({LINK}.href)).arrayBuffer()); \
             let s = ''; for (const x of b) s += String.fromCharCode(x); return btoa(s); }})()"
        ))
        .await;
    chrome.close().await;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(downloaded)
            .expect("base64"),
        bytes,
        "the link downloads the same bytes"
    );
}
