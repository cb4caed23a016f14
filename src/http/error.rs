//! One error type for the whole API, rendered as `application/problem+json`
//! (RFC 9457): the one place where the domain's refusals, the use cases'
//! failures and the store's get their HTTP status.

use actix_web::{HttpResponse, ResponseError, http::StatusCode};
use serde::Serialize;

pub use crate::domain::error::{FieldError, Rejection};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{detail}")]
    Problem {
        status: StatusCode,
        code: &'static str,
        title: &'static str,
        detail: String,
    },
    #[error("the request has invalid fields")]
    Validation(Vec<FieldError>),
    /// Over a rate limit (§10): 429 with `Retry-After` in whole seconds.
    #[error("rate limited; retry after {retry_after_secs} s")]
    RateLimited {
        retry_after_secs: u64,
        detail: String,
    },
    /// The storage cannot serve the request now: 503 with `Retry-After`;
    /// the same request may succeed a moment later.
    #[error("service unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// 409 `dialog_pending`, naming the question that waits (§15).
    #[error("this conversation already has an unanswered question")]
    DialogPending { interaction_id: String },
}

/// The `Retry-After` of a 503: a database failing over is back within
/// seconds, and a client that waits one is not a flood.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 1;

pub type ApiResult<T, E = ApiError> = Result<T, E>;

impl ApiError {
    pub fn new(
        status: StatusCode,
        code: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        ApiError::Problem {
            status,
            code,
            title,
            detail: detail.into(),
        }
    }
    pub fn not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "Not found",
            "no such resource",
        )
    }
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            "a valid `Authorization: Bearer …` credential is required",
        )
    }
    /// §9: a widget call from an origin its chatbot does not allow.
    pub fn origin_not_allowed() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "Origin not allowed",
            "this chatbot's widget may not be used from this origin",
        )
    }
    /// 410: a response_url past its time, used up, or whose message is gone.
    pub fn response_url_expired(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::GONE,
            "response_url_expired",
            "response_url expired",
            detail,
        )
    }
    pub fn malformed_json(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "Malformed JSON",
            detail,
        )
    }
    pub fn field(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Validation(vec![FieldError::new(field, code, message)])
    }
    /// 429 `rate_limited`; `retry_after` is rounded up to whole seconds, at least 1.
    pub fn rate_limited(retry_after: std::time::Duration, detail: impl Into<String>) -> Self {
        let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        ApiError::RateLimited {
            retry_after_secs: secs.max(1),
            detail: detail.into(),
        }
    }
    pub fn internal(e: impl std::fmt::Display) -> Self {
        ApiError::Internal(e.to_string())
    }
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Problem { status, .. } => *status,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::DialogPending { .. } => StatusCode::CONFLICT,
        }
    }
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Problem { code, .. } => code,
            ApiError::Validation(_) => "validation_failed",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Unavailable(_) => "store_unavailable",
            ApiError::Internal(_) => "internal_error",
            ApiError::DialogPending { .. } => "dialog_pending",
        }
    }
}

/// Marks the answer to a refused origin, so that no CORS header is added
/// to it (`http::cors`).
#[derive(Debug, Clone, Copy)]
pub struct OriginRefused;

