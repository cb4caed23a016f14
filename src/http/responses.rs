//! response_url replies: the public endpoint (the reply itself is applied by
//! `usecase::reply`, also for a webhook's reply body) and the widget's live
//! stream.

mod stream;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, post, web};

use super::extract::JsonBody;
use super::{AppState, views};
use crate::http::error::{ApiError, ApiResult};

pub use crate::usecase::reply::{MAX_USES, apply_reply, response_url};
pub use crate::usecase::typing::{start_typing, stop_typing_if_shown};
pub use stream::widget_stream;

/// The longest `Idempotency-Key` accepted.
const MAX_KEY_LEN: usize = 255;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(post_response);
}

/// Reply to an event: replace the message in place (default), post a new
/// message (`replace_original: false`), or delete it (`delete_original: true`).
#[utoipa::path(tag = "responses", request_body = super::openapi::Reply, params(("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key returns the first result without using another of the 5 uses")), responses(
    (status = 200, description = "The message replaced or posted", body = views::MessageEnvelope),
    (status = 400, description = "invalid_idempotency_key"),
    (status = 409, description = "idempotency_key_conflict"),
    (status = 404, description = "not_found: unknown or altered token, or its conversation was erased"),
    (status = 410, description = "response_url_expired: expired, used 5 times, or the message was deleted"),
    (status = 422, description = "validation_failed")))]
#[post("/api/v1/responses/{token}")]
async fn post_response(
    req: HttpRequest,
    st: web::Data<AppState>,
    token: web::Path<String>,
    body: Result<JsonBody, ApiError>,
) -> ApiResult<HttpResponse> {
    // An unknown or altered token is 404 before the body is looked at.
    st.server_key
        .verify(&token)
        .ok_or_else(ApiError::not_found)?;
    let body = body?;
    let key = match req.headers().get("idempotency-key") {
        None => None,
        Some(v) => match v.to_str() {
            Ok(k) if !k.is_empty() && k.len() <= MAX_KEY_LEN => Some(k.to_string()),
            _ => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_idempotency_key",
                    "Invalid Idempotency-Key",
                    format!("Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
                ));
            }
        },
    };
    let v = apply_reply(&st, &token, &body.0, key).await?;
    Ok(HttpResponse::Ok().json(v))
}
