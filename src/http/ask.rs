//! Ask and wait (chatbot API key): post a question into a conversation and
//! hold the response open until a person answers, it expires, or the asking
//! client goes away (the question is then withdrawn).
//!
//! The answer is always a 200: headers go out at once, whitespace keeps the
//! connection alive (and reveals a client that left), and the JSON answer
//! follows.

use std::time::Duration;

use actix_web::{HttpResponse, post, web};
use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::AppState;
use super::extract::{Bot, JsonBody, text_field};
use super::messages::{Content, new_message};
use crate::domain::blocks::{Block, BlockState, Button, Field, FieldKind};
use crate::domain::inbox::{self, NewInteraction, Spec};
use crate::domain::model::Author;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::hub::ApiEvent;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(ask);
}

const KEEPALIVE: Duration = Duration::from_secs(2);

struct AskOption {
    id: String,
    label: String,
    detail: Option<String>,
}

/// A checked ask request.
struct Question {
    message: String,
    title: Option<String>,
    options: Vec<AskOption>,
    multiple: bool,
    custom: bool,
    accept: String,
    decline: String,
    comment: bool,
    timeout: Duration,
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

fn flag(body: &Map<String, Value>, key: &str, errors: &mut Vec<FieldError>) -> bool {
    match body.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errors.push(FieldError::new(
                format!("/{key}"),
                "invalid_type",
                "must be a boolean",
            ));
            false
        }
    }
}

