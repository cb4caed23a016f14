//! The answer to a question asked without waiting:
//! `GET /api/v1/interactions/{id}/answer?wait=<0–50 s>`.
//!
//! A question asked with `"wait": false` is held by no connection: it stays
//! until it is answered or its deadline passes. Its status is read against
//! the clock everywhere (a pending interaction past `expires_at` is expired
//! for clicks, lists and this route alike, also after a restart), and the
//! first reader past the deadline — the timer started with the ask, or this
//! route — closes it (block off, `interaction.expired`).

use crate::domain::ids::InteractionId;
use std::time::Duration;

use actix_web::{HttpResponse, get, web};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::Bot;
use crate::http::{AppState, views};
use crate::usecase::ask;

/// The longest `wait`, below the idle timeouts of common proxies and clients.
pub const MAX_WAIT_S: u64 = 50;

#[derive(Deserialize, utoipa::IntoParams)]
pub(super) struct AnswerQuery {
    /// Seconds to wait for the answer (0–50, default 0).
    wait: Option<String>,
}

fn parse_wait(q: &AnswerQuery) -> Result<Duration, ApiError> {
    match q.wait.as_deref() {
        None => Ok(Duration::ZERO),
        Some(s) => match s.parse::<u64>() {
            Ok(n) if n <= MAX_WAIT_S => Ok(Duration::from_secs(n)),
            _ => Err(ApiError::field(
                "/wait",
                "invalid_value",
                format!("wait is a whole number of seconds from 0 to {MAX_WAIT_S}"),
            )),
        },
    }
}

/// The answer of an interaction, waiting up to `wait` seconds for it.
#[utoipa::path(tag = "ask", params(AnswerQuery), responses(
    (status = 200, description = "The §7 answer object, or {\"answer\": \"pending\"} when wait passes first", body = views::AskOutcome),
    (status = 404, description = "not_found"),
    (status = 422, description = "validation_failed (/wait)")), security(("api_key" = [])))]
#[get("/api/v1/interactions/{id}/answer")]
pub(super) async fn answer(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: web::Query<AnswerQuery>,
) -> ApiResult<HttpResponse> {
    let wait = parse_wait(&q)?;
    let until = tokio::time::Instant::now() + wait;
    // Subscribe before reading, so no answer committed in between slips by.
    let mut rx = st.hub.api.subscribe();
    let id: InteractionId = crate::http::extract::path_id(&id)?;
    let i = ask::interaction(&st, &bot.0.id, &id).await?;
    let v = ask::settle(&st, &i).await?;
    if !v.is_null() {
        return Ok(HttpResponse::Ok().json(v));
    }
    let mut deadline = i.expires_at.map(|at| {
        let left = at.saturating_sub(st.now_ms()).max(0) as u64;
        tokio::time::Instant::now() + Duration::from_millis(left + 1)
    });
    loop {
        let expiry = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let reread = tokio::select! {
            r = rx.recv() => match r {
                // The store has the committed state, whatever the signal
                // carries (a wake-up from another instance may carry less).
                Ok(e) if e.interaction_id == i.id => true,
                Ok(_) => false,
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => {
                    tokio::time::sleep_until(until).await;
                    true
                }
            },
            _ = expiry => {
                deadline = None;
                true
            }
            _ = st.stopping.cancelled() => {
                // The server stops: the client asks again, here or elsewhere.
                return Ok(HttpResponse::Ok().json(json!({"answer": "pending"})));
            }
            _ = tokio::time::sleep_until(until) => {
                // One last read: an answer may have come through another path.
                let i = ask::interaction(&st, &bot.0.id, &id).await?;
                let v = ask::settle(&st, &i).await?;
                let v = if v.is_null() { json!({"answer": "pending"}) } else { v };
                return Ok(HttpResponse::Ok().json(v));
            }
        };
        if reread {
            let i = ask::interaction(&st, &bot.0.id, &id).await?;
            let v = ask::settle(&st, &i).await?;
            if !v.is_null() {
                return Ok(HttpResponse::Ok().json(v));
            }
            if tokio::time::Instant::now() >= until {
                return Ok(HttpResponse::Ok().json(json!({"answer": "pending"})));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_is_zero_to_fifty_seconds() {
        let q = |w: Option<&str>| AnswerQuery {
            wait: w.map(str::to_string),
        };
        assert_eq!(parse_wait(&q(None)).ok(), Some(Duration::ZERO));
        assert_eq!(
            parse_wait(&q(Some("50"))).ok(),
            Some(Duration::from_secs(50))
        );
        for bad in ["51", "-1", "1.5", "x", ""] {
            assert!(parse_wait(&q(Some(bad))).is_err(), "{bad}");
        }
    }
}
