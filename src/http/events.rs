//! The deliveries log (chatbot API key): list and filter, one event with its
//! attempts, redeliver one or all failed/dead, and a test event.

use actix_web::{HttpResponse, get, post, web};
use base64::Engine;
use serde_json::{Value, json};

use super::check::Check;
use super::extract::{Bot, JsonBody, PageQuery, path_id, sealed_page};
use super::{AppState, views};
use crate::domain::endpoints::default_endpoint_id;
use crate::domain::status::EventStatus;
use crate::domain::time::{parse_rfc3339, rfc3339};
use crate::http::error::{ApiError, ApiResult, FieldError};
use crate::store::{AttemptRow, EndpointSel, EventFilter, EventSummary};
use crate::usecase::events;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(list_events)
        .service(test_event)
        .service(redeliver_all)
        .service(get_event)
        .service(redeliver)
        .service(test_endpoint);
}

/// An endpoint id as the store names it: the chatbot's default endpoint or
/// another.
fn endpoint_sel(chatbot_id: &str, endpoint_id: &str) -> EndpointSel {
    if endpoint_id == default_endpoint_id(chatbot_id) {
        EndpointSel::Default
    } else {
        EndpointSel::Other(endpoint_id.to_string())
    }
}

/// The optional `endpoint_id` of a redelivery body.
fn endpoint_field(check: &mut Check<'_>) {
    match check.get("endpoint_id") {
        None => {}
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 200 => {}
        Some(_) => check.push(FieldError::new(
            "/endpoint_id",
            "invalid_value",
            "endpoint_id is an endpoint's id (`ep_…`)",
        )),
    }
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

pub(super) fn attempt_json(chatbot_id: &str, a: &AttemptRow) -> Value {
    let headers = a
        .request_headers
        .as_deref()
        .and_then(|h| serde_json::from_str::<Value>(h).ok());
    let endpoint_id = match &a.endpoint_id {
        Some(id) => id.clone(),
        None => default_endpoint_id(chatbot_id),
    };
    json!({
        "endpoint_id": endpoint_id,
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
    /// Only events with a delivery to this endpoint (`ep_…`); `status` is
    /// then that delivery's.
    endpoint_id: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

/// The deliveries log, newest first; filters `status`
/// (`pending|succeeded|failed|dead`), `type`, `event_id` and `endpoint_id`.
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
        Some(Ok(s)) if s != EventStatus::Skipped => Some(s),
        Some(_) => {
            errors.push(FieldError::new(
                "/status",
                "invalid_value",
                "status is pending, succeeded, failed or dead",
            ));
            None
        }
    };
    for (key, v) in [
        ("type", &q.event_type),
        ("event_id", &q.event_id),
        ("endpoint_id", &q.endpoint_id),
    ] {
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
        endpoint: q.endpoint_id.map(|id| endpoint_sel(&bot.0.id, &id)),
    };
    let page = events::list(&st, &bot.0.id, filter, limit, cursor).await?;
    let data = page.data.iter().map(event_json).collect();
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// One event with its deliveries, one per endpoint, and every attempt of
/// them (with the request headers it sent).
#[utoipa::path(tag = "events", responses((status = 200, description = "The event, its deliveries and their attempts", body = views::EventWithAttempts), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[get("/api/v1/events/{event_id}")]
async fn get_event(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let d = events::get(&st, &bot.0.id, &path_id(&id)?).await?;
    let bid = bot.0.id.as_str();
    let mut v = event_json(&d.event);
    v["deliveries"] = d
        .deliveries
        .iter()
        .map(|x| {
            json!({
                "endpoint_id": x.endpoint_id.clone().unwrap_or_else(|| default_endpoint_id(bid)),
                "status": x.status.as_str(),
                "attempts": x.attempts,
            })
        })
        .collect();
    v["attempts"] = d.attempts.iter().map(|a| attempt_json(bid, a)).collect();
    Ok(HttpResponse::Ok().json(v))
}

/// Deliver again: new attempts, the same `event_id` and body; to one
/// endpoint (`{"endpoint_id"}`) or to every endpoint it went to.
#[utoipa::path(tag = "events", request_body(content = views::RedeliverOne, description = "No body, `{}`, or `{\"endpoint_id\"}`"), responses((status = 202, description = "Queued", body = views::Redelivery), (status = 404, description = "not_found: no such event, or no delivery of it to that endpoint"), (status = 422, description = "validation_failed")), security(("api_key" = [])))]
#[post("/api/v1/events/{event_id}/redeliver")]
async fn redeliver(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let mut check = Check::new(&body.0, &["endpoint_id"])?;
    endpoint_field(&mut check);
    let views::RedeliverOne { endpoint_id } = check.typed()?;
    let endpoint = endpoint_id.map(|e| endpoint_sel(&bot.0.id, &e));
    events::redeliver(&st, &bot.0.id, &path_id(&id)?, endpoint).await?;
    Ok(HttpResponse::Accepted()
        .json(json!({"event_id": id.as_str(), "status": EventStatus::Pending.as_str()})))
}

/// Redeliver every `dead` or `failed` delivery of the chatbot (of events
/// created at or after `since`; to one endpoint or to all), each as one
/// redelivery: `{"status", "since"?, "endpoint_id"?}`.
#[utoipa::path(tag = "events", request_body = views::RedeliverAll, responses((status = 202, description = "How many were queued", body = views::RedeliveryCount), (status = 422, description = "validation_failed with pointers")), security(("api_key" = [])))]
#[post("/api/v1/events/redeliver")]
async fn redeliver_all(
    bot: Bot,
    st: web::Data<AppState>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let mut check = Check::new(&body.0, &["status", "since", "endpoint_id"])?;
    endpoint_field(&mut check);
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
    let views::RedeliverAll {
        status,
        since,
        endpoint_id,
    } = check.typed()?;
    let since = since.as_deref().and_then(parse_rfc3339);
    let endpoint = endpoint_id.map(|e| endpoint_sel(&bot.0.id, &e));
    let count = events::redeliver_all(&st, &bot.0.id, status, since, endpoint).await?;
    Ok(HttpResponse::Accepted().json(json!({"count": count})))
}

/// Send a signed `webhook.test` event through the delivery pipeline to the
/// default endpoint, to check it. Its attempts show in the deliveries log.
#[utoipa::path(tag = "events", request_body(content = views::TestEventRequest, description = "No body, or `{}`"), responses((status = 202, description = "The test event queued", body = views::EventQueued), (status = 422, description = "validation_failed")), security(("api_key" = [])))]
#[post("/api/v1/events/test")]
async fn test_event(
    bot: Bot,
    st: web::Data<AppState>,
    body: JsonBody,
    trace: super::extract::Trace,
) -> ApiResult<HttpResponse> {
    Check::new(&body.0, &[])?.finish()?;
    send_test(&st, &bot.0.id, EndpointSel::Default, trace.0).await
}

/// Send a signed `webhook.test` event to this endpoint only, whatever its
/// event types and filter (§13).
#[utoipa::path(tag = "endpoints", request_body(content = views::TestEventRequest, description = "No body, or `{}`"), responses((status = 202, description = "The test event queued", body = views::EventQueued), (status = 404, description = "not_found"), (status = 422, description = "validation_failed")), security(("api_key" = [])))]
#[post("/api/v1/endpoints/{endpoint_id}/test")]
async fn test_endpoint(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
    body: JsonBody,
    trace: super::extract::Trace,
) -> ApiResult<HttpResponse> {
    Check::new(&body.0, &[])?.finish()?;
    let endpoint = endpoint_sel(&bot.0.id, &id);
    send_test(&st, &bot.0.id, endpoint, trace.0).await
}

/// Queues a `webhook.test` of its own lane to one endpoint.
async fn send_test(
    st: &AppState,
    chatbot_id: &crate::domain::ids::ChatbotId,
    endpoint: EndpointSel,
    trace: Option<String>,
) -> ApiResult<HttpResponse> {
    let id = events::send_test(st, chatbot_id, endpoint, trace).await?;
    Ok(HttpResponse::Accepted().json(json!({"event_id": id})))
}
