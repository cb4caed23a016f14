//! Typed bodies of the API: what handlers answer and accept, each with its
//! OpenAPI schema (`utoipa::ToSchema`). Block, message-definition and event
//! shapes are not restated here: they come from `schemas/` (see
//! `openapi.rs`), referenced by name.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::{ArrayBuilder, ObjectBuilder, Ref, RefOr, Schema};

use crate::domain::model::Person;
use crate::domain::status::EventStatus;

/// A `$ref` to a component that `openapi.rs` puts in from `schemas/`.
fn component(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

fn message_blocks() -> impl Into<RefOr<Schema>> {
    ArrayBuilder::new().items(component("MessageBlock"))
}

fn any_object() -> impl Into<RefOr<Schema>> {
    ObjectBuilder::new().additional_properties(Some(
        utoipa::openapi::schema::AdditionalProperties::FreeForm(true),
    ))
}

/// A person: a visitor or a member.
#[derive(Serialize, ToSchema)]
#[schema(as = Person)]
pub struct PersonDoc {
    /// `visitor` or `member`.
    pub kind: String,
    pub id: String,
    pub display_name: String,
}

/// Who wrote a message: `{"kind": "bot"}` or a person.
#[derive(Serialize, ToSchema)]
pub struct Author {
    /// `bot`, `visitor` or `member`.
    pub kind: String,
    pub id: Option<String>,
    pub display_name: Option<String>,
}

/// A message with its blocks and their state.
#[derive(Serialize, ToSchema)]
pub struct Message {
    pub id: String,
    pub conversation_id: String,
    pub author: Author,
    pub text: Option<String>,
    /// The blocks as defined (`schemas/blocks.schema.json`), ids and defaults
    /// filled in, each with its `state`.
    #[schema(schema_with = message_blocks)]
    pub blocks: Vec<Value>,
    #[schema(schema_with = any_object)]
    pub metadata: Value,
    pub typing_on_interaction: Option<bool>,
    pub created_at: String,
    pub updated_at: String,
}

/// `{"message": …}`.
#[derive(Serialize, ToSchema)]
pub struct MessageEnvelope {
    pub message: Message,
}

/// The page of a collection.
#[derive(Serialize, ToSchema)]
pub struct Page {
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// Messages, newest first.
#[derive(Serialize, ToSchema)]
pub struct MessagePage {
    pub data: Vec<Message>,
    pub page: Page,
}

/// `POST /api/v1/events/test`: no body, or an empty object.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestEventRequest {}

/// A chatbot.
#[derive(Serialize, ToSchema)]
pub struct Chatbot {
    pub id: String,
    pub name: String,
    pub webhook_url: String,
    /// A duration such as `"90d"`.
    pub retention: String,
    /// Set when the endpoint answered `410 Gone` (deliveries wait).
    pub endpoint_disabled: bool,
    /// Origins whose pages may use the widget, or `["*"]`.
    pub allowed_origins: Vec<String>,
    pub created_at: String,
}

/// A new chatbot: the API key is shown only here.
#[derive(Serialize, ToSchema)]
pub struct CreatedChatbot {
    pub id: String,
    pub name: String,
    pub webhook_url: String,
    pub retention: String,
    pub endpoint_disabled: bool,
    pub allowed_origins: Vec<String>,
    pub created_at: String,
    /// `sk_…`
    pub api_key: String,
    /// `whsec_…` (Standard Webhooks).
    pub signing_secret: String,
}

/// `POST /api/v1/chatbots`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewChatbot {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    #[schema(min_length = 1, max_length = 2000)]
    pub webhook_url: String,
    /// Seconds or a duration string (`"90d"`); default `"90d"`.
    #[schema(value_type = Option<Duration>)]
    pub retention: Option<Value>,
    /// Origins (`scheme://host[:port]`) whose pages may use the widget, or
    /// `["*"]` (the default).
    pub allowed_origins: Option<Vec<String>>,
}

/// `PATCH /api/v1/chatbots/{id}`: every key optional.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatbotChange {
    #[schema(min_length = 1, max_length = 200)]
    pub name: Option<String>,
    #[schema(min_length = 1, max_length = 2000)]
    pub webhook_url: Option<String>,
    #[schema(value_type = Option<Duration>)]
    pub retention: Option<Value>,
    pub endpoint_disabled: Option<bool>,
    pub allowed_origins: Option<Vec<String>>,
}

