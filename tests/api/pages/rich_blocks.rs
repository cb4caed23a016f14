//! §14 in a real Chromium: each new field type drawn accessibly at 360 px
//! (screenshots under `target/tmp/screenshots`), a form of every type filled
//! and sent by clicks and typing, and a button's confirm dialog that keeps
//! focus.

use std::time::Duration;

use serde_json::{Value, json};

use super::cdp::{Chrome, Tab};
use crate::helpers::{Bot, Conv, TestApp, spawn_app};

fn widget_url(app: &TestApp, bot: &Bot, conv: &Conv) -> String {
    format!(
        "{}/widget?chatbot={}#conversation_id={}&visitor_token={}",
        app.address, bot.id, conv.id, conv.token
    )
}

/// An expression for the first match of `sel` inside the widget.
fn w(sel: &str) -> String {
    format!(
        "document.querySelector('[data-blockhook-widget]')?.shadowRoot?.querySelector({})",
        json!(sel)
    )
}

fn fixture(kind: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/fields")
        .join(format!("{kind}.json"));
    serde_json::from_str(&std::fs::read_to_string(p).expect("fixture")).expect("json")
}

/// What a screen reader and a phone get from one rendered field.
const FIELD_FACTS: &str = r#"((box) => {
  const fs = box.querySelector('fieldset');
  const controls = [...box.querySelectorAll('input, select, textarea')];
  const labelled = controls.every((c) => c.labels && c.labels.length > 0);
  const hint = box.querySelector('.bh-field-hint');
  const described = hint ? controls.concat(fs ? [fs] : []).some((c) => (c.getAttribute('aria-describedby') || '').includes(hint.id)) : null;
  return {
    fieldset: Boolean(fs), legend: fs ? fs.querySelector('legend')?.textContent : null,
    types: controls.map((c) => c.type), labelled, described,
    fonts: controls.filter((c) => !['radio', 'checkbox'].includes(c.type)).map((c) => parseFloat(getComputedStyle(c).fontSize)),
    srText: [...box.querySelectorAll('.bh-sr')].map((s) => s.textContent),
  };
})"#;

#[actix_web::test]
async fn each_new_field_type_is_drawn_accessibly_at_360_px_with_a_screenshot() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&out).expect("screenshot dir");
    let chrome = Chrome::launch().await;
    for kind in [
        "radio",
        "multiselect",
        "date",
        "time",
        "url",
        "tel",
        "rating",
        "pattern",
        "confirm",
    ] {
        let conv = app.create_conv(&bot).await;
        let body = fixture(kind);
        app.bot_message(&bot, &conv, body.clone()).await;
        let tab = chrome.open(&widget_url(&app, &bot, &conv), 360, 740).await;
        tab.wait_for(&w(".bh-list .bh-block"), kind).await;
        let png = tab.screenshot().await;
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{kind} is a PNG");
        std::fs::write(out.join(format!("blocks-{kind}-360.png")), png).expect("write screenshot");
        // Nothing sticks out of a phone's width.
        let overflow: bool = tab
            .eval(&format!(
                "(() => {{ const b = {}; return b.scrollWidth > b.clientWidth + 1; }})()",
                w(".bh-list .bh-block")
            ))
            .await;
        assert!(!overflow, "{kind}: the block overflows at 360 px");
        if kind == "confirm" {
            tab.close().await;
            continue;
        }
        let field = &body["blocks"][0]["fields"][0];
        let facts: Value = tab
            .eval(&format!("{FIELD_FACTS}({})", w(".bh-field")))
            .await;
        let group = matches!(kind, "radio" | "multiselect" | "rating");
        assert_eq!(facts["fieldset"], group, "{kind}: {facts}");
        if group {
            assert_eq!(
                facts["legend"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_end_matches(" *"),
                field["label"].as_str().unwrap(),
                "{kind}: {facts}"
            );
        }
        let want_type = match kind {
            "radio" | "rating" => "radio",
            "multiselect" => "checkbox",
            "pattern" => "text",
            other => other,
        };
        let types = facts["types"].as_array().unwrap();
        assert!(
            !types.is_empty() && types.iter().all(|t| t == want_type),
            "{kind}: {facts}"
        );
        assert_eq!(
            facts["labelled"], true,
            "{kind}: every control has a label: {facts}"
        );
        if field.get("hint").is_some() {
            assert_eq!(
                facts["described"], true,
                "{kind}: the hint is read with it: {facts}"
            );
        }
        for f in facts["fonts"].as_array().unwrap() {
            assert!(f.as_f64().unwrap() >= 16.0, "{kind}: font {f} < 16 px");
        }
        if kind == "rating" {
            assert_eq!(facts["srText"][0], "1 of 5", "{facts}");
        }
        tab.close().await;
    }
    chrome.close().await;
}

async fn click(tab: &Tab, sel: &str) {
    tab.eval::<Value>(&format!("{}.click()", w(sel))).await;
}

