//! Cursors are opaque and tamper-evident: no row number shows, and an
//! altered or foreign cursor is a 422 pointing at `cursor`, never a 5xx.

use serde_json::{Value, json};

use crate::core::{NOWHERE, expect_field_error, json_of};
use crate::helpers::{TestApp, spawn_app};

async fn page(app: &TestApp, path: &str, bearer: &str) -> Value {
    json_of(app.get(path, bearer).await, 200).await
}

store_test! {
async fn cursors_are_opaque_and_a_tampered_one_is_422() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let other = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    for n in 0..3 {
        app.bot_message(&bot, &conv, json!({"text": format!("m{n}")})).await;
    }
    let base = format!("/api/v1/conversations/{}/messages", conv.id);
    let first = page(&app, &format!("{base}?limit=2"), &bot.api_key).await;
    let cursor = first["page"]["next_cursor"].as_str().expect("cursor").to_string();
    assert!(cursor.parse::<i64>().is_err(), "not a bare number: {cursor}");
    assert!(cursor.len() >= 20, "{cursor}");
    assert!(cursor.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "base64url: {cursor}");
    let second = page(&app, &format!("{base}?limit=2&cursor={cursor}"), &bot.api_key).await;
    assert_eq!(second["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(second["data"][0]["text"], "m0");

    // Altered, made up, a bare number, or another collection's: 422 /cursor.
    let mut flipped: Vec<char> = cursor.chars().collect();
    flipped[5] = if flipped[5] == 'A' { 'B' } else { 'A' };
    let flipped: String = flipped.into_iter().collect();
    for bad in [flipped.as_str(), "9", "0", "-1", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "%FF%FE", &"x".repeat(5000)] {
        expect_field_error(
            app.get(&format!("{base}?limit=2&cursor={bad}"), &bot.api_key).await,
            "/cursor",
            "invalid_cursor",
        )
        .await;
    }
    // The events log of another chatbot does not take this cursor.
    expect_field_error(
        app.get(&format!("/api/v1/events?cursor={cursor}"), &other.api_key).await,
        "/cursor",
        "invalid_cursor",
    )
    .await;
    expect_field_error(
        app.get(&format!("/api/v1/interactions?cursor={cursor}"), &bot.api_key).await,
        "/cursor",
        "invalid_cursor",
    )
    .await;
}
}
