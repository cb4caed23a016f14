//! The tools' input, mirroring the body of `POST …/ask` (API §7). The
//! server checks the values; these types only give the agent a schema with
//! descriptions it can read.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An option: its id (also its label), or an object.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AskOption {
    /// The option's id, shown as its label too.
    Id(String),
    Full {
        /// What `chose` reports (1–64 letters, digits, `_ . : -`).
        id: String,
        /// The button or checkbox text (up to 80 characters).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// A longer explanation shown with it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
}

/// A number of seconds, or a string such as `"90s"`, `"10m"`, `"2h"`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Timeout {
    Seconds(u64),
    Text(String),
}

/// A file the person can open before answering.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Attachment {
    /// A plain file name, no path (up to 120 characters), e.g. `release.diff`.
    pub filename: String,
    /// Its media type, e.g. `text/x-diff`, `application/pdf`.
    pub content_type: String,
    /// The file's bytes in standard base64 (at most 512 KiB decoded).
    pub data: String,
}

/// A question for a person in the conversation.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AskInput {
    /// The conversation to ask in; defaults to the one the server was
    /// started with (`--conversation` / `BLOCKHOOK_CONVERSATION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The question, as the person reads it (up to 600 characters).
    pub message: String,
    /// A short heading (up to 60 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Up to 9 options, one button each (or one checkbox each with
    /// `multiple`). The answer is then `chose` with the chosen ids. Without
    /// options (and without `custom`) the question is yes/no: `accepted` or
    /// `declined`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<AskOption>>,
    /// Let the person tick several options (needs at least 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiple: Option<bool>,
    /// Let the person type their own answer: `custom` with `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<bool>,
    /// The accept button's label for a yes/no question (up to 30; default "Yes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept: Option<String>,
    /// The decline button's label for a yes/no question (up to 30; default "No").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline: Option<String>,
    /// Let the person give a reason with a decline (`declined` with `comment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<bool>,
    /// How long the question stays open: 5 s to 1 d, default 10 minutes.
    /// Past it the answer is `expired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
    /// One file the person can open from the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Attachment>,
}

/// Which question to read the answer of.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ResultInput {
    /// The `interaction_id` that `ask_start` returned.
    pub interaction_id: String,
    /// Seconds to wait for the answer before returning
    /// `{"answer": "pending"}` (0–50, default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<u64>,
}
