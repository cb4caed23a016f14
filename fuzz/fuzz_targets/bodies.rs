//! Click, form and response_url bodies: any bytes go through the checks a
//! request body meets, which must answer (typed value or field errors),
//! never panic.
#![no_main]

use blockhook::domain::{blocks::Field, duration, text, values};
use blockhook::http::messages::parse_content;
use blockhook::schemas::Schemas;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn form() -> Vec<Field> {
    serde_json::from_str(
        r#"[{"name": "full_name", "type": "text", "label": "Name", "required": true, "min": 2, "max": 10},
            {"name": "email", "type": "email", "label": "Email", "required": true},
            {"name": "team_size", "type": "number", "label": "Team size", "min": 1, "max": 10000},
            {"name": "topic", "type": "select", "label": "Topic",
             "options": [{"value": "sales", "label": "Sales"}, {"value": "other", "label": "Other"}]},
            {"name": "details", "type": "textarea", "label": "Details", "max": 2000},
            {"name": "consent", "type": "checkbox", "label": "I agree", "required": true}]"#,
    )
    .unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = text::first_nul(&body);
    let _ = text::canonical(&body);
    // A response_url reply and a bot message.
    let s = Schemas::get();
    let _ = parse_content(&body, &s.reply);
    let _ = parse_content(&body, &s.message);
    if let Value::Object(map) = &body {
        // A form submit: `values` (or the whole body) against a form.
        let fields = form();
        let input = match map.get("values") {
            Some(Value::Object(v)) => v.clone(),
            _ => map.clone(),
        };
        let _ = values::check(&fields, &input, "/values");
        // A click: its strings, and any duration in it.
        for (k, v) in map {
            let _ = duration::from_json(v);
            let _ = k.len();
        }
    }
});
