//! One error type for the whole API, rendered as `application/problem+json`
//! (RFC 9457).

use actix_web::{HttpResponse, ResponseError, http::StatusCode};
use serde::Serialize;

/// One bad field: a JSON pointer into the request body, a stable code and a
/// sentence for people.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub code: &'static str,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            code,
            message: message.into(),
        }
    }
}

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
    #[error("internal error: {0}")]
    Internal(String),
}

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
    pub fn internal(e: impl std::fmt::Display) -> Self {
        ApiError::Internal(e.to_string())
    }
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Problem { status, .. } => *status,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Problem { code, .. } => code,
            ApiError::Validation(_) => "validation_failed",
            ApiError::Internal(_) => "internal_error",
        }
    }
}

/// Marks the answer to a refused origin, so that no CORS header is added
/// to it (`http::cors`).
#[derive(Debug, Clone, Copy)]
pub struct OriginRefused;

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
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
        };
        let mut resp = HttpResponse::build(self.status())
            .content_type("application/problem+json")
            .body(serde_json::to_vec(&body).unwrap_or_default());
        if code == "origin_not_allowed" {
            resp.extensions_mut().insert(OriginRefused);
        }
        resp
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match e {
            StoreError::NotFound => ApiError::not_found(),
            StoreError::Api(api) => api,
            StoreError::Backend(msg) => ApiError::Internal(msg),
        }
    }
}
