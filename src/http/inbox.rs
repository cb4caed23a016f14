//! The interactions inbox (chatbot API key): list, read, answer, and the
//! chatbot's live stream of interaction changes.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use super::extract::{Bot, JsonBody, PageQuery, sealed_page};
use super::{AppState, views};
use crate::domain::ids::{hash_secret, new_id};
use crate::domain::model::Person;
use crate::domain::status::InteractionStatus;
use crate::http::error::{ApiError, ApiResult};
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
    let page = st
        .store
        .list_interactions(&bot.0.id, filter, limit, cursor, now)
        .await?;
    let mut data: Vec<Value> = page.data.iter().map(|i| i.to_json(now)).collect();
    if expand {
        let mut known = std::collections::HashMap::new();
        for (v, i) in data.iter_mut().zip(&page.data) {
            v["context"] = context(&st, i, &mut known).await?;
        }
    }
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// How many of a conversation's newest messages are searched for the
/// visitor's message a question answers.
const CONTEXT_MESSAGES: usize = 50;

/// `{"visitor", "in_reply_to": {"message_id", "text", "created_at"} | null,
/// "option_styles": {action_id: style}}`: who the interaction is with, the
/// visitor's last message before it, and its buttons' styles.
async fn context(
    st: &AppState,
    i: &crate::domain::inbox::Interaction,
    known: &mut std::collections::HashMap<String, (Value, Vec<crate::domain::model::Message>)>,
) -> ApiResult<Value> {
    if !known.contains_key(&i.conversation_id) {
        let conv = st.store.get_conversation(&i.conversation_id).await?;
        let msgs = st
            .store
            .list_messages(&i.conversation_id, CONTEXT_MESSAGES, None)
            .await?
            .data;
        let visitor = serde_json::to_value(&conv.visitor).unwrap_or(Value::Null);
        known.insert(i.conversation_id.clone(), (visitor, msgs));
    }
    let Some((visitor, msgs)) = known.get(&i.conversation_id) else {
        return Ok(Value::Null);
    };
    // Newest first: the first visitor message older than the question's.
    let asked = msgs.iter().position(|m| m.id == i.message_id);
    let before = asked.map_or(&msgs[..0], |n| &msgs[n + 1..]);
    let reply_to = before.iter().find(
        |m| matches!(&m.author, crate::domain::model::Author::Person(p) if p.kind == "visitor"),
    );
    // The button styles of the question, so a reviewer sees them as the
    // visitor does (`payload.options` carries id and label only).
    let question = match asked {
        Some(n) => msgs.get(n).cloned(),
        None => st.store.get_message(&i.message_id).await.ok(),
    };
    let mut styles = serde_json::Map::new();
    for b in question.iter().flat_map(|m| &m.blocks) {
        if let crate::domain::blocks::Block::Actions { elements, .. } = b {
            for e in elements.iter().filter(|e| !e.is_link()) {
                if let Some(style) = &e.style {
                    styles.insert(e.action_id.clone(), Value::String(style.clone()));
                }
            }
        }
    }
    Ok(serde_json::json!({
        "option_styles": styles,
        "visitor": visitor,
        "in_reply_to": reply_to.map(|m| serde_json::json!({
            "message_id": m.id,
            "text": m.text,
            "created_at": m.created_at,
        })),
    }))
}

/// One interaction.
#[utoipa::path(tag = "inbox", responses((status = 200, description = "The interaction", body = views::Interaction)), security(("api_key" = [])))]
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
            interactive_window_ms: st.settings.interactive_window.as_millis() as i64,
            trace: trace.0,
        })
        .await?;
    Ok(match out {
        AnswerOutcome::Answered(i) => {
            crate::telemetry::metrics::event_accepted(
                crate::telemetry::metrics::answer_event_type(&i.kind),
            );
            HttpResponse::Ok().json(i.to_json(now))
        }
        AnswerOutcome::Repeated(v) => HttpResponse::Ok().json(v),
    })
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
