//! §17 the customer portal in a real headless Chromium: framed by the
//! business's admin app on another origin (and refused on an origin its
//! chatbot does not allow), its chatbot's data and never another's, at
//! 360 px and 1280 px, in dark mode, read-only, and with an expired or
//! altered link; axe-core finds nothing.

use serde_json::{Value, json};

use super::driver::{no_violations, run};
use super::site::Site;
use crate::helpers::{ADMIN_TOKEN, Bot, TestApp, spawn_app};
use crate::portal::{link, token_of};

async fn bot_with_origins(app: &TestApp, name: &str, origins: Value) -> Bot {
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": name, "webhook_url": "http://127.0.0.1:9/hook", "allowed_origins": origins}),
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

async fn test_event(app: &TestApp, bot: &Bot) -> String {
    let r = app
        .post("/api/v1/events/test", &bot.api_key, &json!({}))
        .await;
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.expect("json");
    v["event_id"].as_str().expect("id").to_string()
}

pub(super) fn admin_page(portal_url: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shop admin</title><style>body {{ margin: 0; }} iframe {{ border: 0; width: 100%; height: 1400px; }}</style></head>
<body><iframe title="Webhooks" src="{portal_url}"></iframe></body></html>"#
    )
}

#[actix_web::test]
async fn the_portal_in_a_frame_on_another_origin_shows_its_chatbot_only() {
    let app = spawn_app().await;
    let admin = Site::start().await;
    let stranger = Site::start().await;
    let a = bot_with_origins(&app, "Plant shop", json!([admin.origin])).await;
    let b = bot_with_origins(&app, "Other shop", json!(["*"])).await;
    let a_event = test_event(&app, &a).await;
    let b_event = test_event(&app, &b).await;
    let (s, l) = link(&app, &a, json!({})).await;
    assert_eq!(s, 201);
    let url = l["url"].as_str().expect("url").to_string();
    let allowed_page = admin.put("/webhooks", admin_page(&url));
    let refused_page = stranger.put("/webhooks", admin_page(&url));

    let out = run(
        "portal_frame",
        json!({"allowed_page": allowed_page, "refused_page": refused_page, "a_event": a_event}),
    )
    .await;
    for view in ["light-1280", "light-360", "dark-360"] {
        let v = &out[view];
        assert_eq!(
            v["rows"],
            json!([a_event]),
            "{view}: chatbot A's events only"
        );
        let text = v["text"].as_str().expect("text");
        assert!(
            !text.contains(&b_event) && !text.contains("Other shop"),
            "{view}: {text}"
        );
        assert!(
            text.contains("http://127.0.0.1:9/hook"),
            "{view}: its endpoint"
        );
        assert_eq!(v["title"], "Plant shop — webhooks");
        assert!(
            v["overflow"]["scrollWidth"].as_i64() <= v["overflow"]["clientWidth"].as_i64(),
            "{view}: {}",
            v["overflow"]
        );
        let detail = v["detail"].as_str().expect("detail");
        assert!(
            detail.contains("Redeliver") && detail.contains('#'),
            "{view}: {detail}"
        );
        assert!(v["buttons"].as_i64() > Some(0), "{view}: its actions");
        no_violations(view, &v["axe"]);
    }
    assert_eq!(out["light-360"]["background"], "rgb(246, 247, 249)");
    assert_eq!(
        out["dark-360"]["background"], "rgb(15, 17, 21)",
        "dark mode"
    );
    // Framed from an origin the chatbot does not allow: refused by the browser.
    assert_eq!(out["refusedRows"], 0, "{}", out["refusedFrames"]);
    assert!(
        out["refusedFrames"].as_array().is_some_and(|f| f
            .iter()
            .any(|u| u.as_str().is_some_and(|u| u.starts_with("chrome-error:")))),
        "{}",
        out["refusedFrames"]
    );
    admin.stop().await;
    stranger.stop().await;
}

#[actix_web::test]
async fn a_read_only_portal_link_shows_and_offers_no_change() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    test_event(&app, &bot).await;
    let (_, l) = link(&app, &bot, json!({"read_only": true})).await;
    let out = run("portal_read_only", json!({"portal_url": l["url"]})).await;
    assert_eq!(out["mode"], true, "the read-only badge");
    assert_eq!(out["rows"], 1);
    assert_eq!(out["buttons"], json!([]), "no button changes anything");
    no_violations("read-only", &out["axe"]);
}

#[actix_web::test]
async fn expired_and_altered_portal_links_show_why_and_no_data() {
    use blockhook::domain::token::portal::{PortalGrant, PortalKind};
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    test_event(&app, &bot).await;
    let hex = crate::helpers::open_store(&app)
        .await
        .meta_get_or_init("server_key", String::new())
        .await
        .expect("key");
    let key = blockhook::domain::token::TokenKey::new(
        &data_encoding::HEXLOWER.decode(hex.as_bytes()).expect("hex"),
    );
    let past = PortalGrant {
        chatbot_id: blockhook::domain::ids::ChatbotId::stored(bot.id.clone()),
        expires_at: chrono::Utc::now().timestamp_millis() - 60_000,
        read_only: false,
    };
    let expired = format!(
        "{}/portal#{}",
        app.address,
        key.issue_portal(PortalKind::Link, &past)
    );
    let out = run("portal_refused_link", json!({"portal_url": expired})).await;
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired")),
        "{out}"
    );
    assert_eq!(out["appHidden"], true);
    assert_eq!(out["rows"], 0);
    no_violations("expired", &out["axe"]);

    let (_, l) = link(&app, &bot, json!({})).await;
    let token = token_of(l["url"].as_str().expect("url"));
    let altered = format!("{}/portal#{}x", app.address, token);
    let out = run("portal_refused_link", json!({"portal_url": altered})).await;
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("not valid")),
        "{out}"
    );
    assert_eq!(out["rows"], 0);
}
