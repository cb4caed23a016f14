//! What a use case fails with, knowing nothing of HTTP: a refusal of the
//! domain, a `response_url` that can no longer be used, the default
//! endpoint asked to be deleted, or the store. `http::error` maps each to
//! its problem+json answer, in one place.

use crate::domain::error::{FieldError, Rejection};
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The domain refused (bad fields, no such resource, a closed block …).
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// A response_url past its time, used up, or whose message is gone.
    #[error("{0}")]
    ResponseUrlExpired(&'static str),
    /// The default endpoint is the chatbot's `webhook_url`: never deleted.
    #[error(
        "the default endpoint is the chatbot's webhook_url and is never deleted; change its url or pause it instead"
    )]
    DefaultEndpoint,
    /// Answering is a decision: it takes an `Idempotency-Key`.
    #[error("answering is a decision: send an `Idempotency-Key` header")]
    IdempotencyKeyRequired,
    /// The store failed or cannot be reached.
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type AppResult<T> = Result<T, AppError>;

impl AppError {
    pub fn not_found() -> Self {
        AppError::Rejected(Rejection::NotFound)
    }

    /// One bad field.
    pub fn field(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        AppError::Rejected(Rejection::field(field, code, message))
    }

    /// Bad fields, each with its pointer.
    pub fn invalid(errors: Vec<FieldError>) -> Self {
        AppError::Rejected(Rejection::Invalid(errors))
    }

    /// The stable code a client reads in the problem (and the attempt log
    /// in a refused webhook reply's note).
    pub fn code(&self) -> &'static str {
        match self {
            AppError::Rejected(r) | AppError::Store(StoreError::Rejected(r)) => r.code(),
            AppError::ResponseUrlExpired(_) => "response_url_expired",
            AppError::DefaultEndpoint => "default_endpoint",
            AppError::IdempotencyKeyRequired => "idempotency_key_required",
            AppError::Store(StoreError::NotFound) => "not_found",
            AppError::Store(StoreError::Unavailable(_)) => "store_unavailable",
            AppError::Store(StoreError::Backend(_)) => "internal_error",
        }
    }
}
