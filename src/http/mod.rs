//! HTTP: one module per capability of the contract.

pub mod admin;
pub mod ask;
pub mod bot;
pub mod events;
pub mod extract;
pub mod inbox;
pub mod messages;
pub mod ops;
pub mod pages;
pub mod responses;
pub mod widget;

use std::sync::Arc;

use actix_web::web;
use utoipa_actix_web::AppExt;

use crate::config::Config;
use crate::hub::Hub;
use crate::store::Store;

/// What every handler shares.
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub config: Config,
    pub admin_token_hash: String,
    /// Signs response_url tokens.
    pub server_key: crate::domain::token::TokenKey,
    /// Base of every response_url, without a trailing slash.
    pub public_url: String,
    pub hub: Arc<Hub>,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

impl AppState {
    pub fn now_ms(&self) -> i64 {
        crate::domain::time::now_ms()
    }
}

/// The OpenAPI document of every endpoint, generated from the handlers.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, api) = actix_web::App::new()
        .into_utoipa_app()
        .configure(routes)
        .split_for_parts();
    with_info(api)
}

fn with_info(mut api: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    api.info = utoipa::openapi::InfoBuilder::new()
        .title("blockhook")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "Signed, durable webhook events for chat-widget buttons and forms.",
        ))
        .build();
    api
}

/// Registers every documented route.
pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    // The hottest routes are matched first (each route tried costs a
    // pattern match).
    widget::routes(cfg);
    admin::routes(cfg);
    bot::routes(cfg);
    events::routes(cfg);
    inbox::routes(cfg);
    ask::routes(cfg);
    responses::routes(cfg);
    ops::routes(cfg);
    pages::routes(cfg);
}

/// Builds the actix app for `state`.
pub fn app(
    state: web::Data<AppState>,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let (app, api) = actix_web::App::new()
        .app_data(state)
        .into_utoipa_app()
        .configure(routes)
        .split_for_parts();
    let api = web::Data::new(with_info(api));
    app.app_data(api)
        .app_data(web::QueryConfig::default().error_handler(|e, _| {
            crate::error::ApiError::field("", "invalid_query", e.to_string()).into()
        }))
        .app_data(
            web::PathConfig::default()
                .error_handler(|_, _| crate::error::ApiError::not_found().into()),
        )
        .route("/openapi.json", web::get().to(ops::openapi_json))
        .default_service(web::to(ops::not_found))
}
