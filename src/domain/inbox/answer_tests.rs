//! A reviewer's answer (`action_from_answer`) and what is recorded and
//! returned for it (`response_of`, `ask_answer`), on their own: the
//! variants of §6, the pointer and code of each refusal, and the round trip
//! answer → action → response → what `ask` returns.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::{
    APPROVAL, CHOICE, CONFIRMATION, Spec, TEXT, action_from_answer, ask_answer, response_of,
};
use crate::domain::blocks::Block;
use crate::domain::error::Rejection;
use crate::domain::interact::Action;
use crate::domain::model::Message;

fn block(v: Value) -> Block {
    serde_json::from_value(v).unwrap()
}

/// An ask's message: an accept/decline group (`yn`), a group of options
/// (`pick`: `eu`, `us`, a link), a form of one text field (`note`) and a
/// form of checkboxes (`many`: `a`, `b`).
fn message() -> Message {
    let mut m = super::tests::message(true);
    m.blocks = vec![
        block(json!({"type": "actions", "block_id": "yn", "elements": [
            {"type": "button", "action_id": "accept", "label": "Yes"},
            {"type": "button", "action_id": "decline", "label": "No"}
        ]})),
        block(json!({"type": "actions", "block_id": "pick", "elements": [
            {"type": "button", "action_id": "eu", "label": "Europe"},
            {"type": "button", "action_id": "us", "label": "America"},
            {"type": "button", "action_id": "docs", "label": "Docs", "url": "https://example.com"}
        ]})),
        block(
            json!({"type": "form", "block_id": "bn", "form_id": "note", "fields": [
                {"name": "custom", "type": "text", "label": "Your answer", "required": true}
            ]}),
        ),
        block(
            json!({"type": "form", "block_id": "bm", "form_id": "many", "fields": [
                {"name": "a", "type": "checkbox", "label": "A"},
                {"name": "b", "type": "checkbox", "label": "B"}
            ]}),
        ),
    ];
    m
}

fn spec(block_id: &str) -> Spec {
    Spec {
        block_id: block_id.into(),
        ask: true,
        ..Spec::default()
    }
}

fn answer(kind: &str, spec: &Spec, body: Value) -> Result<Action, Rejection> {
    action_from_answer(kind, spec, &message(), &body)
}

/// The one field a refusal names, with its code.
fn refused_at(r: Result<Action, Rejection>) -> (String, &'static str) {
    match r {
        Err(Rejection::Invalid(errs)) if errs.len() == 1 => (errs[0].field.clone(), errs[0].code),
        other => panic!("expected one invalid field, got {other:?}"),
    }
}

fn click(block: &str, action: &str, comment: Option<&str>) -> Action {
    Action::Click {
        block_id: block.into(),
        action_id: action.into(),
        comment: comment.map(str::to_string),
    }
}

fn same(a: &Action, b: &Action) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[test]
fn a_confirmation_becomes_the_accept_or_decline_click() {
    let s = spec("yn");
    for (yes, id) in [(true, "accept"), (false, "decline")] {
        let a = answer(
            CONFIRMATION,
            &s,
            json!({"type": "confirmation", "confirmed": yes}),
        )
        .unwrap();
        assert!(same(&a, &click("yn", id, None)), "{a:?}");
    }
    assert_eq!(
        refused_at(answer(CONFIRMATION, &s, json!({"type": "confirmation"}))),
        ("/confirmed".into(), "required")
    );
    assert_eq!(
        refused_at(answer(
            CONFIRMATION,
            &s,
            json!({"type": "confirmation", "confirmed": "yes"})
        )),
        ("/confirmed".into(), "invalid_type")
    );
    assert_eq!(
        refused_at(answer(
            CONFIRMATION,
            &s,
            json!({"type": "confirmation", "confirmed": true, "why": 1})
        )),
        ("/why".into(), "unknown_field")
    );
}

