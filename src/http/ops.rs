//! Operations: health, readiness, metrics, the OpenAPI document.

use actix_web::{HttpRequest, HttpResponse, get, web};
use serde_json::json;

use super::{AppState, views};
use crate::http::error::ApiError;

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    cfg.service(healthz).service(readyz).service(metrics_text);
}

/// The process is up.
#[utoipa::path(tag = "ops", responses((status = 200, description = "ok", body = views::Status)))]
#[get("/healthz")]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// The store answers: 503 `store_unavailable` (problem JSON, with
/// `Retry-After`) while it does not, answered at once while the store's
/// circuit is open.
#[utoipa::path(tag = "ops", responses((status = 200, description = "ready", body = views::Status), (status = 503, description = "the store does not answer", content_type = "application/problem+json", body = crate::http::error::Problem)))]
#[get("/readyz")]
async fn readyz(st: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match crate::usecase::access::queue_stats(&st).await {
        Ok(_) => Ok(HttpResponse::Ok().json(json!({"status": "ready"}))),
        Err(e) => Err(ApiError::Unavailable(e.to_string())),
    }
}

/// Prometheus text.
#[utoipa::path(tag = "ops", responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String)))]
#[get("/metrics")]
async fn metrics_text(st: web::Data<AppState>) -> HttpResponse {
    if let Ok(q) = crate::usecase::access::queue_stats(&st).await {
        let age = q
            .oldest_pending_created_at
            .map(|t| (st.now_ms() - t).max(0) as f64 / 1000.0)
            .unwrap_or(0.0);
        crate::telemetry::metrics::queue(q.pending, age);
    }
    let body = st.metrics.as_ref().map(|h| h.render()).unwrap_or_default();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(body)
}

pub async fn openapi_json(api: web::Data<super::OpenApiDoc>) -> HttpResponse {
    HttpResponse::Ok().json(&api.0)
}

pub async fn not_found(_: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::not_found())
}
