//! `POST /api/v1/interactions/{id}/cancel`: withdraws a pending question —
//! one whose ask was ended by a shutdown and never re-attached, named by the
//! 409 `dialog_pending` of the next ask (§15).

use actix_web::{HttpResponse, post, web};

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
    let closed =
        crate::usecase::ask::cancel(&st, &bot.0.id, &crate::http::extract::path_id(&id)?).await?;
    Ok(HttpResponse::Ok().json(closed.to_json(st.now_ms())))
}