/// A number of seconds or a string such as `"500ms"`, `"90s"`, `"10m"`, `"2h"`, `"30d"`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub enum Duration {
    Seconds(f64),
    Text(String),
}

/// `{"signing_secret"}`.
#[derive(Serialize, ToSchema)]
pub struct SigningSecret {
    pub signing_secret: String,
}

/// `POST /widget/v1/chatbots/{chatbot_id}/conversations`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    #[schema(min_length = 1, max_length = 80)]
    pub display_name: Option<String>,
}

/// A visitor's new conversation and its token.
#[derive(Serialize, ToSchema)]
pub struct CreatedConversation {
    pub conversation_id: String,
    #[schema(value_type = PersonDoc)]
    pub visitor: Person,
    /// `vt_…`: the credential of this conversation.
    pub visitor_token: String,
}

/// A visitor's message.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VisitorMessage {
    #[schema(min_length = 1, max_length = 4000)]
    pub text: String,
}

/// A click on a button.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Click {
    #[schema(min_length = 1)]
    pub block_id: String,
    #[schema(min_length = 1)]
    pub action_id: String,
    /// Only on the decline button of an ask that allows a comment.
    #[schema(max_length = 2000)]
    pub comment: Option<String>,
}

/// A form submit.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FormSubmit {
    /// By field name: strings, numbers (or numeric strings), booleans (or `"on"`).
    #[schema(schema_with = any_object)]
    pub values: Option<serde_json::Map<String, Value>>,
}

/// A takeover by a human.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Takeover {
    pub member: Option<TakeoverMember>,
}

#[derive(Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeoverMember {
    #[schema(min_length = 1, max_length = 200)]
    pub id: Option<String>,
    #[schema(min_length = 1, max_length = 80)]
    pub display_name: Option<String>,
}

/// The conversation and who took it over.
#[derive(Serialize, ToSchema)]
pub struct TakenOver {
    pub conversation_id: String,
    #[schema(value_type = PersonDoc)]
    pub taken_over_by: Person,
}

/// One delivery attempt.
#[derive(Serialize, ToSchema)]
pub struct Attempt {
    /// The endpoint it went to (`ep_…`).
    pub endpoint_id: String,
    pub number: i64,
    pub at: String,
    pub status_code: Option<i64>,
    pub duration_ms: i64,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
    /// The request headers this attempt sent (`null` when nothing was sent).
    #[schema(schema_with = any_object_or_null)]
    pub request_headers: Option<Value>,
}

/// An event of the deliveries log.
#[derive(Serialize, ToSchema)]
pub struct Event {
    pub event_id: String,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub kind: String,
    pub created_at: String,
    /// `pending`, `succeeded`, `failed` or `dead`, over all of its
    /// deliveries: the worst of them (`succeeded` when there is none).
    pub status: String,
    /// Attempts over all of its deliveries.
    pub attempt_count: i64,
    pub next_attempt_at: Option<String>,
    /// The body delivered: one of the events under `webhooks`.
    #[schema(schema_with = any_object)]
    pub payload: Value,
}

/// An event with every delivery attempt.
#[derive(Serialize, ToSchema)]
pub struct EventWithAttempts {
    pub event_id: String,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub kind: String,
    pub created_at: String,
    pub status: String,
    pub attempt_count: i64,
    pub next_attempt_at: Option<String>,
    #[schema(schema_with = any_object)]
    pub payload: Value,
    /// One per endpoint the event went to (the default endpoint's first);
    /// empty when no endpoint's event types and filter matched.
    pub deliveries: Vec<Delivery>,
    /// Every attempt of every delivery, oldest first.
    pub attempts: Vec<Attempt>,
}

/// An event's delivery to one endpoint (§13).
#[derive(Serialize, ToSchema)]
pub struct Delivery {
    pub endpoint_id: String,
    /// `pending`, `succeeded`, `failed` or `dead`.
    pub status: String,
    pub attempts: i64,
}

/// Which deliveries of an event to make again: one endpoint's, or (no
/// body, `{}`) every endpoint's.
#[derive(Deserialize, ToSchema)]
pub struct RedeliverOne {
    /// Only the delivery to this endpoint (`ep_…`).
    pub endpoint_id: Option<String>,
}

/// Events, newest first.
#[derive(Serialize, ToSchema)]
pub struct EventPage {
    pub data: Vec<Event>,
    pub page: Page,
}

/// Chatbots, newest first (the admin's list).
#[derive(Serialize, ToSchema)]
pub struct ChatbotPage {
    pub data: Vec<Chatbot>,
    pub page: Page,
}

