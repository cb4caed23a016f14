//! HTTP: one module per capability of the contract.

pub mod access_log;
pub mod admin;
pub mod ask;
pub mod assets;
pub mod bot;
pub mod check;
pub mod conns;
pub mod conversations;
pub mod cors;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod extract;
pub mod guard;
pub mod inbox;
pub mod openapi;
pub mod ops;
pub mod pages;
pub mod portal;
pub mod responses;
pub mod send_now;
pub mod views;
pub mod widget;

use actix_web::web;
use utoipa_actix_web::AppExt;

/// What every handler shares: the use-case layer's services.
pub use crate::usecase::Services as AppState;

/// The served OpenAPI document.
pub struct OpenApiDoc(pub serde_json::Value);

/// The OpenAPI document of every endpoint, generated from the handlers
/// (see `openapi.rs`).
pub fn openapi() -> serde_json::Value {
    let (_, api) = actix_web::App::new()
        .into_utoipa_app()
        .configure(routes)
        .split_for_parts();
    openapi::complete(api)
}

/// Registers every documented route.
pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    // The hottest routes are matched first (each route tried costs a
    // pattern match).
    widget::routes(cfg);
    admin::routes(cfg);
    bot::routes(cfg);
    conversations::routes(cfg);
    events::routes(cfg);
    send_now::routes(cfg);
    endpoints::routes(cfg);
    inbox::routes(cfg);
    ask::routes(cfg);
    responses::routes(cfg);
    ops::routes(cfg);
    portal::routes(cfg);
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
    let api = web::Data::new(OpenApiDoc(openapi::complete(api)));
    app.app_data(api)
        .app_data(web::QueryConfig::default().error_handler(|e, _| {
            crate::http::error::ApiError::field("", "invalid_query", e.to_string()).into()
        }))
        .app_data(
            web::PathConfig::default()
                .error_handler(|_, _| crate::http::error::ApiError::not_found().into()),
        )
        .route("/openapi.json", web::get().to(ops::openapi_json))
        .default_service(web::to(ops::not_found))
        // A NUL character (`%00`) in the path or query is refused before any
        // handler or store sees it.
        .wrap_fn(|req, srv| {
            use actix_web::dev::Service;
            use futures_util::future::{Either, ready};
            match extract::nul_in_url(&req) {
                Some(e) => Either::Left(ready(Err(e.into()))),
                None => Either::Right(srv.call(req)),
            }
        })
        .wrap(actix_web::middleware::from_fn(access_log::log_request))
        .wrap(actix_web::middleware::from_fn(cors::widget_cors))
        .wrap(actix_web::middleware::from_fn(conns::track))
}
