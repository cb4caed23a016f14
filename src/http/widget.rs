//! Widget API (visitor token): conversations, messages, clicks, form
//! submits and the live stream.

use actix_web::{HttpRequest, HttpResponse, get, post, web};
use serde_json::json;

use super::check::{Check, Need};
use super::extract::{JsonBody, PageQuery, Visitor, check_origin, origin, path_id, sealed_page};
use super::{AppState, views};
use crate::domain::interact::{Action, Context, closure_reason, present};
use crate::domain::model::{Conversation, Message};
use crate::http::error::{ApiError, ApiResult};
use crate::usecase::widget;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(click)
        .service(submit_form)
        .service(create_conversation)
        .service(list_messages)
        .service(post_message)
        .service(super::responses::widget_stream);
}

/// Shows messages as the widget should see them: blocks closed by time,
/// takeover or retention are shown off with that reason.
pub fn view(st: &AppState, conv: &Conversation, retention_ms: i64, mut msg: Message) -> Message {
    let user = &conv.visitor;
    let ctx = Context {
        now_ms: st.now_ms(),
        interactive_window_ms: st.settings.interactive_window.as_millis() as i64,
        retention_ms,
        conversation_created_ms: conv.created_at,
        taken_over: conv.taken_over_by.is_some(),
        chatbot_id: &conv.chatbot_id,
        user,
        event_id: "",
        response_url: "",
        allow_comment: false,
        require_one_checked: false,
        answer: None,
    };
    let reason = closure_reason(&ctx, &msg);
    present(&mut msg, reason);
    msg
}

/// Start a conversation as a visitor.
#[utoipa::path(tag = "widget", request_body(content = Option<views::NewConversation>), responses((status = 403, description = "origin_not_allowed: the chatbot does not allow the request's Origin"), (status = 201, description = "The conversation, its visitor and the visitor token", body = views::CreatedConversation)))]
#[post("/widget/v1/chatbots/{chatbot_id}/conversations")]
async fn create_conversation(
    req: HttpRequest,
    st: web::Data<AppState>,
    chatbot_id: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    super::guard::conversation(&st, &req)?;
    let bot = crate::usecase::chatbots::get(&st, &path_id(&chatbot_id)?).await?;
    check_origin(origin(&req), &bot.allowed_origins)?;
    let mut check = Check::new(&body.0, &["display_name"])?;
    check.text("display_name", 80, Need::Optional);
    let views::NewConversation { display_name } = check.typed()?;
    let (conv, token) = crate::usecase::conversations::open(&st, &bot.id, display_name).await?;
    Ok(HttpResponse::Created().json(json!({
        "conversation_id": conv.id,
        "visitor": conv.visitor,
        "visitor_token": token,
    })))
}

fn own(v: &Visitor, cid: &str) -> ApiResult<()> {
    if v.0.id == cid {
        Ok(())
    } else {
        Err(ApiError::not_found())
    }
}

/// Messages of the visitor's conversation, newest first.
#[utoipa::path(tag = "widget", operation_id = "widget_list_messages", params(PageQuery), responses((status = 403, description = "origin_not_allowed: the chatbot does not allow the request's Origin"), (status = 200, description = "Messages, newest first", body = views::MessagePage)), security(("visitor_token" = [])))]
#[get("/widget/v1/conversations/{cid}/messages")]
async fn list_messages(
    v: Visitor,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    q: web::Query<PageQuery>,
) -> ApiResult<HttpResponse> {
    own(&v, &cid)?;
    let scope = format!("messages:{cid}");
    let (limit, cursor) = q.parse(&st, &scope)?;
    let bot = crate::usecase::chatbots::get(&st, &v.0.chatbot_id).await?;
    let page = crate::usecase::conversations::messages(&st, &v.0.id, limit, cursor).await?;
    let data = page
        .data
        .into_iter()
        .map(|m| serde_json::to_value(view(&st, &v.0, bot.retention_ms, m)).unwrap_or_default())
        .collect();
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, page.next_cursor)))
}