/// `POST /api/v1/events/redeliver`: every such event of the chatbot again.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeliverAll {
    /// `dead` or `failed`.
    #[schema(value_type = String)]
    pub status: EventStatus,
    /// Only events created at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Only the deliveries to this endpoint (`ep_…`); without it, every
    /// endpoint's.
    pub endpoint_id: Option<String>,
}

/// How many events were queued again.
#[derive(Serialize, ToSchema)]
pub struct RedeliveryCount {
    pub count: i64,
}

/// A queued event (`webhook.test`, an ask without waiting …).
#[derive(Serialize, ToSchema)]
pub struct EventQueued {
    pub event_id: String,
}

/// A redelivery was queued.
#[derive(Serialize, ToSchema)]
pub struct Redelivery {
    pub event_id: String,
    pub status: String,
}

/// An interaction: an interactive block that can be answered.
#[derive(Serialize, ToSchema)]
pub struct Interaction {
    pub id: String,
    pub conversation_id: String,
    pub message_id: String,
    pub block_id: String,
    /// `choice`, `text`, `approval` or `confirmation`.
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub kind: String,
    /// `pending`, `answered`, `expired` or `cancelled`.
    pub status: String,
    pub prompt: String,
    /// `options` for a choice, `fields` for a text interaction.
    #[schema(schema_with = any_object)]
    pub payload: Value,
    /// The answer exactly as sent, plus `submitted_at`; null while unanswered.
    #[schema(value_type = Option<Object>)]
    pub response: Value,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub answered_at: Option<String>,
}

/// Interactions, newest first.
#[derive(Serialize, ToSchema)]
pub struct InteractionPage {
    pub data: Vec<Interaction>,
    pub page: Page,
}

/// An answer by type.
#[derive(Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// Yes or no, with an optional comment.
    Approval {
        approved: bool,
        comment: Option<String>,
    },
    /// Yes or no.
    Confirmation { confirmed: bool },
    /// The form's values (or `text` when the form has one field).
    Text {
        #[schema(schema_with = any_object)]
        values: Option<serde_json::Map<String, Value>>,
        text: Option<String>,
    },
    /// The chosen options' ids (`action_id`s).
    Choice { option_ids: Vec<String> },
}

/// An option of an ask: a string is its id and label.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
pub enum AskOption {
    Id(String),
    Full {
        id: String,
        label: Option<String>,
        detail: Option<String>,
    },
}

/// A file the person can open from the question.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AskAttachment {
    #[schema(max_length = 120)]
    pub filename: String,
    pub content_type: String,
    /// Base64, at most 512 KiB decoded.
    pub data: String,
}

/// `POST /api/v1/conversations/{cid}/ask`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    #[schema(min_length = 1, max_length = 600)]
    pub message: String,
    #[schema(min_length = 1, max_length = 60)]
    pub title: Option<String>,
    #[schema(max_items = 9)]
    pub options: Option<Vec<AskOption>>,
    pub multiple: Option<bool>,
    pub custom: Option<bool>,
    #[schema(min_length = 1, max_length = 30)]
    pub accept: Option<String>,
    #[schema(min_length = 1, max_length = 30)]
    pub decline: Option<String>,
    pub comment: Option<bool>,
    /// 5 s – 1 d; default 600 s.
    #[schema(value_type = Option<Duration>)]
    pub timeout: Option<Value>,
    pub attachment: Option<AskAttachment>,
    /// `false`: answer 202 `{"interaction_id"}` at once; the answer is
    /// fetched from `/api/v1/interactions/{id}/answer` (default `true`).
    pub wait: Option<bool>,
}

/// An ask without waiting: the question is asked.
#[derive(Serialize, ToSchema)]
pub struct AskStarted {
    pub interaction_id: String,
}

/// What an ask ends with.
#[derive(Serialize, ToSchema)]
pub struct AskOutcome {
    /// `chose`, `custom`, `accepted`, `declined`, `expired` or `withdrawn`
    /// (or `pending`, from `…/answer` while undecided).
    pub answer: String,
    /// With `chose`: the chosen option ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// With `custom`: the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// With `declined`: the comment, if one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `{"status"}` of the health and readiness checks.
#[derive(Serialize, ToSchema)]
pub struct Status {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

fn any_object_or_null() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            utoipa::openapi::schema::Type::Object,
            utoipa::openapi::schema::Type::Null,
        ]))
        .build()
}
