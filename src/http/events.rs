//! The deliveries log (chatbot API key): list and filter, one event with its
//! attempts, redeliver one or all failed/dead, and a test event.

use actix_web::{HttpResponse, get, post, web};
use base64::Engine;
use serde_json::{Value, json};

use super::check::Check;
use super::extract::{Bot, JsonBody, PageQuery, sealed_page};
use super::{AppState, views};
use crate::domain::ids::new_id;
use crate::domain::status::EventStatus;
use crate::domain::time::{parse_rfc3339, rfc3339};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::store::{AttemptRow, EventFilter, EventSummary, NewEvent};

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(list_events)
        .service(test_event)
        .service(redeliver_all)
        .service(get_event)
        .service(redeliver);
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
        "status": e.status.as_str(),
        "attempt_count": e.attempts,
        "next_attempt_at": e.next_attempt_at.map(rfc3339),
        "payload": payload_json(&e.payload),
    })
}

pub(super) fn attempt_json(a: &AttemptRow) -> Value {
    let headers = a
        .request_headers
        .as_deref()
        .and_then(|h| serde_json::from_str::<Value>(h).ok());
    json!({
        "number": a.number,
        "at": rfc3339(a.at),
        "status_code": a.status_code,
        "duration_ms": a.duration_ms,
        "error": a.error,
        "response_excerpt": a.response_excerpt,
        "request_headers": headers,
    })
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
struct EventsQuery {
    /// `pending`, `succeeded`, `failed` or `dead`.
    status: Option<String>,
    /// An event type, e.g. `interaction.button_clicked`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    event_type: Option<String>,
    /// One event by its id.
    event_id: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

/// The deliveries log, newest first; filters `status`
/// (`pending|succeeded|failed|dead`), `type` and `event_id`.
#[utoipa::path(tag = "events", params(EventsQuery), responses((status = 200, description = "Events, newest first", body = views::EventPage), (status = 422, description = "validation_failed")), security(("api_key" = [])))]
#[get("/api/v1/events")]
async fn list_events(
    bot: Bot,
    st: web::Data<AppState>,
    q: web::Query<EventsQuery>,
) -> ApiResult<HttpResponse> {
    let q = q.into_inner();
    let mut errors = Vec::new();
    let status = match q.status.as_deref().map(str::parse::<EventStatus>) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(_)) => {
            errors.push(FieldError::new(
                "/status",
                "invalid_value",
                "status is pending, succeeded, failed or dead",
            ));
            None
        }
    };
    for (key, v) in [("type", &q.event_type), ("event_id", &q.event_id)] {
        if v.as_ref().is_some_and(|v| v.is_empty() || v.len() > 200) {
            errors.push(FieldError::new(
                format!("/{key}"),
                "invalid_value",
                "must be 1 to 200 characters",
            ));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let scope = format!("events:{}", bot.0.id);
    let (limit, cursor) = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    }
    .parse(&st, &scope)?;
    let filter = EventFilter {
        status,
        event_type: q.event_type,
        event_id: q.event_id,
    };
    let page = st
        .store
        .list_events(&bot.0.id, filter, limit, cursor)
        .await?;
    let data = page.data.iter().map(event_json).collect();
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// One event with every delivery attempt (with the request headers it sent).
#[utoipa::path(tag = "events", responses((status = 200, description = "The event and its attempts", body = views::EventWithAttempts), (status = 404, description = "not_found")), security(("api_key" = [])))]
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
#[utoipa::path(tag = "events", responses((status = 202, description = "Queued", body = views::Redelivery), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[post("/api/v1/events/{event_id}/redeliver")]
async fn redeliver(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    st.store.redeliver(&bot.0.id, &id, st.now_ms()).await?;
    Ok(HttpResponse::Accepted()
        .json(json!({"event_id": id.as_str(), "status": EventStatus::Pending.as_str()})))
}

/// Redeliver every `dead` or `failed` event of the chatbot (created at or
/// after `since`), each as one redelivery: `{"status", "since"?}`.
#[utoipa::path(tag = "events", request_body = views::RedeliverAll, responses((status = 202, description = "How many were queued", body = views::RedeliveryCount), (status = 422, description = "validation_failed with pointers")), security(("api_key" = [])))]
#[post("/api/v1/events/redeliver")]
async fn redeliver_all(
    bot: Bot,
    st: web::Data<AppState>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let mut check = Check::new(&body.0, &["status", "since"])?;
    let refused = match check.get("status") {
        None => Some(("required", "status is required")),
        Some(Value::String(s))
            if s == EventStatus::Dead.as_str() || s == EventStatus::Failed.as_str() =>
        {
            None
        }
        Some(_) => Some(("invalid_value", "status is dead or failed")),
    };
    if let Some((code, message)) = refused {
        check.push(FieldError::new("/status", code, message));
    }
    match check.get("since") {
        None => {}
        Some(Value::String(s)) if parse_rfc3339(s).is_some() => {}
        Some(Value::String(_)) => check.push(FieldError::new(
            "/since",
            "invalid_timestamp",
            "since is an RFC 3339 timestamp",
        )),
        Some(_) => check.push(FieldError::new(
            "/since",
            "invalid_type",
            "since is an RFC 3339 timestamp string",
        )),
    }
    let views::RedeliverAll { status, since } = check.typed()?;
    let since = since.as_deref().and_then(parse_rfc3339);
    let count = st
        .store
        .redeliver_all(&bot.0.id, status, since, st.now_ms())
        .await?;
    Ok(HttpResponse::Accepted().json(json!({"count": count})))
}

/// Send a signed `webhook.test` event through the delivery pipeline, to
/// check the endpoint. Its attempts show in the deliveries log.
#[utoipa::path(tag = "events", request_body(content = views::TestEventRequest, description = "No body, or `{}`"), responses((status = 202, description = "The test event queued", body = views::EventQueued), (status = 422, description = "validation_failed")), security(("api_key" = [])))]
#[post("/api/v1/events/test")]
async fn test_event(
    bot: Bot,
    st: web::Data<AppState>,
    body: JsonBody,
    trace: super::extract::Trace,
) -> ApiResult<HttpResponse> {
    Check::new(&body.0, &[])?.finish()?;
    let now = st.now_ms();
    let id = new_id("evt");
    let payload = crate::domain::events::webhook_test(&id, &bot.0.id, &rfc3339(now));
    st.store
        .enqueue_event(NewEvent {
            id: id.clone(),
            chatbot_id: bot.0.id.clone(),
            // Its own lane: a test neither waits for nor holds up a conversation.
            conversation_id: id.clone(),
            event_type: crate::domain::events::WEBHOOK_TEST,
            payload,
            created_at: now,
            trace: trace.0,
        })
        .await?;
    crate::telemetry::metrics::event_accepted(crate::domain::events::WEBHOOK_TEST);
    Ok(HttpResponse::Accepted().json(json!({"event_id": id})))
}
