//! §17 the customer portal: links made with the chatbot's key, the page's
//! exchange of a link for a session, and the page itself, which the
//! business may frame in its own admin app from the origins its chatbot
//! allows.
//!
//! A session (`ps_…`) is the page's bearer on the chatbot's deliveries
//! (`/api/v1/events…`, `/api/v1/endpoints…`, `/api/v1/chatbot…`) and on
//! nothing else; a read-only one only reads (see [`session_bot`]).

use actix_web::http::{Method, StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, guard, post, web};
use serde_json::json;
use std::time::Duration;

use super::AppState;
use super::check::Check;
use super::extract::{Bot, JsonBody};
use super::views;
use crate::domain::model::Chatbot;
use crate::domain::origins::AllowedOrigins;
use crate::domain::time::rfc3339;
use crate::domain::token::portal::{PortalGrant, PortalKind};
use crate::http::error::{ApiError, ApiResult, FieldError};
use crate::store::StoreError;
use crate::usecase::error::AppError;

pub const TTL_MIN: Duration = Duration::from_secs(60);
pub const TTL_MAX: Duration = Duration::from_secs(7 * 86400);
const TTL_DEFAULT: Duration = Duration::from_secs(3600);

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(create_link)
        .service(open_session)
        .service(rotate_own_secret);
    let get = || web::route().guard(guard::Any(guard::Get()).or(guard::Head()));
    cfg.route("/portal", get().to(shell));
    cfg.route("/portal/{chatbot_id}", get().to(page));
}

/// `POST /api/v1/portal-links`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct PortalLinkRequest {
    /// How long the link works: 1 min – 7 d, a number of seconds or
    /// `"90s"`, `"10m"`, `"2h"`, `"7d"`. Default `"1h"`.
    #[schema(value_type = Option<String>, example = "1h")]
    ttl: Option<serde_json::Value>,
    /// A link whose page shows and changes nothing. Default `false`.
    read_only: Option<bool>,
}

/// A portal link.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PortalLink {
    /// `{public_url}/portal#<token>`.
    url: String,
    expires_at: String,
    read_only: bool,
}

/// `POST /api/v1/portal-sessions`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct PortalSessionRequest {
    /// The token of a portal link (its URL's fragment).
    token: String,
    /// The chatbot the page was opened for; must be the link's.
    chatbot_id: Option<String>,
}

/// The chatbot of a portal session.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PortalChatbot {
    id: String,
    name: String,
}

/// A portal session: `session` is the bearer on the chatbot's
/// `/api/v1/events…`, `/api/v1/endpoints…` and `/api/v1/chatbot…`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PortalSession {
    session: String,
    expires_at: String,
    read_only: bool,
    chatbot: PortalChatbot,
}

/// A link to the customer portal of this key's chatbot: its token (in the
/// URL's fragment, so it reaches no server log or `Referer`) works until
/// `expires_at`; with `read_only` the page shows and changes nothing.
#[utoipa::path(tag = "portal", request_body(content = PortalLinkRequest), responses((status = 201, description = "The link", body = PortalLink), (status = 401, description = "unauthorized"), (status = 422, description = "validation_failed: `/ttl` (1 min – 7 d), `/read_only`")), security(("api_key" = [])))]
#[post("/api/v1/portal-links")]
async fn create_link(bot: Bot, st: web::Data<AppState>, body: JsonBody) -> ApiResult<HttpResponse> {
    let mut check = Check::new(&body.0, &["ttl", "read_only"])?;
    check.flag("read_only");
    let ttl = match check.get("ttl") {
        None => Some(TTL_DEFAULT),
        Some(v) => {
            let (code, message) = match crate::domain::duration::from_json(v) {
                Ok(d) if d < TTL_MIN => ("too_small", "ttl is at least 1m".to_string()),
                Ok(d) if d > TTL_MAX => ("too_large", "ttl is at most 7d".to_string()),
                Ok(d) => ("", d.as_millis().to_string()),
                Err(e) => ("invalid_duration", e),
            };
            if code.is_empty() {
                message.parse::<u64>().ok().map(Duration::from_millis)
            } else {
                check.push(FieldError::new("/ttl", code, message));
                None
            }
        }
    };
    let read_only = check
        .get("read_only")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    check.finish()?;
    let ttl = ttl.unwrap_or(TTL_DEFAULT);
    let grant = PortalGrant {
        chatbot_id: bot.0.id.clone(),
        expires_at: st.now_ms() + ttl.as_millis() as i64,
        read_only,
    };
    let token = st.server_key.issue_portal(PortalKind::Link, &grant);
    Ok(HttpResponse::Created().json(json!({
        "url": format!("{}/portal#{token}", st.public_url),
        "expires_at": rfc3339(grant.expires_at),
        "read_only": read_only,
    })))
}

