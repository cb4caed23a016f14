//! Request extractors: JSON bodies with problem+json errors for 400/413/415,
//! and the three bearer credentials.

use std::future::Future;
use std::pin::Pin;

use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpRequest, dev::Payload, web};
use futures_util::StreamExt;
use serde_json::Value;

use super::AppState;
use crate::domain::ids::{TypedId, hash_secret};
use crate::domain::model::{Chatbot, Conversation};
use crate::domain::origins::AllowedOrigins;
use crate::http::error::ApiError;
use crate::store::StoreError;
use crate::usecase::access;
use crate::usecase::error::AppError;

pub const WIDGET_LIMIT: usize = 64 * 1024;
pub const API_LIMIT: usize = 1024 * 1024;

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        "Payload too large",
        format!("the body is over the limit of {} KiB", limit / 1024),
    )
}

/// `--body-timeout` when no state is at hand.
const DEFAULT_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// 408: the body did not fully arrive in time; the connection is closed
/// (`conns::track`).
fn body_timed_out(after: std::time::Duration) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "request_timeout",
        "Request timeout",
        format!(
            "the request body did not arrive within {}",
            humantime::format_duration(after)
        ),
    )
}

/// A JSON object body. Content type must be `application/json`.
pub struct JsonBody(pub Value);

impl FromRequest for JsonBody {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let limit = if req.path().starts_with("/widget/") {
            WIDGET_LIMIT
        } else {
            API_LIMIT
        };
        let has_ct = req
            .headers()
            .contains_key(actix_web::http::header::CONTENT_TYPE);
        let ct_ok = req
            .headers()
            .get(actix_web::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let mime = v
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
                mime == "application/json" || mime.ends_with("+json")
            })
            .unwrap_or(false);
        let declared = req
            .headers()
            .get(actix_web::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let mut payload = payload.take();
        let body_timeout = req
            .app_data::<web::Data<AppState>>()
            .map_or(DEFAULT_BODY_TIMEOUT, |st| st.settings.body_timeout);
        let req = req.clone();
        Box::pin(async move {
            if declared.is_some_and(|n| n > limit) {
                return Err(too_large(limit));
            }
            // The client's turn until the body is in, at most `--body-timeout`.
            super::conns::reading_body(&req);
            let read = async {
                let mut body = web::BytesMut::new();
                while let Some(chunk) = payload.next().await {
                    let chunk = chunk.map_err(|e| ApiError::malformed_json(e.to_string()))?;
                    if body.len() + chunk.len() > limit {
                        return Err(too_large(limit));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(body)
            };
            let body = tokio::time::timeout(body_timeout, read)
                .await
                .map_err(|_| body_timed_out(body_timeout))??;
            super::conns::body_read(&req);
            if body.is_empty() && !has_ct {
                // No body at all: an empty object (every key optional or reported missing).
                return Ok(JsonBody(Value::Object(Default::default())));
            }
            if !ct_ok {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    "Unsupported media type",
                    "send the body as `Content-Type: application/json`",
                ));
            }
            let v: Value = serde_json::from_slice(&body).map_err(|e| {
                ApiError::malformed_json(format!("the body is not valid JSON: {e}"))
            })?;
            if !v.is_object() {
                return Err(ApiError::field(
                    "",
                    "invalid_type",
                    "the body must be a JSON object",
                ));
            }
            refuse_nul(&v)?;
            Ok(JsonBody(v))
        })
    }
}

/// A 422 pointing at the first string or key of `v` with a NUL character.
/// An id from the request's path, checked here: one that is not of its
/// kind (another prefix, a short or altered one) is `404 not_found`, as an
/// unknown one is, without the store being asked.
pub fn path_id<T: TypedId>(s: &str) -> Result<T, ApiError> {
    T::parse(s).ok_or_else(ApiError::not_found)
}

pub fn refuse_nul(v: &Value) -> Result<(), ApiError> {
    match crate::domain::text::first_nul(v) {
        None => Ok(()),
        Some(pointer) => Err(ApiError::field(
            pointer,
            "invalid_text",
            "text must not contain the NUL character (U+0000)",
        )),
    }
}

/// Refuses a request whose path or query holds a NUL character (`%00`),
/// before any handler or store sees it: in the path it cannot name
/// anything (404); in the query it is a 422 pointing at the parameter.
pub fn nul_in_url(req: &actix_web::dev::ServiceRequest) -> Option<ApiError> {
    let has_nul = |s: &str| {
        s.as_bytes()
            .windows(3)
            .any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0')
    };
    if has_nul(req.path()) {
        return Some(ApiError::not_found());
    }
    let q = req.query_string();
    if !has_nul(q) {
        return None;
    }
    let errors: Vec<_> = url::form_urlencoded::parse(q.as_bytes())
        .filter(|(k, v)| k.contains('\0') || v.contains('\0'))
        .map(|(k, _)| {
            let mut pointer = String::from("/");
            pointer.push_str(&k.replace('\0', "\\u0000"));
            crate::http::error::FieldError::new(
                pointer,
                "invalid_text",
                "text must not contain the NUL character (U+0000)",
            )
        })
        .collect();
    (!errors.is_empty()).then_some(ApiError::Validation(errors))
}

/// The credential of `Authorization: Bearer …` (the scheme is
/// case-insensitive, RFC 9110 §11.1).
fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal("app state missing"))
}

/// The admin token.
pub struct Admin;

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let r = (|| {
            let st = state(req)?;
            let token = bearer(req).ok_or_else(ApiError::unauthorized)?;
            if is_admin(&st, &hash_secret(token)) {
                Ok(Admin)
            } else {
                Err(ApiError::unauthorized())
            }
        })();
        std::future::ready(r)
    }
}

