//! The interactions inbox (chatbot API key): list, read, answer, and the
//! chatbot's live stream of interaction changes.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::extract::{Bot, JsonBody, PageQuery, path_id, sealed_page};
use super::{AppState, views};
use crate::domain::status::InteractionStatus;
use crate::http::error::{ApiError, ApiResult};
use crate::hub::ApiEvent;
use crate::store::{AnswerOutcome, InteractionFilter};
use crate::usecase::inbox;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(list_interactions)
        .service(get_interaction)
        .service(respond)
        .service(api_stream);
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
struct InteractionsQuery {
    status: Option<String>,
    conversation_id: Option<String>,
    /// `context`: each interaction also carries `context` (the visitor and
    /// the visitor's message the question answers), for a reviewer.
    expand: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

/// Interactions, newest first; `?status=pending|answered|expired|cancelled&conversation_id=`.
#[utoipa::path(tag = "inbox", params(InteractionsQuery), responses((status = 200, description = "Interactions, newest first", body = views::InteractionPage)), security(("api_key" = [])))]
#[get("/api/v1/interactions")]
async fn list_interactions(
    bot: Bot,
    st: web::Data<AppState>,
    q: web::Query<InteractionsQuery>,
) -> ApiResult<HttpResponse> {
    let q = q.into_inner();
    let status = match q.status.as_deref().map(str::parse::<InteractionStatus>) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(_)) => {
            return Err(ApiError::field(
                "/status",
                "invalid_value",
                "status is pending, answered, expired or cancelled",
            ));
        }
    };
    let expand = match q.expand.as_deref() {
        None => false,
        Some("context") => true,
        Some(_) => {
            return Err(ApiError::field(
                "/expand",
                "invalid_value",
                "expand is context",
            ));
        }
    };
    let scope = format!("interactions:{}", bot.0.id);
    let (limit, cursor) = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    }
    .parse(&st, &scope)?;
    let now = st.now_ms();
    let filter = InteractionFilter {
        status,
        conversation_id: q.conversation_id,
    };
    let page = inbox::list(&st, &bot.0.id, filter, limit, cursor, now).await?;
    let mut data: Vec<Value> = page.data.iter().map(|i| i.to_json(now)).collect();
    if expand {
        for (v, c) in data.iter_mut().zip(inbox::contexts(&st, &page.data).await?) {
            v["context"] = c;
        }
    }
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// One interaction.
#[utoipa::path(tag = "inbox", responses((status = 200, description = "The interaction", body = views::Interaction)), security(("api_key" = [])))]
#[get("/api/v1/interactions/{id}")]
async fn get_interaction(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let i = inbox::get(&st, &bot.0.id, &path_id(&id)?).await?;
    Ok(HttpResponse::Ok().json(i.to_json(st.now_ms())))
}

/// Answer an interaction as a member. `Idempotency-Key` is required.
#[utoipa::path(tag = "inbox", request_body = views::Answer, params(("Idempotency-Key" = String, Header, description = "Required")), responses(
    (status = 200, description = "The answered interaction", body = views::Interaction),
    (status = 400, description = "idempotency_key_required"),
    (status = 404, description = "not_found"),
    (status = 409, description = "interaction_not_pending or idempotency_key_conflict"),
    (status = 422, description = "interaction_type_mismatch or validation_failed")), security(("api_key" = [])))]
#[post("/api/v1/interactions/{id}/responses")]
async fn respond(
    req: HttpRequest,
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
    body: JsonBody,
    trace: super::extract::Trace,
) -> ApiResult<HttpResponse> {
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let now = st.now_ms();
    Ok(
        match inbox::answer(&st, &bot.0, &path_id(&id)?, key, body.0, trace.0, now).await? {
            AnswerOutcome::Answered(i) => HttpResponse::Ok().json(i.to_json(now)),
            AnswerOutcome::Repeated(v) => HttpResponse::Ok().json(v),
        },
    )
}

fn frame(e: &ApiEvent) -> Bytes {
    Bytes::from(format!("event: {}\ndata: {}\n\n", e.kind, e.data))
}

/// Server-Sent Events of this chatbot's interactions: `interaction.created`,
/// `interaction.answered`, `interaction.expired`, `interaction.cancelled`.
#[utoipa::path(tag = "inbox", responses((status = 200, description = "Server-Sent Events: `interaction.created`, `interaction.answered`, `interaction.expired`, `interaction.cancelled`; each `data:` is the interaction", content_type = "text/event-stream", body = String)), security(("api_key" = [])))]
#[get("/api/v1/stream")]
async fn api_stream(bot: Bot, st: web::Data<AppState>) -> HttpResponse {
    let rx = st.hub.api.subscribe();
    let chatbot_id = bot.0.id;
    let head = futures_util::stream::once(async {
        Ok::<Bytes, actix_web::Error>(Bytes::from_static(b": connected\n\n"))
    });
    let body = futures_util::stream::unfold((rx, chatbot_id), |(mut rx, cid)| async move {
        loop {
            match tokio::time::timeout(Duration::from_secs(15), rx.recv()).await {
                Err(_) => return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), (rx, cid))),
                Ok(Ok(e)) if e.chatbot_id == cid => return Some((Ok(frame(&e)), (rx, cid))),
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
                Ok(Err(broadcast::error::RecvError::Closed)) => return None,
            }
        }
    });
    use futures_util::StreamExt;
    // A shutdown ends the stream; the client reconnects.
    let body = body.take_until(st.stopping.clone().cancelled_owned());
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .streaming(head.chain(body))
}
