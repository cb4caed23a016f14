//! Bot API (chatbot API key): messages, takeover, and the deliveries log.

use actix_web::{HttpResponse, delete, get, post, web};
use serde_json::json;

use super::check::{Check, Need};
use super::extract::{Bot, JsonBody, PageQuery, path_id, sealed_page};
use super::{AppState, views};
use crate::domain::model::{Conversation, Person};
use crate::http::error::ApiResult;
use crate::schemas::Schemas;
use crate::usecase::bot as uc;
use crate::usecase::content::parse_content;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(post_message)
        .service(list_messages)
        .service(takeover)
        .service(own_chatbot)
        .service(erase_conversation);
}

/// The conversation of the path, if it belongs to this chatbot (404
/// otherwise, and for an id that is not a conversation's).
async fn conversation(st: &AppState, bot: &Bot, cid: &str) -> ApiResult<Conversation> {
    Ok(uc::conversation(st, &bot.0.id, &path_id(cid)?).await?)
}

/// Post a bot message with optional `actions` and `form` blocks.
#[utoipa::path(tag = "bot", request_body = super::openapi::NewMessage, responses((status = 201, description = "The message", body = views::Message), (status = 422, description = "validation_failed with pointers")), security(("api_key" = [])))]
#[post("/api/v1/conversations/{cid}/messages")]
async fn post_message(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let conv = conversation(&st, &bot, &cid).await?;
    let (content, _) = parse_content(&body.0, &Schemas::get().message)?;
    let msg = uc::post_message(&st, &bot.0.id, &conv, content).await?;
    Ok(HttpResponse::Created().json(msg))
}

/// Messages of a conversation, newest first.
#[utoipa::path(tag = "bot", params(PageQuery), responses((status = 200, description = "Messages, newest first", body = views::MessagePage)), security(("api_key" = [])))]
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
    let page = crate::usecase::conversations::messages(&st, &conv.id, limit, cursor).await?;
    let data = page
        .data
        .into_iter()
        .map(|m| {
            let m = super::ask::attachments::for_api(&st.public_url, m);
            serde_json::to_value(super::widget::view(&st, &conv, bot.0.retention_ms, m))
                .unwrap_or_default()
        })
        .collect();
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// A human takes over: every block of the conversation turns off.
#[utoipa::path(tag = "bot", request_body = views::Takeover, responses((status = 200, description = "Taken over", body = views::TakenOver)), security(("api_key" = [])))]
#[post("/api/v1/conversations/{cid}/takeover")]
async fn takeover(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let conv = conversation(&st, &bot, &cid).await?;
    let mut check = Check::new(&body.0, &["member"])?;
    check.nested("member", &["id", "display_name"], |m| {
        m.text("id", 200, Need::Optional)
            .text("display_name", 80, Need::Optional);
    });
    let views::Takeover { member } = check.typed()?;
    let member = member.unwrap_or_default();
    let id = member.id.unwrap_or_else(|| bot.0.member_id.clone());
    let display_name = member.display_name.unwrap_or_else(|| "Support".into());
    let person = Person {
        kind: "member".into(),
        id,
        display_name,
    };
    uc::takeover(&st, &conv.id, person.clone()).await?;
    Ok(HttpResponse::Ok().json(json!({"conversation_id": conv.id, "taken_over_by": person})))
}

/// The chatbot this key belongs to (name, endpoint URL; no secret), so that
/// a reviewer signed in with the key sees what they are looking at.
#[utoipa::path(tag = "bot", responses((status = 200, description = "The chatbot", body = views::Chatbot), (status = 401, description = "unauthorized")), security(("api_key" = [])))]
#[get("/api/v1/chatbot")]
async fn own_chatbot(bot: Bot) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(bot.0.to_json()))
}

/// Erase a conversation now with everything in it: messages, interactions,
/// events and their attempts, stream entries, idempotency records. Its
/// pending deliveries are never sent.
#[utoipa::path(tag = "bot", responses((status = 204, description = "Erased: the visitor token is refused from now on and the conversation's messages, events, interactions and response_urls are not found"), (status = 401, description = "unauthorized"), (status = 404, description = "not_found (also a second DELETE, or another chatbot's conversation)")), security(("api_key" = [])))]
#[delete("/api/v1/conversations/{cid}")]
async fn erase_conversation(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let conv = conversation(&st, &bot, &cid).await?;
    uc::erase(&st, &bot.0.id, &conv.id).await?;
    Ok(HttpResponse::NoContent().finish())
}
