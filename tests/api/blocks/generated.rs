//! Generated values over the real app, a small number of cases per store:
//! what validation accepts arrives in the event with its declared type;
//! what it refuses answers 422, and nothing is stored or sent.

use blockhook::domain::blocks::{Field, FieldKind};
use blockhook::domain::values;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value, json};

use super::{SUBMITTED, every_type_form};
use crate::helpers::*;

const CASES: usize = 24;

/// A value for field `name` of the every-type form: often valid, often
/// nearly so, sometimes of the wrong JSON type.
fn candidate() -> impl Strategy<Value = (String, Value)> {
    let any_small = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..12).prop_map(Value::from),
        "[ -~]{0,8}".prop_map(Value::String),
    ];
    prop_oneof![
        (
            "r",
            prop_oneof!["[abcz]".prop_map(Value::String), any_small.clone()]
        )
            .boxed(),
        (
            "m",
            prop_oneof![
                prop::collection::vec("[abcz]", 0..4).prop_map(|v| json!(v)),
                any_small.clone()
            ]
        )
            .boxed(),
        (
            "d",
            prop_oneof![
                (2025u32..2028, 0u32..14, 0u32..33)
                    .prop_map(|(y, m, d)| json!(format!("{y}-{m:02}-{d:02}"))),
                any_small.clone()
            ]
        )
            .boxed(),
        (
            "t",
            prop_oneof![
                (0u32..26, 0u32..62).prop_map(|(h, m)| json!(format!("{h:02}:{m:02}"))),
                any_small.clone()
            ]
        )
            .boxed(),
        (
            "u",
            prop_oneof![
                "(https?|ftp|javascript)://[a-z]{0,6}(\\.com)?(/[a-z ]{0,60})?"
                    .prop_map(Value::String),
                any_small.clone()
            ]
        )
            .boxed(),
        (
            "p",
            prop_oneof![
                "[+]?[0-9 ()a-]{0,20}".prop_map(Value::String),
                any_small.clone()
            ]
        )
            .boxed(),
        (
            "s",
            prop_oneof![
                (-1i64..8).prop_map(Value::from),
                "[0-9.]{0,3}".prop_map(Value::String),
                any_small.clone()
            ]
        )
            .boxed(),
        (
            "o",
            prop_oneof!["(ORD|ord)-[0-9]{2,4}".prop_map(Value::String), any_small]
        )
            .boxed(),
    ]
    .prop_map(|(name, v)| (name.to_string(), v))
}

/// The JSON type §14 declares for a field's value.
fn has_declared_type(kind: FieldKind, v: &Value) -> bool {
    match kind {
        FieldKind::Radio | FieldKind::Url | FieldKind::Tel | FieldKind::Text => v.is_string(),
        FieldKind::Multiselect => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        FieldKind::Date => v.is_null() || v.as_str().is_some_and(|s| s.len() == 10),
        FieldKind::Time => v.is_null() || v.as_str().is_some_and(|s| s.len() == 5),
        FieldKind::Rating => v.is_null() || v.as_i64().is_some_and(|n| (1..=5).contains(&n)),
        _ => true,
    }
}

store_test! {
async fn generated_values_are_typed_in_the_event_or_refused_without_a_trace() {
    let app = spawn_app().await;
    let bot = app.create_bot(crate::core::NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.bot_message(&bot, &conv, every_type_form(false)).await;
    let mid = m["id"].as_str().unwrap().to_string();
    let fields: Vec<Field> = serde_json::from_value(m["blocks"][0]["fields"].clone()).unwrap();

    let mut runner = TestRunner::deterministic();
    let strategy = candidate();
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..CASES {
        let (name, value) = strategy.new_tree(&mut runner).unwrap().current();
        let mut input = Map::new();
        input.insert(name.clone(), value.clone());
        let before = app.events(&bot).await.len();
        let r = app.submit(&conv, &mid, "f", Value::Object(input.clone())).await;
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        let after: Vec<Value> = app.events(&bot).await;
        match values::check(&fields, &input, "/values") {
            Ok(typed) => {
                accepted += 1;
                assert_eq!(status, 200, "{name}={value}: {body}");
                assert_eq!(after.len(), before + 1, "{name}={value}: one event");
                let e = &after[0];
                assert_eq!(e["type"], SUBMITTED);
                assert_eq!(e["payload"]["values"], Value::Object(typed), "{name}={value}");
                let kind = fields.iter().find(|f| f.name == name).unwrap().kind;
                let got = &e["payload"]["values"][&name];
                assert!(has_declared_type(kind, got), "{name}={value} became {got}");
            }
            Err(errs) => {
                refused += 1;
                assert_eq!(status, 422, "{name}={value}: {body}");
                assert_eq!(body["errors"][0]["field"], errs[0].field, "{name}={value}");
                assert_eq!(after.len(), before, "{name}={value}: nothing sent");
                let state = &body.get("message").cloned().unwrap_or(Value::Null);
                assert!(state.is_null(), "no message in a refusal");
            }
        }
    }
    assert!(accepted > 0 && refused > 0, "both kinds generated: {accepted} / {refused}");
}
}
