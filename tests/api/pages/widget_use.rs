//! The widget as a visitor on a phone uses it, in headless Chromium: focus
//! moves into the panel as it opens, fields are 16 px (no zoom on iOS),
//! "New conversation" asks before it clears anything, a container the page
//! sized is filled; axe-core finds nothing. Also the dashboard under axe.

use serde_json::json;

use super::driver::{no_violations, run};
use super::site::{Site, bot_for, shop_page};
use crate::helpers::{Receiver, spawn_app};

#[actix_web::test]
async fn the_widget_focuses_its_panel_asks_before_a_new_conversation_and_fills_its_container() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let site = Site::start().await;
    let bot = bot_for(&app, &rx.url, json!([site.origin])).await;
    let launcher_page = site.put("/", shop_page(&app.url("/widget.js"), &bot, "", ""));
    let inline_page = site.put(
        "/inline",
        format!(
            r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Help</title></head><body>
<main><h1>Help</h1><div id="box" data-blockhook-widget data-chatbot="{}" style="width: 320px; height: 300px"></div></main>
<script src="{}" async></script></body></html>"#,
            bot.id,
            app.url("/widget.js")
        ),
    );
    let out = run(
        "widget_use",
        json!({"launcher_page": launcher_page, "inline_page": inline_page, "chatbot": bot.id}),
    )
    .await;
    assert!(
        out["focused"]
            .as_str()
            .is_some_and(|c| c.contains("bh-input")),
        "{out}"
    );
    let sizes = out["fontSizes"].as_array().expect("sizes");
    assert!(
        !sizes.is_empty() && sizes.iter().all(|s| s.as_f64() >= Some(16.0)),
        "{sizes:?}"
    );
    // Asked first; nothing cleared until the visitor says so.
    assert_eq!(out["askShown"], true);
    assert!(
        out["askText"]
            .as_str()
            .is_some_and(|t| t.contains("Start a new conversation?"))
    );
    assert_eq!(out["afterAsk"], out["first"]);
    assert_eq!(out["keptHidden"], true);
    assert_eq!(out["afterKeep"], out["first"]);
    assert_ne!(out["afterStart"], out["first"], "Start new starts one");
    no_violations("widget asking", &out["axeAsking"]);
    no_violations("widget", &out["axe"]);
    // The page's 320 × 300 container, filled.
    assert_eq!(out["inline"]["host"], json!([320, 300]), "{out}");
    assert_eq!(out["inline"]["widget"], json!([320, 300]), "{out}");
    no_violations("inline widget", &out["axeInline"]);
    site.stop().await;
}

#[actix_web::test]
async fn the_dashboard_has_no_axe_violations_at_360_and_1280_px() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let r = app
        .post(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
            &json!({"text": "Can someone call me back about pricing? It is about a long order with many lines"}),
        )
        .await;
    assert_eq!(r.status(), 201);
    rx.take(1, std::time::Duration::from_secs(10)).await;
    app.buttons(&bot, &conv, true).await;
    let out = run(
        "dashboard_axe",
        json!({"url": app.address, "token": bot.api_key}),
    )
    .await;
    no_violations("dashboard at 360 px", &out["360"]);
    no_violations("dashboard at 1280 px", &out["1280"]);
}
