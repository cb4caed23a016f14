//! `POST /api/v1/interactions/{id}/cancel`: withdraws a pending question —
//! one whose ask was ended by a shutdown and never re-attached, named by the
//! 409 `dialog_pending` of the next ask (§15).

use actix_web::{HttpResponse, post, web};

use crate::domain::error::Rejection;
use crate::domain::status::InteractionStatus;
use crate::http::error::ApiResult;
use crate::http::extract::Bot;
use crate::http::{AppState, views};

/// Withdraw a pending interaction: its blocks turn off (reason
/// `withdrawn`), an ask waiting on it gets `{"answer": "withdrawn"}`.
#[utoipa::path(tag = "inbox", responses(
    (status = 200, description = "The interaction, now `cancelled`", body = views::Interaction),
    (status = 404, description = "not_found"),
    (status = 409, description = "interaction_not_pending")), security(("api_key" = [])))]
#[post("/api/v1/interactions/{id}/cancel")]
pub(super) async fn cancel(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let i = st.store.get_interaction(&bot.0.id, &id).await?;
    let now = st.now_ms();
    match i.status_at(now) {
        InteractionStatus::Pending => {}
        InteractionStatus::Expired if i.status == InteractionStatus::Pending => {
            // Past its deadline: it expires, as any reader would make it.
            st.store
                .close_interaction(&i.id, InteractionStatus::Expired, "expired", now)
                .await?;
            return Err(Rejection::NotPending.into());
        }
        _ => return Err(Rejection::NotPending.into()),
    }
    let closed = st
        .store
        .close_interaction(&i.id, InteractionStatus::Cancelled, "withdrawn", now)
        .await?;
    // An answer that won the race stands.
    if closed.status != InteractionStatus::Cancelled {
        return Err(Rejection::NotPending.into());
    }
    Ok(HttpResponse::Ok().json(closed.to_json(st.now_ms())))
}