/// An error (RFC 9457 problem details).
#[derive(Serialize, utoipa::ToSchema)]
pub struct Problem<'a> {
    /// `https://blockhook.dev/problems/<code>`
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    /// A stable code (`not_found`, `validation_failed`, …).
    code: &'a str,
    /// With `validation_failed`: one entry per bad field.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<FieldError>>)]
    errors: Option<&'a [FieldError]>,
    /// With `dialog_pending`: the question that waits (`int_…`); withdraw it
    /// with `POST /api/v1/interactions/{id}/cancel`.
    #[serde(skip_serializing_if = "Option::is_none")]
    interaction_id: Option<&'a str>,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status()
    }

    fn error_response(&self) -> HttpResponse {
        let (title, detail, errors): (&str, String, Option<&[FieldError]>) = match self {
            ApiError::Problem { title, detail, .. } => (title, detail.clone(), None),
            ApiError::Validation(errs) => (
                "Validation failed",
                format!("{} field(s) failed validation", errs.len()),
                Some(errs.as_slice()),
            ),
            ApiError::RateLimited { detail, .. } => ("Rate limited", detail.clone(), None),
            ApiError::Unavailable(e) => {
                tracing::warn!(error = %e, "storage unavailable; answered 503");
                (
                    "Service unavailable",
                    "the storage cannot be reached just now; try again after Retry-After".into(),
                    None,
                )
            }
            ApiError::DialogPending { interaction_id } => (
                "Dialog pending",
                format!(
                    "this conversation already has an unanswered question ({interaction_id}); \
                     wait for its answer or cancel it"
                ),
                None,
            ),
            ApiError::Internal(e) => {
                tracing::error!(error = %e, "internal error");
                (
                    "Internal error",
                    "the server failed to handle the request".into(),
                    None,
                )
            }
        };
        let code = self.code();
        let body = Problem {
            kind: format!("https://blockhook.dev/problems/{code}"),
            title,
            status: self.status().as_u16(),
            detail: &detail,
            code,
            errors,
            interaction_id: match self {
                ApiError::DialogPending { interaction_id } => Some(interaction_id),
                _ => None,
            },
        };
        let mut out = HttpResponse::build(self.status());
        match self {
            ApiError::RateLimited {
                retry_after_secs, ..
            } => {
                out.insert_header(("Retry-After", retry_after_secs.to_string()));
            }
            ApiError::Unavailable(_) => {
                out.insert_header(("Retry-After", UNAVAILABLE_RETRY_AFTER_SECS.to_string()));
            }
            _ => {}
        }
        let mut resp = out
            .content_type("application/problem+json")
            .body(serde_json::to_vec(&body).unwrap_or_default());
        if code == "origin_not_allowed" {
            resp.extensions_mut().insert(OriginRefused);
        }
        resp
    }
}

/// Each refusal of the domain as its problem: the one place where a domain
/// decision becomes an HTTP status (its code and title are the domain's).
impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        let status = match r {
            Rejection::Invalid(errs) => return ApiError::Validation(errs),
            Rejection::NotFound => return ApiError::not_found(),
            Rejection::DialogPending { interaction_id } => {
                return ApiError::DialogPending { interaction_id };
            }
            Rejection::BlockDisabled | Rejection::NotPending | Rejection::IdempotencyConflict => {
                StatusCode::CONFLICT
            }
            Rejection::Closed(_) => StatusCode::GONE,
            Rejection::LinkButton | Rejection::TypeMismatch(_) => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, r.code(), r.title(), r.to_string())
    }
}

/// What a use case failed with, as its problem.
impl From<crate::usecase::error::AppError> for ApiError {
    fn from(e: crate::usecase::error::AppError) -> Self {
        use crate::usecase::error::AppError;
        let detail = e.to_string();
        match e {
            AppError::Rejected(r) => r.into(),
            AppError::Store(s) => s.into(),
            AppError::ResponseUrlExpired(_) => ApiError::response_url_expired(detail),
            AppError::IdempotencyKeyRequired => ApiError::new(
                StatusCode::BAD_REQUEST,
                "idempotency_key_required",
                "Idempotency key required",
                detail,
            ),
            AppError::DefaultEndpoint => ApiError::new(
                StatusCode::CONFLICT,
                "default_endpoint",
                "Default endpoint",
                detail,
            ),
        }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match e {
            StoreError::NotFound => ApiError::not_found(),
            StoreError::Rejected(r) => r.into(),
            StoreError::Backend(msg) => ApiError::Internal(msg),
            StoreError::Unavailable(msg) => ApiError::Unavailable(msg),
        }
    }
}