#[actix_web::test]
async fn a_form_of_every_new_type_is_filled_and_sent_from_the_widget() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let conv = app.create_conv(&bot).await;
    app.bot_message(&bot, &conv, crate::blocks::every_type_form(true))
        .await;
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&widget_url(&app, &bot, &conv), 360, 740).await;
    tab.wait_for(&w("form.bh-form"), "the form").await;
    // The defaults are shown pre-filled.
    let pre: Value = tab
        .eval(&format!(
            "[{}.checked, {}.checked, {}.value]",
            w("input[name=r][value=a]"),
            w("input[name=m][value=b]"),
            w("input[name=t]")
        ))
        .await;
    assert_eq!(pre, json!([true, true, "10:00"]));
    click(&tab, "input[name=r][value=c]").await;
    click(&tab, "input[name=m][value=b]").await; // off again
    click(&tab, "input[name=m][value=a]").await;
    click(&tab, "input[name=m][value=c]").await;
    click(&tab, "input[name=s][value='4']").await;
    let set = |name: &str, v: &str| {
        format!(
            "(() => {{ const el = {}; el.value = {}; el.dispatchEvent(new Event('input', {{bubbles: true}})); return el.value; }})()",
            w(&format!("[name={name}]")),
            json!(v)
        )
    };
    for (name, v) in [
        ("d", "2026-07-01"),
        ("t", "09:30"),
        ("u", "https://example.com/help"),
        ("p", "+1 555 010 9999"),
        ("o", "ORD-123"),
    ] {
        let got: String = tab.eval(&set(name, v)).await;
        assert_eq!(got, v, "{name} takes {v}");
    }
    click(&tab, "form.bh-form button[type=submit]").await;
    tab.wait_for(
        &format!("{}?.textContent === 'Sent.'", w("form.bh-form .bh-state")),
        "the form sent",
    )
    .await;
    let mut e = Vec::new();
    for _ in 0..200 {
        e = app.events(&bot).await;
        if !e.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        e[0]["payload"]["values"],
        json!({"r": "c", "m": ["a", "c"], "d": "2026-07-01", "t": "09:30",
               "u": "https://example.com/help", "p": "+1 555 010 9999", "s": 4, "o": "ORD-123"})
    );
    chrome.close().await;
}

#[actix_web::test]
async fn a_confirm_dialog_keeps_focus_and_only_a_confirmation_sends_the_click() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let conv = app.create_conv(&bot).await;
    app.bot_message(&bot, &conv, fixture("confirm")).await;
    let chrome = Chrome::launch().await;
    let tab = chrome.open(&widget_url(&app, &bot, &conv), 360, 740).await;
    tab.wait_for(&w("[data-action-id=cancel]"), "the button")
        .await;
    let root = "document.querySelector('[data-blockhook-widget]').shadowRoot";
    let state = format!(
        "(() => {{ const d = {root}.querySelector('dialog'); const a = {root}.activeElement; \
         return {{open: Boolean(d && d.open), modal: Boolean(d && d.matches(':modal')), \
         focusInside: Boolean(d && a && d.contains(a)), focused: a ? a.textContent : null, \
         title: d ? d.querySelector('h2').textContent : null, text: d ? d.querySelector('p').textContent : null, \
         labelled: d ? d.getAttribute('aria-labelledby') === d.querySelector('h2').id : null}}; }})()"
    );

    click(&tab, "[data-action-id=cancel]").await;
    tab.wait_for(
        &format!("{root}.querySelector('dialog')?.open"),
        "the dialog",
    )
    .await;
    let s: Value = tab.eval(&state).await;
    assert_eq!(s["open"], true);
    assert_eq!(
        s["modal"], true,
        "a modal dialog: the rest of the page is inert"
    );
    assert_eq!(s["focusInside"], true, "{s}");
    assert_eq!(s["focused"], "Keep it", "the safe choice has focus: {s}");
    assert_eq!(s["title"], "Cancel the subscription?");
    assert_eq!(s["labelled"], true);
    // Tab moves within the dialog (the browser keeps a modal's focus in it).
    let keys = chromiumoxide_keys(&tab).await;
    assert!(
        keys.iter().all(|inside| *inside),
        "focus left the dialog: {keys:?}"
    );
    // Deny: nothing sent, focus back on the button.
    click(&tab, "dialog button[value=deny]").await;
    tab.wait_for(
        &format!("!{root}.querySelector('dialog')"),
        "the dialog closed",
    )
    .await;
    let back: String = tab
        .eval(&format!("{root}.activeElement?.dataset.actionId || ''"))
        .await;
    assert_eq!(back, "cancel");
    assert!(
        app.events(&bot).await.is_empty(),
        "a denied click sends nothing"
    );

    // Confirm: the click goes out as usual.
    click(&tab, "[data-action-id=cancel]").await;
    tab.wait_for(
        &format!("{root}.querySelector('dialog')?.open"),
        "the dialog again",
    )
    .await;
    click(&tab, "dialog button[value=confirm]").await;
    tab.wait_for(
        &format!(
            "{}?.getAttribute('aria-pressed') === 'true'",
            w("[data-action-id=cancel]")
        ),
        "the chosen button",
    )
    .await;
    let mut e = Vec::new();
    for _ in 0..200 {
        e = app.events(&bot).await;
        if !e.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(e[0]["payload"]["action_id"], "cancel");
    chrome.close().await;
}

/// Presses Tab a few times in the open dialog; whether focus stayed inside
/// after each press.
async fn chromiumoxide_keys(tab: &Tab) -> Vec<bool> {
    let mut out = Vec::new();
    for _ in 0..4 {
        tab.press_tab().await;
        let inside: bool = tab
            .eval("(() => { const r = document.querySelector('[data-blockhook-widget]').shadowRoot; const d = r.querySelector('dialog'); return Boolean(d && r.activeElement && d.contains(r.activeElement)); })()")
            .await;
        out.push(inside);
    }
    out
}
