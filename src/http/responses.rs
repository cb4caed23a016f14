//! response_url replies and the widget's live stream.

use std::collections::VecDeque;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::AppState;
use super::extract::{JsonBody, Visitor};
use super::messages::{new_message, parse_content};
use crate::domain::model::Author;
use crate::domain::token::{self, Grant};
use crate::error::{ApiError, ApiResult};
use crate::schemas::Schemas;
use crate::store::{Reply, ReplyOutcome, ReplyRequest, StreamEvent};

pub const MAX_USES: u32 = 5;
const REPLAY_LIMIT: usize = 500;
const TYPING_FOR: Duration = Duration::from_secs(30);

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(post_response);
}

/// The response_url of an event about `message_id`.
pub fn response_url(
    st: &AppState,
    event_id: &str,
    message_id: &str,
    conversation_id: &str,
    new_message_only: bool,
    now_ms: i64,
) -> String {
    let t = token::issue(
        &st.server_key,
        &Grant {
            event_id: event_id.to_string(),
            message_id: message_id.to_string(),
            conversation_id: conversation_id.to_string(),
            expires_at: now_ms + st.config.response_url_ttl.as_millis() as i64,
            new_message_only,
        },
    );
    format!("{}/api/v1/responses/{t}", st.public_url)
}

fn expired() -> ApiError {
    ApiError::new(
        StatusCode::GONE,
        "response_url_expired",
        "response_url expired",
        "this response_url has expired or was used the maximum number of times",
    )
}

/// Applies one reply through a response_url token: the HTTP endpoint and a
/// webhook's reply body both come here.
pub async fn apply_reply(
    st: &AppState,
    token: &str,
    body: &Value,
    idempotency_key: Option<String>,
) -> ApiResult<Value> {
    let grant = token::verify(&st.server_key, token).ok_or_else(ApiError::not_found)?;
    let now = st.now_ms();
    if now > grant.expires_at {
        return Err(expired());
    }
    let content = parse_content(body, &Schemas::get().reply)?;
    let replace = body.get("replace_original").and_then(Value::as_bool);
    let delete = body
        .get("delete_original")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if grant.new_message_only {
        if replace == Some(true) {
            return Err(ApiError::field(
                "/replace_original",
                "not_allowed",
                "a reply to message.received always posts a new message",
            ));
        }
        if delete {
            return Err(ApiError::field(
                "/delete_original",
                "not_allowed",
                "a reply to message.received cannot delete the visitor's message",
            ));
        }
    }
    if delete && replace == Some(true) {
        return Err(ApiError::field(
            "/delete_original",
            "conflict",
            "choose either replace_original or delete_original",
        ));
    }
    let replace = replace.unwrap_or(!grant.new_message_only);
    let reply = if delete {
        Reply::Delete
    } else if replace {
        if content.text.is_none() && content.blocks.is_none() {
            return Err(ApiError::field(
                "",
                "required",
                "a reply needs text or blocks",
            ));
        }
        Reply::Replace {
            text: content.text,
            blocks: content.blocks.unwrap_or_default(),
            metadata: content.metadata,
        }
    } else {
        if content.text.is_none() && content.blocks.is_none() {
            return Err(ApiError::field(
                "",
                "required",
                "a reply needs text or blocks",
            ));
        }
        Reply::Post(new_message(
            &grant.conversation_id,
            Author::bot(),
            content,
            now,
        ))
    };
    let out = st
        .store
        .reply(ReplyRequest {
            event_id: grant.event_id.clone(),
            message_id: grant.message_id.clone(),
            conversation_id: grant.conversation_id.clone(),
            idempotency_key,
            max_uses: MAX_USES,
            now_ms: now,
            reply,
        })
        .await
        .map_err(|e| match e {
            crate::store::StoreError::NotFound => ApiError::new(
                StatusCode::GONE,
                "response_url_expired",
                "Message gone",
                "the original message no longer exists",
            ),
            other => other.into(),
        })?;
    match out {
        ReplyOutcome::Applied(v) => {
            stop_typing(st, &grant.conversation_id);
            Ok(v)
        }
        ReplyOutcome::Repeated(v) => Ok(v),
        ReplyOutcome::UsedUp => Err(expired()),
    }
}

/// Reply to an event: replace (default), post a new message, or delete.
#[utoipa::path(tag = "responses", request_body(content = Object, description = "See schemas/reply.schema.json"), params(("Idempotency-Key" = Option<String>, Header, description = "Retry-safe key")), responses(
    (status = 200, description = "{\"message\"}"),
    (status = 404, description = "unknown or altered token"),
    (status = 410, description = "response_url_expired"),
    (status = 422, description = "validation_failed")))]