/// The portal page's exchange of its link's token for a session: a
/// bearer the page keeps in memory (no cookie, so a browser's third-party
/// cookie rules never break it in a frame), valid as long as the link.
/// `chatbot_id`, when given, must be the link's chatbot (the page sends
/// the one its address, and so its framing policy, was for).
#[utoipa::path(tag = "portal", request_body(content = PortalSessionRequest), responses((status = 201, description = "The session", body = PortalSession), (status = 404, description = "not_found: an unknown or altered token"), (status = 410, description = "portal_link_expired"), (status = 422, description = "validation_failed")))]
#[post("/api/v1/portal-sessions")]
async fn open_session(st: web::Data<AppState>, body: JsonBody) -> ApiResult<HttpResponse> {
    let mut check = Check::new(&body.0, &["token", "chatbot_id"])?;
    check
        .text("token", 400, super::check::Need::Required)
        .string("chatbot_id", 64);
    let token = check
        .get("token")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string();
    let want = check
        .get("chatbot_id")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    check.finish()?;
    let grant = st
        .server_key
        .open_portal(PortalKind::Link, token.trim())
        .ok_or_else(ApiError::not_found)?;
    if want.is_some_and(|w| w != grant.chatbot_id) {
        return Err(ApiError::not_found());
    }
    if grant.expires_at <= st.now_ms() {
        return Err(expired());
    }
    let bot = crate::usecase::chatbots::get(&st, &grant.chatbot_id).await?;
    let session = st.server_key.issue_portal(PortalKind::Session, &grant);
    Ok(HttpResponse::Created().json(json!({
        "session": session,
        "expires_at": rfc3339(grant.expires_at),
        "read_only": grant.read_only,
        "chatbot": {"id": bot.id, "name": bot.name},
    })))
}

fn expired() -> ApiError {
    ApiError::new(
        StatusCode::GONE,
        "portal_link_expired",
        "Portal link expired",
        "this portal link has expired: ask for a new one",
    )
}

/// Issue a new signing secret for this key's chatbot (its default
/// endpoint); for 24 h deliveries carry signatures by both, as with
/// `POST /api/v1/chatbots/{id}/rotate-secret`.
#[utoipa::path(tag = "portal", responses((status = 200, description = "The new signing secret", body = views::SigningSecret), (status = 401, description = "unauthorized"), (status = 403, description = "read_only: a read-only portal session")), security(("api_key" = [])))]
#[post("/api/v1/chatbot/rotate-secret")]
async fn rotate_own_secret(bot: Bot, st: web::Data<AppState>) -> ApiResult<HttpResponse> {
    let secret = super::admin::rotate(&st, &bot.0.id).await?;
    Ok(HttpResponse::Ok().json(json!({"signing_secret": secret})))
}

/// The routes a portal session may use.
fn in_scope(path: &str) -> bool {
    let under = |p: &str| path == p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/'));
    under("/api/v1/events") || under("/api/v1/endpoints") || under("/api/v1/chatbot")
}

/// The chatbot of a portal session, for a request it may make: an altered,
/// expired or out-of-scope session is 401, a write with a read-only one
/// 403 `read_only`.
pub async fn session_bot(
    st: &AppState,
    token: &str,
    method: &Method,
    path: &str,
) -> Result<Chatbot, ApiError> {
    let grant = st
        .server_key
        .open_portal(PortalKind::Session, token)
        .filter(|g| g.expires_at > st.now_ms() && in_scope(path))
        .ok_or_else(ApiError::unauthorized)?;
    if grant.read_only && !(method == Method::GET || method == Method::HEAD) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "Read-only portal",
            "this portal link is read-only: it shows deliveries and changes nothing",
        ));
    }
    match crate::usecase::chatbots::get(st, &grant.chatbot_id).await {
        Ok(b) => Ok(b),
        Err(AppError::Store(StoreError::NotFound)) => Err(ApiError::unauthorized()),
        Err(e) => Err(e.into()),
    }
}

/// `/portal#<token>`: a page with no data of any chatbot, which moves on
/// to its chatbot's own address (`/portal/cb_…#<token>`), whose framing
/// policy is that chatbot's.
async fn shell(req: HttpRequest) -> HttpResponse {
    serve(&req, "frame-ancestors *".to_string())
}

/// `/portal/cb_…#<token>`: framed only from the chatbot's allowed origins.
async fn page(req: HttpRequest, st: web::Data<AppState>, id: web::Path<String>) -> HttpResponse {
    let bot = match crate::domain::ids::ChatbotId::parse(&id) {
        Some(id) => crate::usecase::chatbots::get(&st, &id).await.ok(),
        None => None,
    };
    let ancestors = match bot {
        Some(bot) => frame_ancestors(&bot.allowed_origins),
        None => "frame-ancestors 'none'".to_string(),
    };
    serve(&req, ancestors)
}

/// `frame-ancestors` for a chatbot's `allowed_origins` (`*`: any).
pub fn frame_ancestors(origins: &AllowedOrigins) -> String {
    let json = origins.to_json();
    let list: Vec<&str> = json
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if list.contains(&"*") {
        return "frame-ancestors *".to_string();
    }
    let mut s = String::from("frame-ancestors 'self'");
    for o in list {
        s.push(' ');
        s.push_str(o);
    }
    s
}

fn serve(req: &HttpRequest, ancestors: String) -> HttpResponse {
    let Some((asset, _)) = super::assets::find("portal.html") else {
        return HttpResponse::NotFound().finish();
    };
    let csp = format!("{}; {ancestors}", super::pages::CSP);
    super::assets::respond(
        req,
        asset,
        false,
        &[
            (header::CONTENT_SECURITY_POLICY, csp),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
        ],
    )
}
