//! A reviewer's answer (`POST /api/v1/interactions/{id}/responses`) turned
//! into the action a visitor's click or submit would be, checked against
//! the interaction's type and its message.

use serde_json::{Map, Value};

use super::{APPROVAL, CHOICE, CONFIRMATION, Spec, TEXT};
use crate::domain::blocks::{Block, FieldKind};
use crate::domain::error::{FieldError, Rejection};
use crate::domain::interact::Action;
use crate::domain::model::Message;

fn mismatch(expected: &str) -> Rejection {
    Rejection::TypeMismatch(expected.to_string())
}

fn unknown_fields(body: &Map<String, Value>, allowed: &[&str]) -> Result<(), Rejection> {
    let errs: Vec<FieldError> = body
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| {
            FieldError::new(
                format!("/{k}"),
                "unknown_field",
                "this variant has no such field",
            )
        })
        .collect();
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Rejection::Invalid(errs))
    }
}

fn bool_field(body: &Map<String, Value>, key: &str) -> Result<bool, Rejection> {
    match body.get(key) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Rejection::field(
            format!("/{key}"),
            "invalid_type",
            "must be a boolean",
        )),
        None => Err(Rejection::field(
            format!("/{key}"),
            "required",
            format!("{key} is required"),
        )),
    }
}

/// `{"type": "choice", "custom": "…"}`: the free-text answer of a choice
/// whose ask allowed `custom`, submitted as the visitor's custom form.
fn custom_answer(
    spec: &Spec,
    msg: &Message,
    body: &Map<String, Value>,
) -> Result<Action, Rejection> {
    if body.contains_key("option_ids") {
        return Err(Rejection::field(
            "/custom",
            "not_allowed",
            "send either option_ids or custom",
        ));
    }
    unknown_fields(body, &["type", "custom"])?;
    let Some(form_id) = spec.custom_form_id.clone() else {
        return Err(Rejection::field(
            "/custom",
            "not_allowed",
            "this question was asked without `custom`: choose among option_ids",
        ));
    };
    let text = match body.get("custom") {
        Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
        Some(Value::String(_)) => {
            return Err(Rejection::field(
                "/custom",
                "required",
                "the answer is empty",
            ));
        }
        _ => {
            return Err(Rejection::field(
                "/custom",
                "invalid_type",
                "must be a string",
            ));
        }
    };
    let field = form_fields(msg, &form_id)
        .into_iter()
        .next()
        .unwrap_or_else(|| "custom".into());
    let mut values = Map::new();
    values.insert(field, Value::String(text));
    Ok(Action::Submit { form_id, values })
}

/// Whether a reviewer's answer goes on, decided before anything is read
/// further or written.
#[derive(Debug, PartialEq)]
pub enum Admit {
    /// An answer kept under the same key: its result, given again.
    Repeat(String),
    /// A new answer to a pending interaction.
    Go,
}

/// Decides from the interaction and what is kept under the answer's
/// `Idempotency-Key` (`(body hash, result)`): the same key with the same
/// body gets the first result, whatever the interaction became since; with
/// another body it is a conflict; a new key needs the interaction pending
/// at `now_ms` (before its deadline).
pub fn admit(
    i: &super::Interaction,
    kept: Option<(String, String)>,
    body_hash: &str,
    now_ms: i64,
) -> Result<Admit, Rejection> {
    if let Some((hash, result)) = kept {
        if hash != body_hash {
            return Err(Rejection::IdempotencyConflict);
        }
        return Ok(Admit::Repeat(result));
    }
    if i.status_at(now_ms) != super::InteractionStatus::Pending {
        return Err(Rejection::NotPending);
    }
    Ok(Admit::Go)
}

