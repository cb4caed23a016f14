//! Bot API (chatbot API key): messages, takeover, and the deliveries log.

use actix_web::{HttpResponse, get, post, web};
use base64::Engine;
use serde_json::{Value, json};

use super::AppState;
use super::extract::{Bot, JsonBody, PageQuery, sealed_page};
use super::messages::{new_message, parse_content};
use crate::domain::model::{Author, Conversation, Person};
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, FieldError};
use crate::schemas::Schemas;
use crate::store::{AttemptRow, EventSummary};

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(post_message)
        .service(list_messages)
        .service(takeover)
        .service(list_events)
        .service(get_event)
        .service(redeliver);
}

/// The conversation, if it belongs to this chatbot (404 otherwise).
async fn conversation(st: &AppState, bot: &Bot, cid: &str) -> ApiResult<Conversation> {
    let conv = st.store.get_conversation(cid).await?;
    if conv.chatbot_id != bot.0.id {
        return Err(ApiError::not_found());
    }
    Ok(conv)
}

/// Post a bot message with optional `actions` and `form` blocks.
#[utoipa::path(tag = "bot", request_body(content = Object, description = "See schemas/message.schema.json"), responses((status = 201, description = "The message"), (status = 422, description = "validation_failed with pointers"), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[post("/api/v1/conversations/{cid}/messages")]
async fn post_message(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let conv = conversation(&st, &bot, &cid).await?;
    let content = parse_content(&body.0, &Schemas::get().message)?;
    let msg = new_message(&conv.id, Author::bot(), content, st.now_ms());
    let expires = msg.created_ms + st.config.interactive_window.as_millis() as i64;
    let interactions = crate::domain::inbox::from_message(&msg, &bot.0.id, Some(expires));
    st.store
        .insert_message(msg.clone(), None, interactions)
        .await?;
    super::responses::stop_typing_if_shown(&st, &conv.id).await;
    Ok(HttpResponse::Created().json(msg))
}

/// Messages of a conversation, newest first.
#[utoipa::path(tag = "bot", params(PageQuery), responses((status = 200, description = "Collection of messages")), security(("api_key" = [])))]
#[get("/api/v1/conversations/{cid}/messages")]
async fn list_messages(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    q: web::Query<PageQuery>,
) -> ApiResult<HttpResponse> {
    let conv = conversation(&st, &bot, &cid).await?;
    let scope = format!("messages:{cid}");
    let (limit, cursor) = q.parse(&st, &scope)?;
    let page = st.store.list_messages(&cid, limit, cursor).await?;
    let data = page
        .data
        .into_iter()
        .map(|m| {
            serde_json::to_value(super::widget::view(&st, &conv, bot.0.retention_ms, m))
                .unwrap_or_default()
        })
        .collect();
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// A human takes over: every block of the conversation turns off.
#[utoipa::path(tag = "bot", request_body = Object, responses((status = 200, description = "Taken over"), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[post("/api/v1/conversations/{cid}/takeover")]
async fn takeover(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    conversation(&st, &bot, &cid).await?;
    let member = body.0.get("member").cloned().unwrap_or(Value::Null);
    let id = member
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or(&bot.0.member_id)
        .to_string();
    let display_name = member
        .get("display_name")
        .and_then(Value::as_str)
        .unwrap_or("Support")
        .to_string();
    if !member.is_null() && !member.is_object() {
        return Err(ApiError::Validation(vec![FieldError::new(
            "/member",
            "invalid_type",
            "must be an object",
        )]));
    }
    let person = Person {
        kind: "member".into(),
        id,
        display_name,
    };
    st.store.takeover(&cid, person.clone(), st.now_ms()).await?;
    Ok(HttpResponse::Ok().json(json!({"conversation_id": cid.as_str(), "taken_over_by": person})))
}

fn payload_json(p: &[u8]) -> Value {
    serde_json::from_slice(p)
        .unwrap_or_else(|_| json!(base64::engine::general_purpose::STANDARD.encode(p)))
}

fn event_json(e: &EventSummary) -> Value {
    json!({
        "event_id": e.event_id,
        "type": e.event_type,
        "created_at": rfc3339(e.created_at),
        "status": e.status,
        "attempt_count": e.attempts,
        "next_attempt_at": e.next_attempt_at.map(rfc3339),
        "payload": payload_json(&e.payload),
    })
}

fn attempt_json(a: &AttemptRow) -> Value {
    json!({
        "number": a.number,
        "at": rfc3339(a.at),
        "status_code": a.status_code,
        "duration_ms": a.duration_ms,
        "error": a.error,
        "response_excerpt": a.response_excerpt,
    })
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
struct EventsQuery {
    status: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

/// The deliveries log, newest first; `?status=pending|succeeded|failed|dead`.
#[utoipa::path(tag = "events", params(EventsQuery), responses((status = 200, description = "Collection of events")), security(("api_key" = [])))]
#[get("/api/v1/events")]
async fn list_events(
    bot: Bot,
    st: web::Data<AppState>,
    q: web::Query<EventsQuery>,
) -> ApiResult<HttpResponse> {
    let q = q.into_inner();
    if let Some(s) = &q.status
        && !["pending", "succeeded", "failed", "dead"].contains(&s.as_str())
    {
        return Err(ApiError::field(
            "/status",
            "invalid_value",
            "status is pending, succeeded, failed or dead",
        ));
    }
    let scope = format!("events:{}", bot.0.id);
    let (limit, cursor) = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    }
    .parse(&st, &scope)?;
    let page = st
        .store
        .list_events(&bot.0.id, q.status, limit, cursor)
        .await?;
    let data = page.data.iter().map(event_json).collect();
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// One event with every delivery attempt.
#[utoipa::path(tag = "events", responses((status = 200, description = "The event and its attempts"), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[get("/api/v1/events/{event_id}")]
async fn get_event(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let (e, attempts) = st.store.get_event(&bot.0.id, &id).await?;
    let mut v = event_json(&e);
    v["attempts"] = Value::Array(attempts.iter().map(attempt_json).collect());
    Ok(HttpResponse::Ok().json(v))
}

/// Deliver again: new attempts, the same `event_id` and body.
#[utoipa::path(tag = "events", responses((status = 202, description = "Queued"), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[post("/api/v1/events/{event_id}/redeliver")]
async fn redeliver(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    st.store.redeliver(&bot.0.id, &id, st.now_ms()).await?;
    Ok(HttpResponse::Accepted().json(json!({"event_id": id.as_str(), "status": "pending"})))
}