#[test]
fn an_approval_takes_a_comment_only_with_a_decline() {
    let s = spec("yn");
    let a = answer(
        APPROVAL,
        &s,
        json!({"type": "approval", "approved": false, "comment": "too big"}),
    )
    .unwrap();
    assert!(same(&a, &click("yn", "decline", Some("too big"))), "{a:?}");
    let a = answer(
        APPROVAL,
        &s,
        json!({"type": "approval", "approved": true, "comment": null}),
    )
    .unwrap();
    assert!(same(&a, &click("yn", "accept", None)), "{a:?}");
    assert_eq!(
        refused_at(answer(
            APPROVAL,
            &s,
            json!({"type": "approval", "approved": true, "comment": "fine"})
        )),
        ("/comment".into(), "not_allowed")
    );
    assert_eq!(
        refused_at(answer(
            APPROVAL,
            &s,
            json!({"type": "approval", "approved": false, "comment": 3})
        )),
        ("/comment".into(), "invalid_type")
    );
}

#[test]
fn the_variant_must_be_the_interactions_type_and_the_body_an_object() {
    let s = spec("yn");
    assert_eq!(
        answer(
            CONFIRMATION,
            &s,
            json!({"type": "approval", "approved": true})
        )
        .unwrap_err(),
        Rejection::TypeMismatch(CONFIRMATION.into())
    );
    assert_eq!(
        refused_at(answer(CONFIRMATION, &s, json!({"confirmed": true}))),
        ("/type".into(), "required")
    );
    assert_eq!(
        refused_at(answer(CONFIRMATION, &s, json!({"type": 1}))),
        ("/type".into(), "invalid_type")
    );
    assert_eq!(
        refused_at(answer(CONFIRMATION, &s, json!([true]))),
        ("".into(), "invalid_type")
    );
}

#[test]
fn a_choice_names_one_button_of_its_group() {
    let s = spec("pick");
    let a = answer(CHOICE, &s, json!({"type": "choice", "option_ids": ["us"]})).unwrap();
    assert!(same(&a, &click("pick", "us", None)), "{a:?}");
    for (body, at, code) in [
        (
            json!({"type": "choice", "option_ids": ["asia"]}),
            "/option_ids/0",
            "invalid_option",
        ),
        (
            json!({"type": "choice", "option_ids": ["docs"]}),
            "/option_ids/0",
            "invalid_option",
        ),
        (
            json!({"type": "choice", "option_ids": ["eu", "us"]}),
            "/option_ids/1",
            "too_many",
        ),
        (
            json!({"type": "choice", "option_ids": []}),
            "/option_ids",
            "required",
        ),
        (
            json!({"type": "choice", "option_ids": ["eu", 2]}),
            "/option_ids/1",
            "invalid_type",
        ),
        (
            json!({"type": "choice", "option_ids": "eu"}),
            "/option_ids",
            "invalid_type",
        ),
        (json!({"type": "choice"}), "/option_ids", "required"),
    ] {
        assert_eq!(
            refused_at(answer(CHOICE, &s, body.clone())),
            (at.into(), code),
            "{body}"
        );
    }
}

