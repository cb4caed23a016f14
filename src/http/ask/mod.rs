//! Ask and wait (chatbot API key): post a question into a conversation and
//! hold the response open until a person answers, it expires, or the asking
//! client goes away (the question is then withdrawn).
//!
//! The answer is always a 200: headers go out at once, whitespace keeps the
//! connection alive (and reveals a client that left), and the JSON answer
//! follows. A shutdown ends the wait with `{"answer": "pending",
//! "interaction_id"}` and leaves the question open: the asker re-attaches
//! through `answer.rs`. With `"wait": false` the ask answers 202 at once and the answer
//! is fetched later (`answer.rs`).

mod answer;
pub mod attachments;
mod cancel;
mod question;

use std::time::Duration;

use actix_web::{HttpResponse, post, web};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::extract::{Bot, JsonBody};
use super::{AppState, views};
use crate::domain::inbox::NewInteraction;
use crate::domain::model::Author;
use crate::http::error::ApiResult;
use crate::hub::ApiEvent;
use crate::usecase::ask as asking;
use crate::usecase::content::{Content, new_message};
use question::{parse, shape};

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(ask);
    cfg.service(answer::answer);
    cfg.service(cancel::cancel);
    attachments::routes(cfg);
}

const KEEPALIVE: Duration = Duration::from_secs(2);

/// Withdraws the question if the wait ends without an answer being sent.
struct Waiter {
    st: web::Data<AppState>,
    interaction_id: crate::domain::ids::InteractionId,
    chatbot_id: crate::domain::ids::ChatbotId,
    rx: broadcast::Receiver<ApiEvent>,
    deadline: tokio::time::Instant,
    done: bool,
    /// The store is shared with other instances.
    shared: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        // A shutdown does not withdraw the question (§15): it stays
        // answerable and the asker re-attaches.
        if self.done || self.st.stopping.is_cancelled() {
            return;
        }
        // A worker's runtime being torn down has no reactor left to run
        // the withdrawal on.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let st = self.st.clone();
        let id = self.interaction_id.clone();
        rt.spawn(async move { asking::withdraw(&st, &id).await });
    }
}

impl Waiter {
    /// The answer, or `None` to send a keep-alive first.
    async fn next(&mut self) -> Option<Value> {
        let tick = tokio::time::sleep(KEEPALIVE);
        tokio::select! {
            _ = self.st.stopping.cancelled() => {
                // The server stops: the asker re-attaches by the id.
                Some(json!({"answer": "pending", "interaction_id": self.interaction_id}))
            }
            r = self.rx.recv() => match r {
                Ok(e) if e.interaction_id == self.interaction_id => Some(asking::outcome(&e.data)),
                Ok(_) => None,
                // Lagged or closed: read the interaction from the store.
                Err(_) => asking::answered(&self.st, &self.chatbot_id, &self.interaction_id).await,
            },
            _ = tokio::time::sleep_until(self.deadline) => {
                Some(asking::expire(&self.st, &self.interaction_id).await)
            }
            _ = tick => {
                // Several instances (PostgreSQL): their notifications wake
                // this waiter; reading the interaction at each keep-alive is
                // the safety net should one be missed.
                if !self.shared {
                    return None;
                }
                asking::answered(&self.st, &self.chatbot_id, &self.interaction_id).await
            }
        }
    }
}

/// Ask a person and wait for the answer.
#[utoipa::path(tag = "ask", request_body = views::Ask, responses(
    (status = 200, description = "The answer (sent when a person answers; whitespace keeps the connection alive until then)", body = views::AskOutcome),
    (status = 202, description = "With `\"wait\": false`: the question is asked; fetch the answer from /api/v1/interactions/{id}/answer", body = views::AskStarted),
    (status = 409, description = "dialog_pending; `interaction_id` names the question that waits"),
    (status = 422, description = "validation_failed"),
    (status = 404, description = "not_found")), security(("api_key" = [])))]
#[post("/api/v1/conversations/{cid}/ask")]
async fn ask(
    bot: Bot,
    st: web::Data<AppState>,
    cid: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let conv =
        crate::usecase::bot::conversation(&st, &bot.0.id, &super::extract::path_id(&cid)?).await?;
    let mut q = parse(&body.0)?;
    let (blocks, kind, payload, spec) = shape(&q);
    let now = st.now_ms();
    let mut msg = new_message(
        &conv.id,
        Author::bot(),
        Content {
            text: Some(q.message.clone()),
            blocks: Some(blocks),
            metadata: None,
            typing_on_interaction: None,
        },
        now,
    );
    let mut interaction = NewInteraction {
        id: crate::domain::ids::InteractionId::generate(),
        chatbot_id: bot.0.id.clone(),
        conversation_id: conv.id.clone(),
        message_id: msg.id.clone(),
        kind,
        prompt: q.message.clone(),
        payload,
        spec,
        expires_at: Some(now + q.timeout.as_millis() as i64),
        created_at: now,
    };
    let interaction_id = interaction.id.clone();
    let attachment = match q.attachment.take() {
        Some(upload) => Some(attachments::store(&st, &bot.0.id, &mut msg, upload, now).await?),
        None => None,
    };
    if !msg.attachments.is_empty() {
        // Reviewers see the files on the inbox card too.
        // Read with the API key: the /api/v1 url.
        let mut refs = msg.attachments.clone();
        for a in &mut refs {
            a.url = attachments::api_url(&st.public_url, &a.id);
        }
        interaction.payload["attachments"] = json!(refs);
    }
    if !q.wait {
        let expires_at = interaction.expires_at;
        asking::post(&st, msg, interaction, attachment.as_deref()).await?;
        asking::expire_at(st.clone().into_inner(), interaction_id.clone(), expires_at);
        return Ok(HttpResponse::Accepted().json(json!({ "interaction_id": interaction_id })));
    }
    // Subscribe before the question exists, so no answer can slip by.
    let rx = st.hub.api.subscribe();
    asking::post(&st, msg, interaction, attachment.as_deref()).await?;
    let interaction_id_header = interaction_id.clone();
    let waiter = Waiter {
        st: st.clone(),
        interaction_id,
        chatbot_id: bot.0.id.clone(),
        rx,
        deadline: tokio::time::Instant::now() + q.timeout,
        done: false,
        shared: crate::usecase::access::shared(&st),
    };
    let body = futures_util::stream::unfold(Some(waiter), |w| async move {
        let mut w = w?;
        match w.next().await {
            Some(v) if !v.is_null() => {
                w.done = true;
                Some((
                    Ok::<Bytes, actix_web::Error>(Bytes::from(v.to_string())),
                    None,
                ))
            }
            _ => Some((Ok(Bytes::from_static(b" ")), Some(w))),
        }
    });
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("Cache-Control", "no-cache"))
        // Known before the answer: a client whose connection is cut can
        // re-attach with it.
        .insert_header((
            "Blockhook-Interaction-Id",
            interaction_id_header.into_string(),
        ))
        .streaming(body))
}
