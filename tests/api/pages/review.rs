//! The dashboard's conversations and manual sends in a real headless
//! Chromium, on both stores: the list searched by visitor, text and id,
//! a transcript with each question's state and answer, "Send test event"
//! and "Redeliver" to a down endpoint showing the error at once; at
//! 1280 px and 360 px, nothing overflowing, axe-core finding nothing.
//! Screenshots: `dashboard-conversations-{1280,360}.png` (see `driver`).

use serde_json::json;

use super::driver::{no_violations, run as drive};
use crate::helpers::{Conv, spawn_app};

store_test! {
async fn a_reviewer_searches_reads_a_transcript_and_tests_a_down_endpoint() {
    let app = spawn_app().await;
    // Nothing listens on port 9: the endpoint is down.
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let say = |conv: &Conv, text: &'static str| {
        let (path, token) = (format!("/widget/v1/conversations/{}/messages", conv.id), conv.token.clone());
        let app = &app;
        async move {
            let r = app.post(&path, &token, &json!({ "text": text })).await;
            assert_eq!(r.status(), 201);
        }
    };
    let ada = app.create_conv(&bot).await;
    say(&ada, "Can I get pricing for 12 seats?").await;
    let m = app.buttons(&bot, &ada, true).await;
    let r = app.click(&ada, m["id"].as_str().expect("id"), "b1", "approve").await;
    assert_eq!(r.status(), 200);
    app.buttons(&bot, &ada, true).await;
    let bob = app.create_conv(&bot).await;
    say(&bob, "hello there").await;
    app.buttons(&bot, &bob, true).await;
    let r = app
        .post(&format!("/api/v1/conversations/{}/takeover", bob.id), &bot.api_key, &json!({}))
        .await;
    assert_eq!(r.status(), 200);
    let ada_visitor = ada.visitor["id"].as_str().expect("visitor id").to_string();
    let bob_name = bob.visitor["display_name"].as_str().expect("name").to_string();

    let out = drive(
        "dashboard_review",
        json!({
            "url": app.address, "token": bot.api_key, "open": ada.id, "closed": bob.id,
            "searches": {"text": "PRICING", "visitor": ada_visitor, "name": bob_name, "id": bob.id},
            "expect": {"text": [ada.id], "visitor": [ada.id], "name": [bob.id], "id": [bob.id]},
        }),
    )
    .await;
    for size in ["1280", "360"] {
        let v = &out[size];
        assert_eq!(v["pageErrors"], json!([]), "{size}: {v}");
        assert_eq!(v["listed"], json!([bob.id, ada.id]), "{size}: newest first");
        for (name, want) in [("text", &ada.id), ("visitor", &ada.id), ("name", &bob.id), ("id", &bob.id)] {
            assert_eq!(v["searches"][name], json!([want]), "{size}: search by {name}: {v}");
        }
        assert!(v["noMatch"].as_str().is_some_and(|t| t.starts_with("No conversation matches")), "{v}");

        // The transcript in order, with each block's state and answer.
        let t = v["transcript"].as_array().expect("transcript");
        assert_eq!(t.len(), 3, "{size}: {v}");
        assert_eq!(t[0]["from"], "from-visitor");
        assert_eq!(t[0]["text"], "Can I get pricing for 12 seats?");
        assert_eq!(t[1]["from"], "from-bot");
        assert_eq!(t[1]["states"][0][0], "answered", "{v}");
        assert!(t[1]["states"][0][1].as_str().is_some_and(|s| s.contains("“Approve”")), "{v}");
        assert_eq!(t[1]["chosen"], json!(["Approve"]));
        assert_eq!(t[2]["states"][0][0], "pending", "{v}");
        assert!(v["closedState"].as_str().is_some_and(|s| s.contains("took over")), "{v}");

        // A test and a redelivery to the down endpoint: the error, at once —
        // seconds, not the breaker's rest of minutes (the bound leaves room
        // for a loaded machine).
        let test = v["testResult"].as_str().expect("test result");
        assert!(test.starts_with("The endpoint did not accept the test event: E_CONNECTION"), "{size}: {test}");
        assert!(v["testMs"].as_i64().is_some_and(|ms| ms < 10_000), "{size}: {v}");
        let redelivered = v["redeliverResult"].as_str().expect("redeliver result");
        assert!(redelivered.contains("E_CONNECTION") && redelivered.contains(" ms (attempt #"), "{size}: {redelivered}");
        assert!(v["redeliverMs"].as_i64().is_some_and(|ms| ms < 10_000), "{size}: {v}");

        let o = &v["overflow"];
        assert!(o["scrollWidth"].as_i64() <= o["clientWidth"].as_i64(), "{size}: {o}");
        no_violations(&format!("dashboard conversations at {size} px"), &v["axe"]);
    }
}
}