#[test]
fn a_multiple_choice_ticks_the_boxes_of_its_form() {
    let s = Spec {
        form_id: Some("many".into()),
        multiple: true,
        ..spec("bm")
    };
    match answer(
        CHOICE,
        &s,
        json!({"type": "choice", "option_ids": ["a", "b"]}),
    )
    .unwrap()
    {
        Action::Submit { form_id, values } => {
            assert_eq!(form_id, "many");
            assert_eq!(Value::Object(values), json!({"a": true, "b": true}));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        refused_at(answer(
            CHOICE,
            &s,
            json!({"type": "choice", "option_ids": ["a", "c"]})
        )),
        ("/option_ids/1".into(), "invalid_option")
    );
}

#[test]
fn a_custom_answer_goes_to_the_free_text_form_only_when_the_ask_allowed_it() {
    let with = Spec {
        custom_form_id: Some("note".into()),
        ..spec("pick")
    };
    match answer(CHOICE, &with, json!({"type": "choice", "custom": "Asia"})).unwrap() {
        Action::Submit { form_id, values } => {
            assert_eq!(form_id, "note");
            assert_eq!(Value::Object(values), json!({"custom": "Asia"}));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        refused_at(answer(
            CHOICE,
            &spec("pick"),
            json!({"type": "choice", "custom": "Asia"})
        )),
        ("/custom".into(), "not_allowed")
    );
    assert_eq!(
        refused_at(answer(
            CHOICE,
            &with,
            json!({"type": "choice", "custom": "  "})
        )),
        ("/custom".into(), "required")
    );
    assert_eq!(
        refused_at(answer(
            CHOICE,
            &with,
            json!({"type": "choice", "custom": "x", "option_ids": ["eu"]})
        )),
        ("/custom".into(), "not_allowed")
    );
}

#[test]
fn a_text_answer_is_values_or_the_text_of_a_form_of_one_field() {
    let one = Spec {
        form_id: Some("note".into()),
        ..spec("bn")
    };
    for body in [
        json!({"type": "text", "text": "hello"}),
        json!({"type": "text", "values": {"custom": "hello"}}),
    ] {
        match answer(TEXT, &one, body).unwrap() {
            Action::Submit { form_id, values } => {
                assert_eq!(form_id, "note");
                assert_eq!(Value::Object(values), json!({"custom": "hello"}));
            }
            other => panic!("{other:?}"),
        }
    }
    let two = Spec {
        form_id: Some("many".into()),
        ..spec("bm")
    };
    assert_eq!(
        refused_at(answer(TEXT, &two, json!({"type": "text", "text": "x"}))),
        ("/text".into(), "not_allowed")
    );
    assert_eq!(
        refused_at(answer(
            TEXT,
            &one,
            json!({"type": "text", "text": "x", "values": {}})
        )),
        ("/text".into(), "not_allowed")
    );
    assert_eq!(
        refused_at(answer(TEXT, &one, json!({"type": "text"}))),
        ("/values".into(), "required")
    );
    assert_eq!(
        refused_at(answer(TEXT, &one, json!({"type": "text", "values": []}))),
        ("/values".into(), "invalid_type")
    );
}

fn scalar() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..3).prop_map(|n| json!(n)),
        prop::sample::select(vec!["", " ", "eu", "us", "docs", "a", "b", "Asia"])
            .prop_map(|s| json!(s)),
    ]
}

/// Any JSON value of a small vocabulary.
fn anything() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => scalar(),
        1 => prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
        1 => prop::collection::btree_map(prop::sample::select(vec!["a", "b", "custom"]), scalar(), 0..3)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
    ]
}

/// A well-formed answer of `kind` (its option or text drawn from a small
/// vocabulary, so that some name nothing the message has).
fn well_formed(kind: &'static str) -> BoxedStrategy<Value> {
    let word = prop::sample::select(vec!["eu", "us", "docs", "asia", "Asia", " "]);
    match kind {
        CONFIRMATION => any::<bool>()
            .prop_map(move |b| json!({"type": kind, "confirmed": b}))
            .boxed(),
        APPROVAL => (any::<bool>(), prop::option::of(word))
            .prop_map(move |(b, c)| {
                let mut v = json!({"type": kind, "approved": b});
                if let Some(c) = c {
                    v["comment"] = json!(c);
                }
                v
            })
            .boxed(),
        CHOICE => (any::<bool>(), word)
            .prop_map(move |(custom, w)| {
                if custom {
                    json!({"type": kind, "custom": w})
                } else {
                    json!({"type": kind, "option_ids": [w]})
                }
            })
            .boxed(),
        _ => (any::<bool>(), word)
            .prop_map(move |(text, w)| {
                if text {
                    json!({"type": kind, "text": w})
                } else {
                    json!({"type": kind, "values": {"custom": w}})
                }
            })
            .boxed(),
    }
}