/// The header with which the admin token acts for one chatbot on the bot
/// API (the dashboard's chatbot switcher).
pub const ACT_FOR: &str = "blockhook-chatbot";

/// Whether `hash` is the admin token's hash (in constant time).
fn is_admin(st: &AppState, hash: &str) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(
        hash.as_bytes(),
        st.admin_token_hash.as_bytes(),
    ))
}

/// A chatbot's API key (`sk_…`), or the admin token with a
/// `Blockhook-Chatbot: cb_…` header naming the chatbot it acts for.
pub struct Bot(pub Chatbot);

impl FromRequest for Bot {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let st = state(req);
        // §17: the customer portal's session, scoped to one chatbot.
        if let Some(session) = bearer(req).filter(|t| t.starts_with("ps_")) {
            let (session, method, path) = (
                session.to_string(),
                req.method().clone(),
                req.path().to_string(),
            );
            return Box::pin(async move {
                let st = st?;
                let b = super::portal::session_bot(&st, &session, &method, &path).await?;
                super::guard::api_key(&st, &b.id)?;
                Ok(Bot(b))
            });
        }
        let token = bearer(req).map(hash_secret);
        let act_for = req
            .headers()
            .get(ACT_FOR)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Box::pin(async move {
            let st = st?;
            let hash = token.ok_or_else(ApiError::unauthorized)?;
            if let Some(id) = act_for
                && is_admin(&st, &hash)
            {
                let id = path_id(&id)?;
                return match crate::usecase::chatbots::get(&st, &id).await {
                    Ok(b) => Ok(Bot(b)),
                    Err(AppError::Store(StoreError::NotFound)) => Err(ApiError::not_found()),
                    Err(e) => Err(e.into()),
                };
            }
            match access::chatbot_by_key(&st, &hash).await {
                Ok(b) => {
                    super::guard::api_key(&st, &b.id)?;
                    Ok(Bot(b))
                }
                Err(AppError::Store(StoreError::NotFound)) => Err(ApiError::unauthorized()),
                Err(e) => Err(e.into()),
            }
        })
    }
}

/// The request's `Origin` header, if any (sent by browsers on cross-origin
/// requests and on same-origin POSTs).
pub fn origin(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get(actix_web::http::header::ORIGIN)
        .and_then(|v| v.to_str().ok())
}

/// §9: a widget call from an origin its chatbot does not allow is refused;
/// a call without `Origin` (not from a browser page) is not affected.
pub fn check_origin(origin: Option<&str>, allowed: &AllowedOrigins) -> Result<(), ApiError> {
    match origin {
        Some(o) if !allowed.allows(o) => Err(ApiError::origin_not_allowed()),
        _ => Ok(()),
    }
}

/// A visitor token (`vt_…`), valid for one conversation, used from an
/// origin its chatbot allows.
pub struct Visitor(pub Conversation);

impl FromRequest for Visitor {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let st = state(req);
        let token = bearer(req).map(hash_secret);
        let origin = origin(req).map(str::to_owned);
        Box::pin(async move {
            let st = st?;
            let hash = token.ok_or_else(ApiError::unauthorized)?;
            match access::conversation_by_token(&st, &hash).await {
                Ok((c, origins)) => {
                    check_origin(origin.as_deref(), &origins)?;
                    Ok(Visitor(c))
                }
                Err(AppError::Store(StoreError::NotFound)) => Err(ApiError::unauthorized()),
                Err(e) => Err(e.into()),
            }
        })
    }
}

/// `?limit=&cursor=` of a collection.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
pub struct PageQuery {
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

impl PageQuery {
    /// The limit and the position of `?cursor=`, a cursor this server
    /// sealed for the collection `scope` (see [`sealed_page`]).
    pub fn parse(&self, st: &AppState, scope: &str) -> Result<(usize, Option<i64>), ApiError> {
        let limit = match &self.limit {
            None => 20,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => n,
                _ => {
                    return Err(ApiError::field(
                        "/limit",
                        "out_of_range",
                        "limit is 1 to 100",
                    ));
                }
            },
        };
        let cursor = match &self.cursor {
            None => None,
            Some(c) => Some(st.server_key.open_cursor(scope, c).ok_or_else(|| {
                ApiError::field(
                    "/cursor",
                    "invalid_cursor",
                    "not a cursor of this collection (pass next_cursor as given)",
                )
            })?),
        };
        Ok((limit, cursor))
    }
}

/// `{"data": [...], "page": {"has_more", "next_cursor"}}`, the store's next
/// position sealed as an opaque cursor of the collection `scope`.
pub fn sealed_page(
    st: &AppState,
    scope: &str,
    data: Vec<Value>,
    next_position: Option<String>,
) -> Value {
    let next = next_position.and_then(|p| p.parse::<i64>().ok()).map(|p| {
        st.server_key
            .seal_cursor(scope, p, crate::domain::ids::random_bytes::<8>())
    });
    collection(data, next)
}

/// `{"data": [...], "page": {"has_more", "next_cursor"}}`.
pub fn collection(data: Vec<Value>, next_cursor: Option<String>) -> Value {
    serde_json::json!({
        "data": data,
        "page": {"has_more": next_cursor.is_some(), "next_cursor": next_cursor}
    })
}

/// The `traceparent` of the request being served (its own span, in the
/// caller's trace or a new one), set by the access log; kept with the
/// events the request causes.
pub struct Trace(pub Option<String>);

impl FromRequest for Trace {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        use actix_web::HttpMessage;
        let t = req
            .extensions()
            .get::<crate::telemetry::trace::RequestTrace>()
            .map(|t| t.0.to_string());
        std::future::ready(Ok(Trace(t)))
    }
}
