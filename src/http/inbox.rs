//! The interactions inbox (chatbot API key): list, read, answer, and the
//! chatbot's live stream of interaction changes.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use bytes::Bytes;
use tokio::sync::broadcast;

use super::AppState;
use super::extract::{Bot, JsonBody, PageQuery, sealed_page};
use crate::domain::ids::{hash_secret, new_id};
use crate::domain::model::Person;
use crate::error::{ApiError, ApiResult};
use crate::hub::ApiEvent;
use crate::store::{AnswerOutcome, AnswerRequest, InteractionFilter};

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
    limit: Option<String>,
    cursor: Option<String>,
}

/// Interactions, newest first; `?status=pending|answered|expired|cancelled&conversation_id=`.
#[utoipa::path(tag = "inbox", params(InteractionsQuery), responses((status = 200, description = "Collection of interactions")), security(("api_key" = [])))]
#[get("/api/v1/interactions")]
async fn list_interactions(
    bot: Bot,
    st: web::Data<AppState>,
    q: web::Query<InteractionsQuery>,
) -> ApiResult<HttpResponse> {
    let q = q.into_inner();
    if let Some(s) = &q.status
        && !["pending", "answered", "expired", "cancelled"].contains(&s.as_str())
    {
        return Err(ApiError::field(
            "/status",
            "invalid_value",
            "status is pending, answered, expired or cancelled",
        ));
    }
    let scope = format!("interactions:{}", bot.0.id);
    let (limit, cursor) = PageQuery {
        limit: q.limit,
        cursor: q.cursor,
    }
    .parse(&st, &scope)?;
    let now = st.now_ms();
    let filter = InteractionFilter {
        status: q.status,
        conversation_id: q.conversation_id,
    };
    let page = st
        .store
        .list_interactions(&bot.0.id, filter, limit, cursor, now)
        .await?;
    let data = page.data.iter().map(|i| i.to_json(now)).collect();
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// One interaction.
#[utoipa::path(tag = "inbox", responses((status = 200, description = "The interaction"), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[get("/api/v1/interactions/{id}")]
async fn get_interaction(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let i = st.store.get_interaction(&bot.0.id, &id).await?;
    Ok(HttpResponse::Ok().json(i.to_json(st.now_ms())))
}

/// Answer an interaction as a member. `Idempotency-Key` is required.
#[utoipa::path(tag = "inbox", request_body = Object, params(("Idempotency-Key" = String, Header, description = "Required")), responses(
    (status = 200, description = "The answered interaction"),
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
) -> ApiResult<HttpResponse> {
    // Unknown or not yours: 404 before anything else.
    let inter = st.store.get_interaction(&bot.0.id, &id).await?;
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "idempotency_key_required",
                "Idempotency key required",
                "answering is a decision: send an `Idempotency-Key` header",
            )
        })?
        .to_string();
    let now = st.now_ms();
    let event_id = new_id("evt");
    let response_url = super::responses::response_url(
        &st,
        &event_id,
        &inter.message_id,
        &inter.conversation_id,
        false,
        now,
    );
    let out = st
        .store
        .answer_interaction(AnswerRequest {
            interaction_id: inter.id.clone(),
            chatbot_id: bot.0.id.clone(),
            idempotency_key: key,
            body_hash: hash_secret(&crate::domain::text::canonical(&body.0)),
            body: body.0,
            user: Person {
                kind: "member".into(),
                id: bot.0.member_id.clone(),
                display_name: format!("{} (API)", bot.0.name),
            },
            event_id,
            response_url,
            now_ms: now,
            interactive_window_ms: st.config.interactive_window.as_millis() as i64,
        })
        .await?;
    Ok(match out {
        AnswerOutcome::Answered(i) => HttpResponse::Ok().json(i.to_json(now)),
        AnswerOutcome::Repeated(v) => HttpResponse::Ok().json(v),
    })
}

fn frame(e: &ApiEvent) -> Bytes {
    Bytes::from(format!("event: {}\ndata: {}\n\n", e.kind, e.data))
}

/// Server-Sent Events of this chatbot's interactions: `interaction.created`,
/// `interaction.answered`, `interaction.expired`, `interaction.cancelled`.
#[utoipa::path(tag = "inbox", responses((status = 200, description = "text/event-stream")), security(("api_key" = [])))]
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
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .streaming(head.chain(body))
}