/// A question's type and an answer to it: well formed, well formed with one
/// key changed or added (of any variant's, or none's), or keys at random.
fn bodies() -> impl Strategy<Value = (&'static str, Value)> {
    let key = prop::sample::select(vec![
        "type",
        "confirmed",
        "approved",
        "comment",
        "option_ids",
        "custom",
        "text",
        "values",
        "extra",
    ]);
    let kinds = vec![CONFIRMATION, APPROVAL, CHOICE, TEXT];
    prop::sample::select(kinds.clone()).prop_flat_map(move |kind| {
        let random = (
            prop::option::of(prop::sample::select(kinds.clone())),
            prop::collection::btree_map(key.clone(), anything(), 0..4),
        )
            .prop_map(|(stated, keys)| {
                let mut body: Map<String, Value> =
                    keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                match stated {
                    Some(t) => body.insert("type".into(), json!(t)),
                    None => body.remove("type"),
                };
                Value::Object(body)
            });
        let changed = (well_formed(kind), key.clone(), anything()).prop_map(|(mut v, k, x)| {
            v[k] = x;
            v
        });
        let body = prop_oneof![3 => well_formed(kind), 2 => changed, 1 => random];
        (Just(kind), body)
    })
}

/// The spec a question of `kind` has in [`message`].
fn spec_of(kind: &str) -> Spec {
    match kind {
        CHOICE => Spec {
            custom_form_id: Some("note".into()),
            ..spec("pick")
        },
        TEXT => Spec {
            form_id: Some("note".into()),
            ..spec("bn")
        },
        _ => spec("yn"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Any body: never a panic; a refusal of the body's shape names fields
    /// by a pointer into it; an accepted answer targets a block of the
    /// message the question covers, and what is recorded for it reads back
    /// through `ask` as the answer that was given.
    #[test]
    fn any_answer_is_refused_at_a_field_or_recorded_as_given((kind, body) in bodies()) {
        let s = spec_of(kind);
        let msg = message();
        match action_from_answer(kind, &s, &msg, &body) {
            Err(Rejection::Invalid(errs)) => {
                prop_assert!(!errs.is_empty());
                for e in &errs {
                    prop_assert!(e.field.starts_with('/'), "{} is a pointer", e.field);
                    let key = e.field[1..].split('/').next().unwrap_or_default();
                    prop_assert!(
                        body.get(key).is_some() || ["type", "confirmed", "approved", "option_ids", "values", "custom"].contains(&key),
                        "{} names the body", e.field
                    );
                }
            }
            Err(e) => prop_assert_eq!(e, Rejection::TypeMismatch(kind.to_string())),
            Ok(action) => {
                prop_assert_eq!(body.get("type"), Some(&json!(kind)));
                let (block, values) = match &action {
                    Action::Click { block_id, .. } => (block_id.clone(), None),
                    Action::Submit { form_id, values } => (
                        msg.blocks.iter().find(|b| matches!(b, Block::Form { form_id: f, .. } if f == form_id))
                            .map(|b| b.block_id().to_string()).unwrap_or_default(),
                        Some(values.clone()),
                    ),
                };
                prop_assert!(super::covers(&s, &msg, &block), "{block} is the question's");
                let recorded = response_of(kind, &s, &action, values.as_ref());
                let got = ask_answer(&recorded);
                match kind {
                    CONFIRMATION => prop_assert_eq!(got["answer"].clone(), json!(if body["confirmed"] == json!(true) { "accepted" } else { "declined" })),
                    APPROVAL => {
                        let yes = body["approved"] == json!(true);
                        prop_assert_eq!(got["answer"].clone(), json!(if yes { "accepted" } else { "declined" }));
                        prop_assert_eq!(got.get("comment"), body.get("comment").filter(|c| c.is_string()));
                    }
                    CHOICE if body.get("custom").is_some() => prop_assert_eq!(got, json!({"answer": "custom", "text": body["custom"]})),
                    CHOICE => prop_assert_eq!(got, json!({"answer": "chose", "options": body["option_ids"]})),
                    _ => prop_assert_eq!(got["answer"].clone(), json!("custom")),
                }
            }
        }
    }
}
