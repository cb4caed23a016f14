//! Property tests of the pure checks every request goes through: for any
//! input, a typed value or errors with JSON pointers — never a panic.

use std::time::Duration;

use blockhook::domain::blocks::{Bound, Field, FieldKind, SelectOption};
use blockhook::domain::error::Rejection;
use blockhook::domain::{duration, values};
use blockhook::usecase::error::AppError;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Any JSON value, a few levels deep, with awkward strings and numbers.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("on"),
            Just("off"),
            Just("true"),
            Just("1e309"),
            Just("-0"),
            Just(" 12 "),
            Just("NaN"),
            Just("a@b.c"),
            Just("\u{0}"),
            Just("0x10"),
            Just("9999999999999999999999")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn any_kind() -> impl Strategy<Value = FieldKind> {
    prop::sample::select(FieldKind::ALL.to_vec())
}

fn any_field() -> impl Strategy<Value = Field> {
    (
        "[a-z]{1,4}",
        any_kind(),
        any::<bool>(),
        proptest::option::of(-1e6f64..1e6),
        proptest::option::of(-1e6f64..1e6),
        proptest::option::of(prop::collection::vec("[a-z]{0,3}", 0..4)),
    )
        .prop_map(|(name, kind, required, min, max, options)| Field {
            label: name.clone(),
            name,
            kind,
            required,
            min: min.map(Bound::Number),
            max: max.map(Bound::Number),
            options: options.map(|o| {
                o.into_iter()
                    .map(|v| SelectOption {
                        label: v.clone(),
                        value: v,
                    })
                    .collect()
            }),
            ..Field::default()
        })
}

