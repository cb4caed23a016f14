//! Admin: chatbots (admin token).

use actix_web::{HttpResponse, get, patch, post, web};
use serde_json::{Value, json};
use std::time::Duration;

use super::check::{Check, Need};
use super::extract::{Admin, JsonBody, collection, path_id};
use super::{AppState, views};
use crate::domain::endpoints::default_endpoint_id;
use crate::domain::model::Chatbot;
use crate::domain::origins::AllowedOrigins;
use crate::http::error::{ApiError, ApiResult, FieldError};
use crate::usecase::chatbots as uc;
use crate::usecase::endpoints::url_refusal;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(create_chatbot)
        .service(list_chatbots)
        .service(get_chatbot)
        .service(update_chatbot)
        .service(rotate_secret);
}

/// The shortest and longest `retention` (§10).
pub const RETENTION_MIN: Duration = Duration::from_secs(1);
pub const RETENTION_MAX: Duration = Duration::from_secs(3650 * 86400);

fn retention(check: &mut Check) -> Option<Duration> {
    let v = check.get("retention")?;
    let (code, message) = match crate::domain::duration::from_json(v) {
        Ok(d) if d < RETENTION_MIN => ("too_small", "retention is at least 1s".to_string()),
        Ok(d) if d > RETENTION_MAX => ("too_large", "retention is at most 3650d".to_string()),
        Ok(d) => return Some(d),
        Err(e) => ("invalid_duration", e),
    };
    check.push(FieldError::new("/retention", code, message));
    None
}

/// `allowed_origins` of a body (§9), if given.
fn allowed_origins(check: &mut Check) -> Option<AllowedOrigins> {
    match AllowedOrigins::parse(check.get("allowed_origins")?) {
        Ok(o) => Some(o),
        Err(e) => {
            e.into_iter().for_each(|f| check.push(f));
            None
        }
    }
}

/// The `webhook_url` of a body, if it is a text: refused if it is not a
/// URL or names a private address.
async fn check_webhook(st: &AppState, check: &mut Check<'_>) {
    let Some(url) = check
        .get("webhook_url")
        .and_then(Value::as_str)
        .filter(|_| check.passed("webhook_url"))
    else {
        return;
    };
    if let Some(refusal) = url_refusal(st, url, "/webhook_url").await {
        check.push(refusal);
    }
}

/// Create a chatbot. The API key is shown only in this answer.
#[utoipa::path(tag = "admin", request_body = views::NewChatbot, responses((status = 201, description = "The chatbot with its api_key and signing_secret", body = views::CreatedChatbot), (status = 422, description = "validation_failed (`private_address` for a webhook_url on a private address without `--allow-private-webhooks`)")), security(("admin_token" = [])))]
#[post("/api/v1/chatbots")]
async fn create_chatbot(
    _: Admin,
    st: web::Data<AppState>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let mut check = Check::new(
        &body.0,
        &["name", "webhook_url", "retention", "allowed_origins"],
    )?;
    check
        .text("name", 200, Need::Required)
        .text("webhook_url", 2000, Need::Required);
    check_webhook(&st, &mut check).await;
    let retention = retention(&mut check).unwrap_or(Duration::from_secs(90 * 86400));
    let allowed_origins = allowed_origins(&mut check).unwrap_or_default();
    let views::NewChatbot {
        name, webhook_url, ..
    } = check.typed()?;
    let (bot, api_key) = uc::create(&st, name, webhook_url, retention, allowed_origins).await?;
    let mut out = bot.to_json();
    out["api_key"] = json!(api_key);
    out["signing_secret"] = json!(bot.signing_secret);
    Ok(HttpResponse::Created().json(out))
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
struct ChatbotsQuery {
    limit: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// Every chatbot, newest first (no secrets).
#[utoipa::path(tag = "admin", params(ChatbotsQuery), responses((status = 200, description = "Chatbots, newest first", body = views::ChatbotPage), (status = 422, description = "validation_failed")), security(("admin_token" = [])))]
#[get("/api/v1/chatbots")]
async fn list_chatbots(
    _: Admin,
    st: web::Data<AppState>,
    q: web::Query<ChatbotsQuery>,
) -> ApiResult<HttpResponse> {
    let q = q.into_inner();
    let (limit, _) = super::extract::PageQuery {
        limit: q.limit,
        cursor: None,
    }
    .parse(&st, "chatbots")?;
    let cursor = match q.cursor {
        Some(c) if c.starts_with("cb_") && c.len() <= 40 => Some(c),
        Some(_) => {
            return Err(ApiError::field(
                "/cursor",
                "invalid_cursor",
                "unknown cursor",
            ));
        }
        None => None,
    };
    let page = uc::list(&st, limit, cursor).await?;
    let data = page.data.iter().map(Chatbot::to_json).collect();
    Ok(HttpResponse::Ok().json(collection(data, page.next_cursor)))
}

/// Get a chatbot.
#[utoipa::path(tag = "admin", responses((status = 200, description = "The chatbot", body = views::Chatbot)), security(("admin_token" = [])))]
#[get("/api/v1/chatbots/{id}")]
async fn get_chatbot(
    _: Admin,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let bot = uc::get(&st, &path_id(&id)?).await?;
    Ok(HttpResponse::Ok().json(bot.to_json()))
}

/// Change a chatbot's `name`, `webhook_url`, `retention` or
/// `allowed_origins`. A new
/// `webhook_url` re-enables an endpoint disabled by `410 Gone`.
#[utoipa::path(tag = "admin", request_body = views::ChatbotChange, responses((status = 200, description = "The chatbot", body = views::Chatbot)), security(("admin_token" = [])))]
#[patch("/api/v1/chatbots/{id}")]
async fn update_chatbot(
    _: Admin,
    st: web::Data<AppState>,
    id: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let bot = uc::get(&st, &path_id(&id)?).await?;
    let mut check = Check::new(
        &body.0,
        &[
            "name",
            "webhook_url",
            "retention",
            "endpoint_disabled",
            "allowed_origins",
        ],
    )?;
    check
        .text("name", 200, Need::Optional)
        .text("webhook_url", 2000, Need::Optional)
        .flag("endpoint_disabled");
    check_webhook(&st, &mut check).await;
    let retention = retention(&mut check);
    let origins = allowed_origins(&mut check);
    let views::ChatbotChange {
        name,
        webhook_url: url,
        endpoint_disabled: enable,
        ..
    } = check.typed()?;
    let change = uc::ChatbotChange {
        name,
        webhook_url: url,
        endpoint_disabled: enable,
        retention,
        allowed_origins: origins,
    };
    let bot = uc::update(&st, bot, change).await?;
    Ok(HttpResponse::Ok().json(bot.to_json()))
}

/// Issue a new signing secret; for 24 h deliveries carry signatures by both.
#[utoipa::path(tag = "admin", responses((status = 200, description = "The new signing secret", body = views::SigningSecret)), security(("admin_token" = [])))]
#[post("/api/v1/chatbots/{id}/rotate-secret")]
async fn rotate_secret(
    _: Admin,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let secret = rotate(&st, &path_id(&id)?).await?;
    Ok(HttpResponse::Ok().json(json!({"signing_secret": secret})))
}

/// A new signing secret for chatbot `id` (its default endpoint's); the
/// old one signs too for 24 h.
pub async fn rotate(st: &AppState, id: &crate::domain::ids::ChatbotId) -> ApiResult<String> {
    Ok(crate::usecase::endpoints::rotate(st, id, &default_endpoint_id(id)).await?)
}
