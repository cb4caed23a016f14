//! An ask's attachment: stored with the question, listed on its message,
//! and served to the conversation's visitor (`/widget/v1/attachments/{id}`)
//! and to the chatbot (`/api/v1/attachments/{id}`), to no one else.

use actix_web::http::header::{
    Charset, ContentDisposition, DispositionParam, DispositionType, ExtendedValue,
};
use actix_web::{HttpResponse, get, web};

use crate::domain::attachment::{Attachment, AttachmentRef, Upload, ascii_fallback};
use crate::domain::model::Message;
use crate::http::AppState;
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{Bot, Visitor};

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(widget_attachment).service(api_attachment);
}

/// Where the chatbot reads an attachment (`/api/v1`, with its API key).
pub fn api_url(public_url: &str, id: &str) -> String {
    format!("{public_url}/api/v1/attachments/{id}")
}

/// A message as read through `/api/v1`: its attachments at the API's url
/// (the stored one is the widget's).
pub fn for_api(public_url: &str, mut msg: Message) -> Message {
    for a in &mut msg.attachments {
        a.url = api_url(public_url, &a.id);
    }
    msg
}

/// Stores `upload` for `msg` and lists it on the message; its id.
pub(super) async fn store(
    st: &AppState,
    chatbot_id: &crate::domain::ids::ChatbotId,
    msg: &mut Message,
    upload: Upload,
    now_ms: i64,
) -> ApiResult<String> {
    let id = crate::domain::ids::new_id("att");
    msg.attachments.push(AttachmentRef {
        id: id.clone(),
        filename: upload.filename.clone(),
        content_type: upload.content_type.clone(),
        size: upload.data.len() as u64,
        url: format!("{}/widget/v1/attachments/{id}", st.public_url),
    });
    crate::usecase::ask::save_attachment(
        st,
        Attachment {
            id: id.clone(),
            chatbot_id: chatbot_id.clone(),
            conversation_id: msg.conversation_id.clone(),
            message_id: msg.id.clone(),
            filename: upload.filename,
            content_type: upload.content_type,
            data: upload.data,
            created_at: now_ms,
        },
    )
    .await?;
    Ok(id)
}

/// The bytes, as a download: never rendered by the browser, never sniffed.
fn download(a: Attachment) -> HttpResponse {
    let disposition = ContentDisposition {
        disposition: DispositionType::Attachment,
        parameters: vec![
            DispositionParam::Filename(ascii_fallback(&a.filename)),
            DispositionParam::FilenameExt(ExtendedValue {
                charset: Charset::Ext("UTF-8".into()),
                language_tag: None,
                value: a.filename.into_bytes(),
            }),
        ],
    };
    HttpResponse::Ok()
        .content_type(a.content_type)
        .insert_header(disposition)
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Cache-Control", "private, no-store"))
        .insert_header(("Content-Security-Policy", "default-src 'none'; sandbox"))
        .body(a.data)
}

/// An attachment of the visitor's conversation.
#[utoipa::path(tag = "widget", responses(
    (status = 200, description = "The file, Content-Disposition: attachment", content_type = "*/*", body = Vec<u8>),
    (status = 404, description = "not_found")), security(("visitor_token" = [])))]
#[get("/widget/v1/attachments/{id}")]
async fn widget_attachment(
    visitor: Visitor,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let a = crate::usecase::ask::attachment(&st, &id).await?;
    if a.conversation_id != visitor.0.id {
        return Err(ApiError::not_found());
    }
    Ok(download(a))
}

/// An attachment of one of the chatbot's questions.
#[utoipa::path(tag = "ask", responses(
    (status = 200, description = "The file, Content-Disposition: attachment", content_type = "*/*", body = Vec<u8>),
    (status = 404, description = "not_found")), security(("api_key" = [])))]
#[get("/api/v1/attachments/{id}")]
async fn api_attachment(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let a = crate::usecase::ask::attachment(&st, &id).await?;
    if a.chatbot_id != bot.0.id {
        return Err(ApiError::not_found());
    }
    Ok(download(a))
}