/// A visitor's message; emits `message.received`.
#[utoipa::path(tag = "widget", operation_id = "widget_post_message", request_body = views::VisitorMessage, responses((status = 403, description = "origin_not_allowed: the chatbot does not allow the request's Origin"), (status = 201, description = "The message", body = views::Message)), security(("visitor_token" = [])))]
#[post("/widget/v1/conversations/{cid}/messages")]
async fn post_message(
    v: Visitor,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    body: JsonBody,
    trace: super::extract::Trace,
) -> ApiResult<HttpResponse> {
    own(&v, &cid)?;
    super::guard::visitor_write(&st, &v.0.id)?;
    let mut check = Check::new(&body.0, &["text"])?;
    check.text("text", 4000, Need::Required);
    let views::VisitorMessage { text } = check.typed()?;
    let msg = widget::post_message(&st, &v.0, text, trace.0).await?;
    Ok(HttpResponse::Created().json(msg))
}

async fn interact(
    st: &AppState,
    v: &Visitor,
    message_id: String,
    action: Action,
    trace: Option<String>,
) -> ApiResult<HttpResponse> {
    let message_id = path_id(&message_id)?;
    let out = widget::interact(st, &v.0, message_id, action, trace).await?;
    Ok(match &out.json {
        Some(json) => {
            let mut body = String::with_capacity(json.len() + 12);
            body.push_str("{\"message\":");
            body.push_str(json);
            body.push('}');
            HttpResponse::Ok()
                .content_type(actix_web::http::header::ContentType::json())
                .body(body)
        }
        None => HttpResponse::Ok().json(MessageBody {
            message: &out.message,
        }),
    })
}

/// `{"message": …}`, serialized straight from the message.
#[derive(serde::Serialize)]
struct MessageBody<'a> {
    message: &'a Message,
}

/// A click on a button. Exactly one of concurrent clicks on a group that
/// turns off on click is accepted.
#[utoipa::path(tag = "widget", request_body = views::Click, responses(
    (status = 403, description = "origin_not_allowed: the chatbot does not allow the request's Origin"),
    (status = 200, description = "The message with the new block state", body = views::MessageEnvelope),
    (status = 409, description = "block_disabled"),
    (status = 410, description = "interaction_closed"),
    (status = 422, description = "link_button or validation_failed"),
    (status = 404, description = "not_found")), security(("visitor_token" = [])))]
#[post("/widget/v1/messages/{mid}/clicks")]
async fn click(
    v: Visitor,
    st: web::Data<AppState>,
    mid: web::Path<String>,
    body: JsonBody,
    trace: super::extract::Trace,
) -> ApiResult<HttpResponse> {
    super::guard::visitor_write(&st, &v.0.id)?;
    let mut check = Check::new(&body.0, &["block_id", "action_id", "comment"])?;
    check
        // Any length: an id no block has is a 404, as for any unknown one.
        .text("block_id", usize::MAX, Need::Required)
        .text("action_id", usize::MAX, Need::Required)
        .string("comment", 2000);
    let views::Click {
        block_id,
        action_id,
        comment,
    } = check.typed()?;
    interact(
        &st,
        &v,
        mid.into_inner(),
        Action::Click {
            block_id,
            action_id,
            comment,
        },
        trace.0,
    )
    .await
}

/// A form submit. Values are checked against the stored fields; on any
/// failure nothing is stored or sent.
#[utoipa::path(tag = "widget", request_body = views::FormSubmit, responses(
    (status = 403, description = "origin_not_allowed: the chatbot does not allow the request's Origin"),
    (status = 200, description = "The message with the new block state", body = views::MessageEnvelope),
    (status = 409, description = "block_disabled"),
    (status = 410, description = "interaction_closed"),
    (status = 422, description = "validation_failed, one entry per bad field"),
    (status = 404, description = "not_found")), security(("visitor_token" = [])))]
#[post("/widget/v1/messages/{mid}/forms/{form_id}")]
async fn submit_form(
    v: Visitor,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
    trace: super::extract::Trace,
) -> ApiResult<HttpResponse> {
    let (mid, form_id) = path.into_inner();
    super::guard::visitor_write(&st, &v.0.id)?;
    let mut check = Check::new(&body.0, &["values"])?;
    check.object("values");
    let views::FormSubmit { values } = check.typed()?;
    let values = values.unwrap_or_default();
    interact(&st, &v, mid, Action::Submit { form_id, values }, trace.0).await
}