/// Turns a reviewer's answer into the action a visitor would have taken.
/// Checks, in order: the variant matches the type, no unknown fields, the
/// values are of the right shape (form values are checked later, exactly as
/// for the widget).
pub fn action_from_answer(
    kind: &str,
    spec: &Spec,
    msg: &Message,
    body: &Value,
) -> Result<Action, Rejection> {
    let Some(body) = body.as_object() else {
        return Err(Rejection::field(
            "",
            "invalid_type",
            "the body must be a JSON object",
        ));
    };
    match body.get("type") {
        Some(Value::String(t)) if t == kind => {}
        Some(Value::String(_)) => return Err(mismatch(kind)),
        Some(_) => {
            return Err(Rejection::field(
                "/type",
                "invalid_type",
                "must be a string",
            ));
        }
        None => return Err(Rejection::field("/type", "required", "type is required")),
    }
    match kind {
        CHOICE if body.contains_key("custom") => custom_answer(spec, msg, body),
        CHOICE => {
            unknown_fields(body, &["type", "option_ids"])?;
            let ids: Vec<String> = match body.get("option_ids") {
                Some(Value::Array(a)) if !a.is_empty() => a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        v.as_str().map(str::to_string).ok_or_else(|| {
                            Rejection::field(
                                format!("/option_ids/{i}"),
                                "invalid_type",
                                "must be a string",
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(Value::Array(_)) => {
                    return Err(Rejection::field(
                        "/option_ids",
                        "required",
                        "choose at least one option",
                    ));
                }
                Some(_) => {
                    return Err(Rejection::field(
                        "/option_ids",
                        "invalid_type",
                        "must be an array of option ids",
                    ));
                }
                None => {
                    return Err(Rejection::field(
                        "/option_ids",
                        "required",
                        "option_ids is required",
                    ));
                }
            };
            if spec.multiple {
                let form_id = spec.form_id.clone().unwrap_or_default();
                let mut values = Map::new();
                for (i, id) in ids.iter().enumerate() {
                    if !form_has_checkbox(msg, &form_id, id) {
                        return Err(Rejection::field(
                            format!("/option_ids/{i}"),
                            "invalid_option",
                            "no such option",
                        ));
                    }
                    values.insert(id.clone(), Value::Bool(true));
                }
                return Ok(Action::Submit { form_id, values });
            }
            if ids.len() > 1 {
                return Err(Rejection::field(
                    "/option_ids/1",
                    "too_many",
                    "this question takes one option",
                ));
            }
            let id = ids.into_iter().next().unwrap_or_default();
            if !has_button(msg, &spec.block_id, &id) {
                return Err(Rejection::field(
                    "/option_ids/0",
                    "invalid_option",
                    "no such option",
                ));
            }
            Ok(Action::Click {
                block_id: spec.block_id.clone(),
                action_id: id,
                comment: None,
            })
        }
        TEXT => {
            unknown_fields(body, &["type", "values", "text"])?;
            let form_id = spec
                .form_id
                .clone()
                .or_else(|| spec.custom_form_id.clone())
                .unwrap_or_default();
            let values = match (body.get("values"), body.get("text")) {
                (Some(Value::Object(m)), None) => m.clone(),
                (Some(_), None) => {
                    return Err(Rejection::field(
                        "/values",
                        "invalid_type",
                        "must be an object",
                    ));
                }
                (None, Some(Value::String(t))) => {
                    let fields = form_fields(msg, &form_id);
                    if fields.len() != 1 {
                        return Err(Rejection::field(
                            "/text",
                            "not_allowed",
                            "`text` answers a form of one field; send `values`",
                        ));
                    }
                    let mut m = Map::new();
                    m.insert(fields[0].clone(), Value::String(t.clone()));
                    m
                }
                (None, Some(_)) => {
                    return Err(Rejection::field(
                        "/text",
                        "invalid_type",
                        "must be a string",
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err(Rejection::field(
                        "/text",
                        "not_allowed",
                        "send either values or text",
                    ));
                }
                (None, None) => {
                    return Err(Rejection::field(
                        "/values",
                        "required",
                        "values is required",
                    ));
                }
            };
            Ok(Action::Submit { form_id, values })
        }
        CONFIRMATION => {
            unknown_fields(body, &["type", "confirmed"])?;
            let yes = bool_field(body, "confirmed")?;
            Ok(Action::Click {
                block_id: spec.block_id.clone(),
                action_id: if yes { "accept" } else { "decline" }.into(),
                comment: None,
            })
        }
        APPROVAL => {
            unknown_fields(body, &["type", "approved", "comment"])?;
            let yes = bool_field(body, "approved")?;
            let comment = match body.get("comment") {
                None | Some(Value::Null) => None,
                Some(Value::String(c)) if !yes => Some(c.clone()),
                Some(Value::String(_)) => {
                    return Err(Rejection::field(
                        "/comment",
                        "not_allowed",
                        "a comment goes with a decline",
                    ));
                }
                Some(_) => {
                    return Err(Rejection::field(
                        "/comment",
                        "invalid_type",
                        "must be a string",
                    ));
                }
            };
            Ok(Action::Click {
                block_id: spec.block_id.clone(),
                action_id: if yes { "accept" } else { "decline" }.into(),
                comment,
            })
        }
        other => Err(mismatch(other)),
    }
}

fn has_button(msg: &Message, block_id: &str, action_id: &str) -> bool {
    msg.blocks.iter().any(|b| match b {
        Block::Actions {
            block_id: id,
            elements,
            ..
        } => {
            id == block_id
                && elements
                    .iter()
                    .any(|e| e.action_id == action_id && !e.is_link())
        }
        _ => false,
    })
}

fn form_fields(msg: &Message, form_id: &str) -> Vec<String> {
    msg.blocks
        .iter()
        .find_map(|b| match b {
            Block::Form {
                form_id: id,
                fields,
                ..
            } if id == form_id => Some(fields.iter().map(|f| f.name.clone()).collect()),
            _ => None,
        })
        .unwrap_or_default()
}

fn form_has_checkbox(msg: &Message, form_id: &str, name: &str) -> bool {
    msg.blocks.iter().any(|b| match b {
        Block::Form {
            form_id: id,
            fields,
            ..
        } => {
            id == form_id
                && fields
                    .iter()
                    .any(|f| f.name == name && f.kind == FieldKind::Checkbox)
        }
        _ => false,
    })
}
