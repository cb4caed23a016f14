//! §16 `widget_url` in a real headless Chromium: the link a bot sends a
//! person opens the widget on that conversation (its token in the
//! fragment), shows the bot's message there, and a click on its button
//! becomes the signed webhook of that conversation.

use std::time::Duration;

use serde_json::{Value, json};

use super::cdp::Chrome;
use crate::helpers::{Conv, Receiver, spawn_app, verify_signature};

/// `document.querySelector` inside the widget's shadow root.
fn w(sel: &str) -> String {
    format!(
        "document.querySelector('[data-blockhook-widget]')?.shadowRoot?.querySelector({})",
        json!(sel)
    )
}

/// The text the widget shows.
fn widget_text() -> String {
    format!("({} || {{}}).innerText || ''", w(".bh-list"))
}

store_test! {
async fn a_widget_url_opens_its_conversation_and_its_buttons_send_the_webhook() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let r = app
        .post("/api/v1/conversations", &bot.api_key, &json!({"display_name": "Ada"}))
        .await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    let cid = v["conversation_id"].as_str().expect("conversation_id").to_string();
    let link = v["widget_url"].as_str().expect("widget_url").to_string();
    let conv = Conv {
        id: cid.clone(),
        token: v["visitor_token"].as_str().expect("visitor_token").to_string(),
        visitor: v["visitor"].clone(),
    };
    // Another conversation of the same chatbot, whose message must not show.
    let other = app.create_conv(&bot).await;
    app.bot_message(&bot, &other, json!({"text": "Meant for someone else"}))
        .await;
    let msg = app
        .bot_message(
            &bot,
            &conv,
            json!({"text": "Ship the order to Ada?", "blocks": [{"type": "actions", "block_id": "ship",
                "elements": [{"type": "button", "action_id": "yes", "label": "Ship it", "value": "order_7"},
                             {"type": "button", "action_id": "no", "label": "Hold"}]}]}),
        )
        .await;
    let mid = msg["id"].as_str().expect("message id").to_string();

    let chrome = Chrome::launch().await;
    let tab = chrome.open(&link, 1280, 900).await;
    tab.wait_for(
        &format!("{}.includes('Ship the order to Ada?')", widget_text()),
        "the conversation's message",
    )
    .await;
    tab.wait_for(&w("[data-action-id=yes]"), "the message's buttons")
        .await;
    let text: String = tab.eval(&widget_text()).await;
    assert!(text.contains("Ship it") && text.contains("Hold"), "{text}");
    assert!(!text.contains("Meant for someone else"), "another conversation shown: {text}");

    tab.eval::<Value>(&format!("{}.click()", w("[data-action-id=yes]")))
        .await;
    let got = rx
        .next(Duration::from_secs(20))
        .await
        .expect("the click's webhook");
    tab.wait_for(
        &format!("{}.includes('You chose “Ship it”.')", widget_text()),
        "the choice shown",
    )
    .await;
    tab.close().await;
    chrome.close().await;

    assert!(verify_signature(&bot.signing_secret, &got), "signed with the chatbot's secret");
    let e = got.json();
    assert_eq!(e["type"], "interaction.button_clicked", "{e}");
    assert_eq!(e["conversation_id"], cid.as_str(), "{e}");
    assert_eq!(e["chatbot_id"], bot.id.as_str(), "{e}");
    assert_eq!(e["message_id"], mid.as_str(), "{e}");
    assert_eq!(e["block_id"], "ship", "{e}");
    assert_eq!(e["action_id"], "yes", "{e}");
    assert_eq!(e["value"], "order_7", "{e}");
    assert_eq!(e["user"]["kind"], "visitor", "{e}");
    assert_eq!(e["user"]["display_name"], "Ada", "{e}");
    assert_eq!(got.header("webhook-id"), e["event_id"].as_str());
}
}
