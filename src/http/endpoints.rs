//! Endpoints (§13) with the chatbot's API key: where its events go, each
//! with its own filter, secret, headers, rate limit and state. The default
//! endpoint is the chatbot's `webhook_url`, listed first.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, delete, get, patch, post, web};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::extract::{Bot, JsonBody, PageQuery, path_id, sealed_page};
use super::{AppState, views};
use crate::http::error::ApiResult;
use crate::usecase::endpoints as uc;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(create_endpoint)
        .service(list_endpoints)
        .service(get_endpoint)
        .service(update_endpoint)
        .service(delete_endpoint)
        .service(rotate_endpoint_secret);
}

/// A filter value: a string, a number or a boolean.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum FilterValue {
    Text(String),
    Number(f64),
    Flag(bool),
}

/// An endpoint (§13). Its secret is shown only when it is created or
/// rotated.
#[derive(Serialize, ToSchema)]
pub struct Endpoint {
    /// `ep_…`; the default endpoint's is `ep_` and its chatbot id's 26 characters.
    pub id: String,
    pub url: String,
    pub description: String,
    /// Whether this is the chatbot's `webhook_url` (listed first, never deleted).
    pub default: bool,
    /// `null`: every type.
    pub event_types: Option<Vec<String>>,
    /// `null`: no filter; otherwise each key with its allowed values.
    pub filter: Option<BTreeMap<String, Vec<FilterValue>>>,
    /// Whether a 2xx reply body from it is applied as a reply.
    pub replies: bool,
    /// `null` or `N/s`, `N/min`, `N/h`.
    pub rate_limit: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub enabled: bool,
    /// `paused` (disabled by its owner) or `gone` (it answered 410); `null` when enabled.
    pub disabled_reason: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A new endpoint: the endpoint and its `signing_secret` (`whsec_…`).
#[derive(Serialize, ToSchema)]
pub struct CreatedEndpoint {
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// `whsec_…` (Standard Webhooks), shown here and on rotation only.
    pub signing_secret: String,
}

/// Endpoints, the default first, then by creation.
#[derive(Serialize, ToSchema)]
pub struct EndpointPage {
    pub data: Vec<Endpoint>,
    pub page: views::Page,
}

/// Add an endpoint. Its own signing secret is shown only in this answer
/// (and on rotation).
#[utoipa::path(tag = "endpoints", request_body = super::openapi::NewEndpoint, responses((status = 201, description = "The endpoint with its signing_secret", body = CreatedEndpoint), (status = 422, description = "validation_failed: `/event_types/<i>` unknown_event_type, `/filter/<key>` invalid_filter, `/headers/<name>` forbidden_header, `/url` private_address, …")), security(("api_key" = [])))]
#[post("/api/v1/endpoints")]
async fn create_endpoint(
    bot: Bot,
    st: web::Data<AppState>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let ep = uc::create(&st, &bot.0.id, &body.0).await?;
    let mut out = ep.to_json();
    out["signing_secret"] = json!(ep.signing_secret);
    Ok(HttpResponse::Created().json(out))
}

/// The chatbot's endpoints: the default (its `webhook_url`) first, then
/// the others in the order they were added.
#[utoipa::path(tag = "endpoints", params(PageQuery), responses((status = 200, description = "Endpoints, the default first", body = EndpointPage)), security(("api_key" = [])))]
#[get("/api/v1/endpoints")]
async fn list_endpoints(
    bot: Bot,
    st: web::Data<AppState>,
    q: web::Query<PageQuery>,
) -> ApiResult<HttpResponse> {
    let scope = format!("endpoints:{}", bot.0.id);
    let (limit, cursor) = q.parse(&st, &scope)?;
    let all = uc::list(&st, &bot.0.id).await?;
    let from = cursor.map_or(0, |c| c.max(0) as usize).min(all.len());
    let to = (from + limit).min(all.len());
    let data: Vec<Value> = all[from..to].iter().map(|e| e.to_json()).collect();
    let next = (to < all.len()).then(|| to.to_string());
    Ok(HttpResponse::Ok().json(sealed_page(&st, &scope, data, next)))
}

/// One endpoint of the chatbot.
#[utoipa::path(tag = "endpoints", responses((status = 200, description = "The endpoint", body = Endpoint), (status = 404, description = "not_found (also another chatbot's)")), security(("api_key" = [])))]
#[get("/api/v1/endpoints/{id}")]
async fn get_endpoint(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let ep = uc::get(&st, &bot.0.id, &path_id(&id)?).await?;
    Ok(HttpResponse::Ok().json(ep.to_json()))
}

/// Change an endpoint: every key optional, `null` resets a nullable
/// setting. `enabled: false` pauses it; `enabled: true` or a new `url`
/// ends a `gone`. The default endpoint's `url` is the chatbot's
/// `webhook_url`.
#[utoipa::path(tag = "endpoints", request_body = super::openapi::EndpointChange, responses((status = 200, description = "The endpoint", body = Endpoint), (status = 404, description = "not_found (also another chatbot's)"), (status = 422, description = "validation_failed with pointers")), security(("api_key" = [])))]
#[patch("/api/v1/endpoints/{id}")]
async fn update_endpoint(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
    body: JsonBody,
) -> ApiResult<HttpResponse> {
    let ep = uc::update(&st, &bot.0.id, &path_id(&id)?, &body.0).await?;
    Ok(HttpResponse::Ok().json(ep.to_json()))
}

/// Delete an endpoint with its deliveries that have not succeeded. The
/// default endpoint is never deleted.
#[utoipa::path(tag = "endpoints", responses((status = 204, description = "Deleted"), (status = 404, description = "not_found (also another chatbot's, or a second DELETE)"), (status = 409, description = "default_endpoint: the default endpoint is never deleted")), security(("api_key" = [])))]
#[delete("/api/v1/endpoints/{id}")]
async fn delete_endpoint(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    uc::delete(&st, &bot.0.id, &path_id(&id)?).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Issue a new signing secret for the endpoint; for 24 h deliveries carry
/// signatures by both. The default endpoint's secret is the chatbot's:
/// rotating either rotates both.
#[utoipa::path(tag = "endpoints", operation_id = "rotate_endpoint_secret", responses((status = 200, description = "The new signing secret", body = views::SigningSecret), (status = 404, description = "not_found (also another chatbot's)")), security(("api_key" = [])))]
#[post("/api/v1/endpoints/{id}/rotate-secret")]
async fn rotate_endpoint_secret(
    bot: Bot,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let secret = uc::rotate(&st, &bot.0.id, &path_id(&id)?).await?;
    Ok(HttpResponse::Ok().json(json!({"signing_secret": secret})))
}