fn parse(body: &Value) -> Result<Question, ApiError> {
    let Some(body) = body.as_object() else {
        return Err(ApiError::field(
            "",
            "invalid_type",
            "the body must be a JSON object",
        ));
    };
    let mut errors = Vec::new();
    const KEYS: [&str; 10] = [
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
    ];
    for k in body.keys() {
        if !KEYS.contains(&k.as_str()) || k == "attachment" {
            errors.push(FieldError::new(
                format!("/{k}"),
                "unknown_field",
                "this key is not allowed here",
            ));
        }
    }
    let message = text_field(body.get("message"), "message", 600, &mut errors);
    if body.get("message").is_none() {
        errors.push(FieldError::new(
            "/message",
            "required",
            "message is required",
        ));
    }
    let title = text_field(body.get("title"), "title", 60, &mut errors);
    let mut options = Vec::new();
    match body.get("options") {
        None | Some(Value::Null) => {}
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
    let multiple = flag(body, "multiple", &mut errors);
    let custom = flag(body, "custom", &mut errors);
    let comment = flag(body, "comment", &mut errors);
    let accept = text_field(body.get("accept"), "accept", 30, &mut errors);
    let decline = text_field(body.get("decline"), "decline", 30, &mut errors);
    if multiple && options.len() < 2 {
        errors.push(FieldError::new(
            "/multiple",
            "too_few_options",
            "multiple needs at least 2 options",
        ));
    }
    let with_options = !options.is_empty() || custom;
    for (key, set) in [
        ("accept", accept.is_some()),
        ("decline", decline.is_some()),
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
    let timeout = match body.get("timeout") {
        None | Some(Value::Null) => Duration::from_secs(600),
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
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    Ok(Question {
        message: message.unwrap_or_default(),
        title,
        options,
        multiple,
        custom,
        accept: accept.unwrap_or_else(|| "Yes".into()),
        decline: decline.unwrap_or_else(|| "No".into()),
        comment,
        timeout,
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
fn shape(q: &Question) -> (Vec<Block>, &'static str, Value, Spec) {
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
                required: false,
                min: None,
                max: None,
                options: None,
                placeholder: o.detail.clone(),
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
            min: None,
            max: Some(2000.0),
            options: None,
            placeholder: None,
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

/// Withdraws the question if the wait ends without an answer being sent.
struct Waiter {
    st: web::Data<AppState>,
    interaction_id: String,
    chatbot_id: String,
    rx: broadcast::Receiver<ApiEvent>,
    deadline: tokio::time::Instant,
    done: bool,
    /// The store is shared with other instances.
    shared: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let st = self.st.clone();
        let id = self.interaction_id.clone();
        tokio::spawn(async move {
            let _ = st
                .store
                .close_interaction(&id, "cancelled", "withdrawn", st.now_ms())
                .await;
        });
    }
}

impl Waiter {
    /// The answer, or `None` to send a keep-alive first.
    async fn next(&mut self) -> Option<Value> {
        let tick = tokio::time::sleep(KEEPALIVE);
        tokio::select! {
            r = self.rx.recv() => match r {
                Ok(e) if e.interaction_id == self.interaction_id => Some(outcome(&e.data)),
                Ok(_) => None,
                Err(_) => {
                    // Lagged or closed: read the interaction from the store.
                    let i = self.st.store.get_interaction(&self.chatbot_id, &self.interaction_id).await.ok()?;
                    let now = self.st.now_ms();
                    (i.status_at(now) != "pending").then(|| outcome(&i.to_json(now)))
                }
            },
            _ = tokio::time::sleep_until(self.deadline) => {
                let st = self.st.clone();
                Some(match st.store.close_interaction(&self.interaction_id, "expired", "expired", st.now_ms()).await {
                    Ok(i) => outcome(&i.to_json(st.now_ms())),
                    Err(_) => json!({"answer": "expired"}),
                })
            }
            _ = tick => {
                // Several instances (PostgreSQL): their notifications wake
                // this waiter; reading the interaction at each keep-alive is
                // the safety net should one be missed.
                if !self.shared {
                    return None;
                }
                let i = self.st.store.get_interaction(&self.chatbot_id, &self.interaction_id).await.ok()?;
                let now = self.st.now_ms();
                (i.status_at(now) != "pending").then(|| outcome(&i.to_json(now)))
            }
        }
    }
}

/// What the asking client gets for an interaction as it now stands.
fn outcome(i: &Value) -> Value {
    match i.get("status").and_then(Value::as_str) {
        Some("answered") => inbox::ask_answer(i.get("response").unwrap_or(&Value::Null)),
        Some("expired") => json!({"answer": "expired"}),
        Some("pending") => Value::Null,
        _ => json!({"answer": "withdrawn"}),
    }
}

/// Ask a person and wait for the answer.
#[utoipa::path(tag = "ask", request_body = Object, responses(
    (status = 200, description = "{\"answer\": \"chose\"|\"custom\"|\"accepted\"|\"declined\"|\"expired\"|\"withdrawn\", …}"),
    (status = 409, description = "dialog_pending"),
    (status = 422, description = "validation_failed"),
    (status = 404, description = "not_found")), security(("api_key" = [])))]
#[post("/api/v1/conversations/{cid}/ask")]
async fn ask(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let conv = st.store.get_conversation(&cid).await?;
    if conv.chatbot_id != bot.0.id {
        return Err(ApiError::not_found());
    }
    let q = parse(&body.0)?;
    let (blocks, kind, payload, spec) = shape(&q);
    let now = st.now_ms();
    let msg = new_message(
        &conv.id,
        Author::bot(),
        Content {
            text: Some(q.message.clone()),
            blocks: Some(blocks),
            metadata: None,
            typing_on_interaction: None,
        },
        now,
    );
    let interaction = NewInteraction {
        id: crate::domain::ids::new_id("int"),
        chatbot_id: bot.0.id.clone(),
        conversation_id: conv.id.clone(),
        message_id: msg.id.clone(),
        kind,
        prompt: q.message.clone(),
        payload,
        spec,
        expires_at: Some(now + q.timeout.as_millis() as i64),
        created_at: now,
    };
    let interaction_id = interaction.id.clone();
    // Subscribe before the question exists, so no answer can slip by.
    let rx = st.hub.api.subscribe();
    st.store
        .insert_message(msg, None, vec![interaction])
        .await?;
    let waiter = Waiter {
        st: st.clone(),
        interaction_id,
        chatbot_id: bot.0.id.clone(),
        rx,
        deadline: tokio::time::Instant::now() + q.timeout,
        done: false,
        shared: matches!(st.config.database, crate::config::Database::Postgres(_)),
    };
    let body = futures_util::stream::unfold(Some(waiter), |w| async move {
        let mut w = w?;
        match w.next().await {
            Some(v) if !v.is_null() => {
                w.done = true;
                Some((
                    Ok::<Bytes, actix_web::Error>(Bytes::from(v.to_string())),
                    None,
                ))
            }
            _ => Some((Ok(Bytes::from_static(b" ")), Some(w))),
        }
    });
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("Cache-Control", "no-cache"))
        .streaming(body))
}
