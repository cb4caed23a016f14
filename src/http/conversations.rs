//! Conversations started and listed with the chatbot's API key (§16): a
//! bot can open a conversation with a person who is not in the widget yet
//! and send them a link to it.

use actix_web::{HttpResponse, get, post, web};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::check::{Check, Need};
use super::extract::{Bot, JsonBody, PageQuery, collection};
use super::{AppState, views};
use crate::domain::model::{Conversation, Person};
use crate::domain::time::rfc3339;
use crate::http::error::{ApiError, ApiResult};
use crate::usecase::conversations as uc;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(start).service(list);
}

/// The widget page on a conversation: the visitor token rides in the
/// fragment, which no browser sends to a server (nor in `Referer`).
pub fn widget_url(public_url: &str, conv: &Conversation, token: &str) -> String {
    format!(
        "{public_url}/widget?chatbot={}#conversation_id={}&visitor_token={token}",
        conv.chatbot_id, conv.id
    )
}

/// A conversation the bot started, with the link that opens it.
#[derive(Serialize, ToSchema)]
pub struct StartedConversation {
    pub conversation_id: String,
    #[schema(value_type = views::PersonDoc)]
    pub visitor: Person,
    /// `vt_…`: the credential of this conversation.
    pub visitor_token: String,
    /// Opens the widget on this conversation (the token in the fragment).
    pub widget_url: String,
}

/// One conversation of the collection.
#[derive(Serialize, ToSchema)]
pub struct ConversationItem {
    pub id: String,
    #[schema(value_type = views::PersonDoc)]
    pub visitor: Person,
    pub created_at: String,
    pub last_message_at: Option<String>,
    pub pending_interactions: i64,
}

/// `{"data": [conversation], "page": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct ConversationPage {
    pub data: Vec<ConversationItem>,
    pub page: views::Page,
}

/// Start a conversation with a person, to send them its `widget_url`.
#[utoipa::path(tag = "bot", operation_id = "bot_start_conversation", request_body(content = Option<views::NewConversation>), responses((status = 201, description = "The conversation, its visitor, the visitor token and the widget link", body = StartedConversation), (status = 422, description = "validation_failed")), security(("api_key" = [])))]
#[post("/api/v1/conversations")]
async fn start(bot: Bot, st: web::Data<AppState>, body: JsonBody) -> ApiResult<HttpResponse> {
    let mut check = Check::new(&body.0, &["display_name"])?;
    check.text("display_name", 80, Need::Optional);
    let views::NewConversation { display_name } = check.typed()?;
    let (conv, token) = uc::open(&st, &bot.0.id, display_name).await?;
    Ok(HttpResponse::Created().json(StartedConversation {
        widget_url: widget_url(&st.public_url, &conv, &token),
        conversation_id: conv.id.into_string(),
        visitor: conv.visitor,
        visitor_token: token,
    }))
}

/// `?q=&limit=&cursor=` of the conversations.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
pub struct ConversationsQuery {
    /// Only conversations matching this (1 to 200 characters): a
    /// conversation or visitor id, exactly; a part of the visitor's name or
    /// of a message's text, in any case.
    pub q: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

/// Longest search text.
const MAX_QUERY: usize = 200;

/// This chatbot's conversations, newest first; `q` searches them.
#[utoipa::path(tag = "bot", operation_id = "bot_list_conversations", params(ConversationsQuery), responses((status = 200, description = "Conversations, newest first", body = ConversationPage), (status = 422, description = "validation_failed")), security(("api_key" = [])))]
#[get("/api/v1/conversations")]
async fn list(
    bot: Bot,
    st: web::Data<AppState>,
    q: web::Query<ConversationsQuery>,
) -> ApiResult<HttpResponse> {
    let q = q.into_inner();
    let search = match q.q.map(|s| s.trim().to_string()) {
        Some(s) if s.is_empty() || s.chars().count() > MAX_QUERY => {
            return Err(ApiError::field(
                "/q",
                "invalid_value",
                "q is 1 to 200 characters",
            ));
        }
        other => other,
    };
    let (limit, _) = PageQuery {
        limit: q.limit,
        cursor: None,
    }
    .parse(&st, "conversations")?;
    let cursor = match q.cursor {
        Some(c) if c.starts_with("conv_") && c.len() <= 40 => Some(c),
        Some(_) => {
            return Err(ApiError::field(
                "/cursor",
                "invalid_cursor",
                "not a cursor of this collection (pass next_cursor as given)",
            ));
        }
        None => None,
    };
    let now = st.now_ms();
    let page = uc::list(&st, &bot.0.id, search, limit, cursor, now).await?;
    let data = page
        .data
        .into_iter()
        .map(|s| {
            json!({
                "id": s.conversation.id,
                "visitor": s.conversation.visitor,
                "created_at": rfc3339(s.conversation.created_at),
                "last_message_at": s.last_message_at.map(rfc3339),
                "pending_interactions": s.pending_interactions,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(collection(data, page.next_cursor)))
}
