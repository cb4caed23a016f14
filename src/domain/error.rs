//! What the domain refuses, with its stable code and knowing nothing of
//! HTTP: `http::error` gives each [`Rejection`] its status, in one place.

use serde::Serialize;

/// One bad field: a JSON pointer into the request body, a stable code and a
/// sentence for people.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct FieldError {
    /// A JSON pointer into the request body (`/values/email`).
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

/// A decision of the domain that refuses a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejection {
    /// No such message, block, action or interaction (or not the caller's).
    #[error("no such resource")]
    NotFound,
    /// The group was already used.
    #[error("this group was already used")]
    BlockDisabled,
    /// The block no longer takes answers; the reason (`expired`, `takeover`,
    /// `storage_window`, `replaced`, `withdrawn`).
    #[error("{0}")]
    Closed(String),
    /// A button with a url opens a link and never sends events.
    #[error("a button with a url opens a link and never sends events")]
    LinkButton,
    /// The interaction was already answered, expired or cancelled.
    #[error("this interaction was already answered, expired or cancelled")]
    NotPending,
    /// An answer of another variant than the interaction's type.
    #[error("this interaction is of type `{0}`")]
    TypeMismatch(String),
    /// An idempotency key used before with a different body.
    #[error("this Idempotency-Key was used with a different body")]
    IdempotencyConflict,
    /// A question is already waiting in the conversation.
    #[error("this conversation already has an unanswered question ({interaction_id})")]
    DialogPending { interaction_id: String },
    /// Bad fields, each with its pointer.
    #[error("the request has invalid fields")]
    Invalid(Vec<FieldError>),
}

impl Rejection {
    pub fn not_found() -> Self {
        Rejection::NotFound
    }

    /// One bad field.
    pub fn field(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        Rejection::Invalid(vec![FieldError::new(field, code, message)])
    }

    /// The stable code a client reads (`block_disabled`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Invalid(_) => "validation_failed",
            Rejection::NotFound => "not_found",
            Rejection::BlockDisabled => "block_disabled",
            Rejection::Closed(_) => "interaction_closed",
            Rejection::LinkButton => "link_button",
            Rejection::NotPending => "interaction_not_pending",
            Rejection::TypeMismatch(_) => "interaction_type_mismatch",
            Rejection::IdempotencyConflict => "idempotency_key_conflict",
            Rejection::DialogPending { .. } => "dialog_pending",
        }
    }

    /// A short title for people.
    pub fn title(&self) -> &'static str {
        match self {
            Rejection::Invalid(_) => "Validation failed",
            Rejection::NotFound => "Not found",
            Rejection::BlockDisabled => "Block disabled",
            Rejection::Closed(_) => "Interaction closed",
            Rejection::LinkButton => "Link button",
            Rejection::NotPending => "Interaction not pending",
            Rejection::TypeMismatch(_) => "Interaction type mismatch",
            Rejection::IdempotencyConflict => "Idempotency key conflict",
            Rejection::DialogPending { .. } => "Dialog pending",
        }
    }
}
