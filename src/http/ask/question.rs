//! An ask's body checked into a question, and the blocks, interaction type
//! and payload that show it.

use std::time::Duration;

use serde_json::{Value, json};

use super::super::check::{Check, Need};
use super::super::views;
use crate::domain::attachment::{self, Upload};
use crate::domain::blocks::{Block, BlockState, Button, Field, FieldKind};
use crate::domain::inbox::{self, Spec};
use crate::http::error::{ApiError, FieldError};
struct AskOption {
    id: String,
    label: String,
    detail: Option<String>,
}

/// A checked ask request.
pub(super) struct Question {
    pub message: String,
    pub title: Option<String>,
    options: Vec<AskOption>,
    multiple: bool,
    custom: bool,
    accept: String,
    decline: String,
    comment: bool,
    pub timeout: Duration,
    /// `false`: answer 202 at once; the question waits for its answer or timeout.
    pub wait: bool,
    pub attachment: Option<Upload>,
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

pub(super) fn parse(body: &Value) -> Result<Question, ApiError> {
    let mut check = Check::new(
        body,
        &[
            "message",
            "title",
            "options",
            "multiple",
            "custom",
            "accept",
            "decline",
            "comment",
            "timeout",
            "attachment",
            "wait",
        ],
    )?;
    check
        .text("message", 600, Need::Required)
        .text("title", 60, Need::Optional)
        .text("accept", 30, Need::Optional)
        .text("decline", 30, Need::Optional)
        .flag("multiple")
        .flag("custom")
        .flag("comment")
        .flag("wait");
    let mut errors = Vec::new();
    let mut options = Vec::new();
    match check.get("options") {
        None => {}
        Some(Value::Array(a)) if a.len() > 9 => {
            errors.push(FieldError::new("/options", "too_many", "at most 9 options"))
        }
        Some(Value::Array(a)) => {
            for (i, o) in a.iter().enumerate() {
                let at = format!("/options/{i}");
                let opt = match o {
                    Value::String(s) => Some(AskOption {
                        id: s.clone(),
                        label: s.clone(),
                        detail: None,
                    }),
                    Value::Object(m) => {
                        for k in m.keys() {
                            if !["id", "label", "detail"].contains(&k.as_str()) {
                                errors.push(FieldError::new(
                                    format!("{at}/{k}"),
                                    "unknown_field",
                                    "this key is not allowed here",
                                ));
                            }
                        }
                        let id = m.get("id").and_then(Value::as_str).map(str::to_string);
                        if id.is_none() {
                            errors.push(FieldError::new(
                                format!("{at}/id"),
                                "required",
                                "an option needs an id",
                            ));
                        }
                        for k in ["label", "detail"] {
                            if m.get(k).is_some_and(|v| !v.is_string() && !v.is_null()) {
                                errors.push(FieldError::new(
                                    format!("{at}/{k}"),
                                    "invalid_type",
                                    "must be a string",
                                ));
                            }
                        }
                        let label = m
                            .get("label")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .or_else(|| id.clone());
                        id.map(|id| AskOption {
                            id,
                            label: label.unwrap_or_default(),
                            detail: m.get("detail").and_then(Value::as_str).map(str::to_string),
                        })
                    }
                    _ => {
                        errors.push(FieldError::new(
                            at.clone(),
                            "invalid_type",
                            "an option is a string or {id, label, detail?}",
                        ));
                        None
                    }
                };
                if let Some(o) = opt {
                    if !valid_id(&o.id) {
                        errors.push(FieldError::new(
                            format!("{at}/id"),
                            "invalid_format",
                            "ids are 1-64 letters, digits, _ . : -",
                        ));
                    } else if options.iter().any(|x: &AskOption| x.id == o.id) || o.id == "custom" {
                        errors.push(FieldError::new(
                            format!("{at}/id"),
                            "duplicate",
                            "option ids must be unique (and not `custom`)",
                        ));
                    }
                    if o.label.is_empty() || o.label.chars().count() > 80 {
                        errors.push(FieldError::new(
                            format!("{at}/label"),
                            "too_long",
                            "a label is 1 to 80 characters",
                        ));
                    }
                    options.push(o);
                }
            }
        }
        Some(_) => errors.push(FieldError::new(
            "/options",
            "invalid_type",
            "must be an array",
        )),
    }
    let attachment = check
        .get("attachment")
        .and_then(|v| attachment::parse(v, &mut errors));
    let flag = |key: &str| check.get(key).and_then(Value::as_bool).unwrap_or(false);
    let (multiple, custom, comment) = (flag("multiple"), flag("custom"), flag("comment"));
    let (accept, decline) = (
        check.get("accept").is_some(),
        check.get("decline").is_some(),
    );
    if multiple && options.len() < 2 {
        errors.push(FieldError::new(
            "/multiple",
            "too_few_options",
            "multiple needs at least 2 options",
        ));
    }
    let with_options = !options.is_empty() || custom;
    for (key, set) in [
        ("accept", accept),
        ("decline", decline),
        ("comment", comment),
    ] {
        if with_options && set {
            errors.push(FieldError::new(
                format!("/{key}"),
                "not_allowed",
                "accept, decline and comment apply only to a question without options",
            ));
        }
    }
    let timeout = match check.get("timeout") {
        None => Duration::from_secs(600),
        Some(v) => match crate::domain::duration::from_json(v) {
            Ok(d) if d < Duration::from_secs(5) => {
                errors.push(FieldError::new(
                    "/timeout",
                    "too_small",
                    "at least 5 seconds",
                ));
                d
            }
            Ok(d) if d > Duration::from_secs(86400) => {
                errors.push(FieldError::new("/timeout", "too_large", "at most 1 day"));
                d
            }
            Ok(d) => d,
            Err(e) => {
                errors.push(FieldError::new("/timeout", "invalid_duration", e));
                Duration::ZERO
            }
        },
    };
    errors.into_iter().for_each(|e| check.push(e));
    let views::Ask {
        message,
        title,
        accept,
        decline,
        wait,
        ..
    } = check.typed()?;
    Ok(Question {
        message,
        title,
        options,
        multiple,
        custom,
        accept: accept.unwrap_or_else(|| "Yes".into()),
        decline: decline.unwrap_or_else(|| "No".into()),
        comment,
        timeout,
        wait: wait.unwrap_or(true),
        attachment,
    })
}

fn button(id: &str, label: &str, style: Option<&str>) -> Button {
    Button {
        kind: "button".into(),
        action_id: id.into(),
        label: label.into(),
        value: Some(id.into()),
        url: None,
        style: style.map(str::to_string),
        confirm: None,
    }
}

fn form(block_id: &str, form_id: &str, title: Option<String>, fields: Vec<Field>) -> Block {
    Block::Form {
        block_id: block_id.into(),
        form_id: form_id.into(),
        title,
        submit_label: "Send".into(),
        disable_on_submit: true,
        fields,
        state: BlockState::default(),
    }
}

/// The blocks, interaction type, payload and spec of a question.
pub(super) fn shape(q: &Question) -> (Vec<Block>, &'static str, Value, Spec) {
    let mut blocks = Vec::new();
    let mut spec = Spec {
        ask: true,
        ..Spec::default()
    };
    let options: Vec<Value> = q
        .options
        .iter()
        .map(|o| {
            let mut v = json!({"id": o.id, "label": o.label});
            if let Some(d) = &o.detail {
                v["detail"] = json!(d);
            }
            v
        })
        .collect();
    if q.options.is_empty() && !q.custom {
        blocks.push(Block::Actions {
            block_id: "ask".into(),
            disable_on_click: true,
            elements: vec![
                button("accept", &q.accept, Some("primary")),
                button("decline", &q.decline, None),
            ],
            state: BlockState::default(),
        });
        spec.block_id = "ask".into();
        spec.allow_comment = q.comment;
        let kind = if q.comment {
            inbox::APPROVAL
        } else {
            inbox::CONFIRMATION
        };
        let payload = json!({"title": q.title, "accept": q.accept, "decline": q.decline, "comment": q.comment});
        return (blocks, kind, payload, spec);
    }
    if q.multiple {
        let fields = q
            .options
            .iter()
            .map(|o| Field {
                name: o.id.clone(),
                kind: FieldKind::Checkbox,
                label: o.label.clone(),
                placeholder: o.detail.clone(),
                ..Field::default()
            })
            .collect();
        blocks.push(form("ask", "ask", q.title.clone(), fields));
        spec.block_id = "ask".into();
        spec.form_id = Some("ask".into());
        spec.multiple = true;
    } else if !q.options.is_empty() {
        blocks.push(Block::Actions {
            block_id: "ask".into(),
            disable_on_click: true,
            elements: q
                .options
                .iter()
                .map(|o| button(&o.id, &o.label, None))
                .collect(),
            state: BlockState::default(),
        });
        spec.block_id = "ask".into();
    }
    if q.custom {
        let field = Field {
            name: "custom".into(),
            kind: FieldKind::Text,
            label: "Your answer".into(),
            required: true,
            max: Some(2000.0.into()),
            ..Field::default()
        };
        blocks.push(form("ask_custom", "custom", None, vec![field]));
        spec.custom_form_id = Some("custom".into());
        if q.options.is_empty() {
            spec.block_id = "ask_custom".into();
            spec.form_id = Some("custom".into());
            let payload = json!({"title": q.title, "fields": [{"name": "custom", "type": "text", "label": "Your answer", "required": true}]});
            return (blocks, inbox::TEXT, payload, spec);
        }
    }
    let payload =
        json!({"title": q.title, "options": options, "multiple": q.multiple, "custom": q.custom});
    (blocks, inbox::CHOICE, payload, spec)
}
