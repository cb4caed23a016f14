//! "Send now" (chatbot API key, or the admin acting for a chatbot): the
//! dashboard's manual test and redelivery. The event is sent at once,
//! whatever its endpoint's circuit breaker says, and the answer carries
//! the attempt (status code or error, latency). Its attempt is recorded as
//! any other, under the same event id; the queue's own retries go on as
//! they would.

use actix_web::{HttpResponse, post, web};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::extract::{Bot, path_id};
use super::{AppState, views};
use crate::delivery::manual::Sent;
use crate::http::error::ApiResult;
use crate::usecase::events;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(send);
}

/// The outcome of a manual send.
#[derive(Serialize, ToSchema)]
pub struct SentNow {
    pub event_id: String,
    /// `now` (sent by this request), `queue` (the queue's attempt, already
    /// on its way, is the one shown) or `waiting` (not sent yet: behind an
    /// earlier event of its conversation, or its endpoint is disabled).
    pub sent: String,
    /// The event's status after the attempt.
    pub status: String,
    /// The attempt made, `null` when `waiting`.
    pub attempt: Option<views::Attempt>,
}

/// Send an event now (redelivering it first when it ended), bypassing the
/// rest of the endpoint's circuit breaker; answers with the attempt.
#[utoipa::path(tag = "events", operation_id = "events_send_now", responses((status = 200, description = "The attempt made now (or the queue's, when it was already on its way)", body = SentNow), (status = 401, description = "unauthorized"), (status = 404, description = "not_found")), security(("api_key" = [])))]
#[post("/api/v1/events/{event_id}/send-now")]
async fn send(bot: Bot, st: web::Data<AppState>, id: web::Path<String>) -> ApiResult<HttpResponse> {
    let chatbot_id = bot.0.id.as_str();
    let (sent, status) = events::send_now(&st, &bot.0, &path_id(&id)?).await?;
    let (sent, attempt) = match sent {
        Sent::Now(a) => ("now", super::events::attempt_json(chatbot_id, &a)),
        Sent::ByQueue(a) => ("queue", super::events::attempt_json(chatbot_id, &a)),
        Sent::Waiting => ("waiting", Value::Null),
    };
    Ok(HttpResponse::Ok().json(json!({
        "event_id": id.as_str(),
        "sent": sent,
        "status": status.as_str(),
        "attempt": attempt,
    })))
}