#[post("/api/v1/responses/{token}")]
async fn post_response(
    req: HttpRequest,
    st: web::Data<AppState>,
    token: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    // An unknown or altered token is 404 before the body is looked at.
    token::verify(&st.server_key, &token).ok_or_else(ApiError::not_found)?;
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let v = apply_reply(&st, &token, &body.0, key).await?;
    Ok(HttpResponse::Ok().json(v))
}

/// After an accepted click on a message with `typing_on_interaction`, the
/// stream shows `typing` until a reply arrives or 30 s pass.
pub fn start_typing(st: &AppState, conversation_id: &str, message_id: &str) {
    let store = st.store.clone();
    let cid = conversation_id.to_string();
    let data =
        json!({"conversation_id": cid, "message_id": message_id, "active": true}).to_string();
    tokio::spawn(async move {
        if store.append_stream(&cid, "typing", data).await.is_err() {
            return;
        }
        tokio::time::sleep(TYPING_FOR).await;
        let off = json!({"conversation_id": cid, "active": false}).to_string();
        let _ = store.append_stream(&cid, "typing", off).await;
    });
}

fn stop_typing(st: &AppState, conversation_id: &str) {
    let store = st.store.clone();
    let cid = conversation_id.to_string();
    tokio::spawn(async move {
        let off = json!({"conversation_id": cid, "active": false}).to_string();
        let _ = store.append_stream(&cid, "typing", off).await;
    });
}

fn frame(e: &StreamEvent) -> Bytes {
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {}\n\n",
        e.seq, e.kind, e.data
    ))
}

struct StreamState {
    backlog: VecDeque<StreamEvent>,
    rx: broadcast::Receiver<StreamEvent>,
    conversation_id: String,
    last_seq: i64,
    store: std::sync::Arc<dyn crate::store::Store>,
}

/// Server-Sent Events of the visitor's conversation: `message.created`,
/// `message.updated`, `message.deleted`, `typing`. `Last-Event-ID` replays
/// what was missed, from the store.
#[utoipa::path(tag = "widget", responses((status = 200, description = "text/event-stream")))]
#[get("/widget/v1/conversations/{cid}/stream")]
pub async fn widget_stream(
    req: HttpRequest,
    v: Visitor,
    st: web::Data<AppState>,
    cid: web::Path<String>,
) -> ApiResult<HttpResponse> {
    if v.0.id != *cid {
        return Err(ApiError::not_found());
    }
    let last: Option<i64> = req
        .headers()
        .get("last-event-id")
        .and_then(|h| h.to_str().ok())
        .and_then(|s| s.trim().parse().ok());
    // Subscribe first so nothing committed after the replay read is missed.
    let rx = st.hub.stream.subscribe();
    let backlog: VecDeque<StreamEvent> = match last {
        Some(seq) => st.store.stream_since(&cid, seq, REPLAY_LIMIT).await?.into(),
        None => VecDeque::new(),
    };
    let state = StreamState {
        backlog,
        rx,
        conversation_id: cid.into_inner(),
        last_seq: last.unwrap_or(0),
        store: st.store.clone(),
    };
    let first = Bytes::from_static(b"retry: 2000\n: connected\n\n");
    let head = futures_util::stream::once(async move { Ok::<Bytes, actix_web::Error>(first) });
    let body = futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(e) = s.backlog.pop_front() {
                if e.seq > s.last_seq {
                    s.last_seq = e.seq;
                    return Some((Ok::<Bytes, actix_web::Error>(frame(&e)), s));
                }
                continue;
            }
            match tokio::time::timeout(Duration::from_secs(15), s.rx.recv()).await {
                Err(_) => return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), s)),
                Ok(Ok(e)) => {
                    if e.conversation_id == s.conversation_id && e.seq > s.last_seq {
                        s.last_seq = e.seq;
                        return Some((Ok(frame(&e)), s));
                    }
                }
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {
                    // Fell behind the in-memory channel: catch up from the store.
                    if let Ok(missed) = s
                        .store
                        .stream_since(&s.conversation_id, s.last_seq, REPLAY_LIMIT)
                        .await
                    {
                        s.backlog.extend(missed);
                    }
                }
                Ok(Err(broadcast::error::RecvError::Closed)) => return None,
            }
        }
    });
    use futures_util::StreamExt;
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(head.chain(body)))
}