fn field_input() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(
        "[a-z]{1,4}",
        prop_oneof![any_json(), "[0-9.eE+-]{0,8}".prop_map(Value::String)],
        0..6,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Form values: every field typed by its kind, or errors under `/values`.
    #[test]
    fn form_values_are_typed_or_refused_with_pointers(
        fields in prop::collection::vec(any_field(), 0..6),
        input in field_input(),
    ) {
        // Names are unique in a stored form (the block check sees to it).
        let mut fields = fields;
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        fields.dedup_by(|a, b| a.name == b.name);
        match values::check(&fields, &input, "/values") {
            Ok(out) => {
                prop_assert_eq!(out.len(), fields.len());
                for f in &fields {
                    let v = out.get(&f.name);
                    prop_assert!(v.is_some(), "missing {}", f.name);
                    let v = v.unwrap_or(&Value::Null);
                    prop_assert!(declared_type(f, v), "{}: {:?} is not a {:?}", f.name, v, f.kind);
                }
                for k in input.keys() {
                    prop_assert!(fields.iter().any(|f| &f.name == k), "unknown {} accepted", k);
                }
            }
            Err(errs) => {
                prop_assert!(!errs.is_empty());
                for e in &errs {
                    prop_assert!(e.field.starts_with("/values/"), "{}", e.field);
                    prop_assert!(!e.message.is_empty());
                }
            }
        }
    }

    /// Message bodies with blocks: parsed, or a 422 whose every pointer is
    /// a JSON pointer.
    #[test]
    fn block_definitions_are_checked_without_panicking(body in block_body()) {
        let schema = &blockhook::schemas::Schemas::get().message;
        match blockhook::usecase::content::parse_content(&body, schema) {
            Ok((content, _)) => {
                if let Some(blocks) = content.blocks {
                    let mut ids: Vec<&str> = blocks.iter().map(|b| b.block_id()).collect();
                    prop_assert!(ids.iter().all(|i| !i.is_empty()));
                    ids.sort_unstable();
                    let n = ids.len();
                    ids.dedup();
                    prop_assert_eq!(ids.len(), n, "block ids are unique");
                }
            }
            Err(AppError::Rejected(Rejection::Invalid(errs))) => {
                prop_assert!(!errs.is_empty());
                for e in &errs {
                    prop_assert!(e.field.is_empty() || e.field.starts_with('/'), "{}", e.field);
                }
            }
            Err(other) => prop_assert!(false, "not a validation error: {:?}", other),
        }
    }

    /// Durations: any text or number is a duration of at most 100 years,
    /// or an error.
    #[test]
    fn any_duration_text_parses_or_is_refused(text in ".{0,40}") {
        if let Ok(d) = duration::parse(&text) {
            prop_assert!(d <= duration::MAX);
        }
    }

    #[test]
    fn numeric_duration_texts_parse_or_are_refused(
        n in "[0-9]{1,30}(\\.[0-9]{0,6})?",
        unit in prop_oneof![Just(""), Just("ms"), Just("s"), Just("m"), Just("h"), Just("d"), Just("y")],
    ) {
        let text = format!("{n}{unit}");
        match duration::parse(&text) {
            Ok(d) => prop_assert!(d <= duration::MAX, "{}", text),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    #[test]
    fn any_json_duration_parses_or_is_refused(v in any_json()) {
        if let Ok(d) = duration::from_json(&v) {
            prop_assert!(d <= duration::MAX);
        }
    }

    #[test]
    fn small_durations_are_exact(n in 0u64..10_000, unit in 0usize..5) {
        let (suffix, ms) = [("ms", 1u64), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)][unit];
        let d = duration::parse(&format!("{n}{suffix}"));
        prop_assert_eq!(d, Ok(Duration::from_millis(n * ms)));
    }
}

/// Whether `v` has the JSON type §4 and §14 declare for `f`'s value.
fn declared_type(f: &Field, v: &Value) -> bool {
    match f.kind {
        FieldKind::Text
        | FieldKind::Email
        | FieldKind::Textarea
        | FieldKind::Select
        | FieldKind::Radio
        | FieldKind::Url
        | FieldKind::Tel => v.is_string(),
        FieldKind::Number => v.is_number() || v.is_null(),
        FieldKind::Checkbox => v.is_boolean(),
        FieldKind::Multiselect => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        FieldKind::Date => {
            v.is_null() || v.as_str().is_some_and(|s| values::parse_date(s).is_some())
        }
        FieldKind::Time => {
            v.is_null() || v.as_str().is_some_and(|s| values::parse_time(s).is_some())
        }
        FieldKind::Rating => {
            v.is_null()
                || v.as_i64()
                    .is_some_and(|n| (1..=f.rating_max()).contains(&n))
        }
    }
}

/// One well-formed field of `kind` (as the block check lets through).
fn defined(kind: FieldKind) -> Field {
    let opts = json!([{"value": "a", "label": "A"}, {"value": "b", "label": "B"}, {"value": "c", "label": "C"}]);
    let v = match kind {
        FieldKind::Select | FieldKind::Radio => json!({"options": opts}),
        FieldKind::Multiselect => json!({"options": opts, "min": 1, "max": 2}),
        FieldKind::Date => json!({"min": "2026-01-01", "max": "2026-12-31"}),
        FieldKind::Time => json!({"min": "08:00", "max": "18:00"}),
        FieldKind::Url => json!({"max": 40}),
        FieldKind::Rating => json!({"max": 7}),
        FieldKind::Number => json!({"min": -5, "max": 5}),
        FieldKind::Text | FieldKind::Textarea => json!({"max": 12, "pattern": "[a-z]+[0-9]?"}),
        FieldKind::Email | FieldKind::Checkbox | FieldKind::Tel => json!({}),
    };
    let mut v = v;
    v["name"] = json!("x");
    v["label"] = json!("X");
    v["type"] = serde_json::to_value(kind).unwrap_or_default();
    serde_json::from_value(v).unwrap_or_default()
}

/// Values for any field type: typed, as a browser sends them, or wrong.
fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any_json(),
        "[abcz]".prop_map(Value::String),
        prop::collection::vec("[abcz]", 0..4).prop_map(|v| json!(v)),
        (2025u32..2028, 0u32..14, 0u32..33)
            .prop_map(|(y, m, d)| json!(format!("{y}-{m:02}-{d:02}"))),
        (0u32..26, 0u32..62).prop_map(|(h, m)| json!(format!("{h:02}:{m:02}"))),
        "https?://[a-z]{1,8}\\.com(/[a-z]{0,40})?".prop_map(Value::String),
        "[+]?[0-9 ()-]{0,20}".prop_map(Value::String),
        (-2i64..10).prop_map(Value::from),
        "[0-9]{1,2}".prop_map(Value::String),
        "[a-z]{0,14}[0-9]?".prop_map(Value::String),
        "[a-z]{1,5}@[a-z]{1,5}\\.[a-z]{2}".prop_map(Value::String),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// For every field type: a value validation accepts is typed as
    /// declared, and its typed value is accepted again unchanged (the
    /// event's value round-trips); a refused value names the field.
    #[test]
    fn every_type_accepts_into_its_declared_type_and_round_trips(
        kind in any_kind(),
        required in any::<bool>(),
        value in any_value(),
    ) {
        let mut field = defined(kind);
        field.required = required;
        prop_assert_eq!(field.kind, kind);
        let fields = vec![field.clone()];
        let mut input = Map::new();
        input.insert("x".into(), value.clone());
        match values::check(&fields, &input, "/values") {
            Ok(out) => {
                let typed = out.get("x").cloned().unwrap_or(Value::Null);
                prop_assert!(declared_type(&field, &typed), "{:?}: {} became {}", kind, value, typed);
                let again = values::check(&fields, &out, "/values");
                prop_assert_eq!(again.ok(), Some(out), "{:?}: {} round-trips", kind, value);
            }
            Err(errs) => {
                prop_assert_eq!(errs.len(), 1);
                prop_assert_eq!(&errs[0].field, "/values/x");
            }
        }
    }
}

