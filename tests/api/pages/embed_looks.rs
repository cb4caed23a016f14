//! §9 The embedded widget's looks: isolated from a hostile page's CSS in
//! both directions, legible, and as screenshots for the docs.

use serde_json::{Value, json};

use super::cdp::Chrome;
use super::site::{Site, bot_for, open_panel, post_bot_message, q, shop_page};
use crate::helpers::spawn_app;

/// Computed styles of the launcher and of the panel's parts, as the
/// visitor's browser applies them.
const STYLES: &str = r#"(() => {
  const root = document.querySelector('[data-blockhook-launcher]').shadowRoot;
  // Styles as they settle: a colour still in its 0.12 s transition (the
  // send button turning on as the panel opens) is not the widget's style.
  for (const a of [...document.getAnimations(), ...root.getAnimations()]) {
    try { a.finish(); } catch (_) { /* an endless animation keeps running */ }
  }
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

/// WCAG 2 contrast of an element's text against its header's background.
const CONTRAST: &str = r#"(() => {
  const root = document.querySelector('[data-blockhook-launcher]').shadowRoot;
  const rgb = (s) => s.match(/[\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const bg = rgb(getComputedStyle(root.querySelector('.bh-header')).backgroundColor);
  return ['.bh-header .bh-link', '.bh-title'].map((s) => ratio(rgb(getComputedStyle(root.querySelector(s)).color), bg));
})()"#;

#[actix_web::test]
async fn the_new_conversation_link_meets_wcag_aa_contrast() {
    let app = spawn_app().await;
    let site = Site::start().await;
    let bot = bot_for(&app, "http://127.0.0.1:9/hook", json!(["*"])).await;
    let url = site.put("/", shop_page(&app.url("/widget.js"), &bot, "", ""));
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&url, 1280, 800).await;
    open_panel(&tab, &bot).await;
    let ratios: Vec<f64> = tab.eval(CONTRAST).await;
    for r in &ratios {
        assert!(
            *r >= 4.5,
            "contrast {r:.2}:1 is under AA's 4.5:1 ({ratios:?})"
        );
    }
    let favicon = app
        .client
        .get(app.url("/favicon.ico"))
        .send()
        .await
        .expect("favicon");
    assert_eq!(favicon.status(), 200);
    chrome.close().await;
    site.stop().await;
}