/// A message body with blocks that are often nearly right: valid shapes
/// with random ids, kinds, sizes and stray keys.
fn block_body() -> impl Strategy<Value = Value> {
    let button = (
        proptest::option::of("[a-z]{0,3}"),
        ".{0,6}",
        proptest::option::of(any_json()),
        proptest::option::of(prop_oneof![
            Just("https://example.com/x".to_string()),
            ".{0,8}"
        ]),
    )
        .prop_map(|(action_id, label, value, url)| {
            let mut b = json!({"type": "button", "label": label});
            if let Some(a) = action_id {
                b["action_id"] = json!(a);
            }
            if let Some(v) = value {
                b["value"] = v;
            }
            if let Some(u) = url {
                b["url"] = json!(u);
            }
            b
        });
    let field = (
        "[a-z]{0,3}",
        prop_oneof![
            Just("text"),
            Just("email"),
            Just("number"),
            Just("select"),
            Just("textarea"),
            Just("checkbox"),
            Just("date")
        ],
        proptest::option::of(any_json()),
        proptest::option::of(any_json()),
        proptest::option::of(prop::collection::vec(any_json(), 0..3)),
    )
        .prop_map(|(name, kind, min, max, options)| {
            let mut f = json!({"name": name, "type": kind, "label": "L"});
            if let Some(m) = min {
                f["min"] = m;
            }
            if let Some(m) = max {
                f["max"] = m;
            }
            if let Some(o) = options {
                f["options"] = Value::Array(o);
            }
            f
        });
    let block = prop_oneof![
        (
            proptest::option::of("[a-z]{0,3}"),
            prop::collection::vec(button, 0..4),
            any::<bool>()
        )
            .prop_map(|(id, elements, d)| {
                let mut b = json!({"type": "actions", "elements": elements, "disable_on_click": d});
                if let Some(id) = id {
                    b["block_id"] = json!(id);
                }
                b
            }),
        (
            proptest::option::of("[a-z]{0,3}"),
            proptest::option::of("[a-z]{0,3}"),
            prop::collection::vec(field, 0..4)
        )
            .prop_map(|(id, form_id, fields)| {
                let mut b = json!({"type": "form", "fields": fields, "submit_label": "Go"});
                if let Some(id) = id {
                    b["block_id"] = json!(id);
                }
                if let Some(f) = form_id {
                    b["form_id"] = json!(f);
                }
                b
            }),
        any_json(),
    ];
    (
        prop::collection::vec(block, 0..4),
        proptest::option::of(".{0,8}"),
    )
        .prop_map(|(blocks, text)| {
            let mut body = json!({"blocks": blocks});
            if let Some(t) = text {
                body["text"] = json!(t);
            }
            body
        })
}
