//! The people-facing pages: the widget demo (`/widget` + `/widget.js`, the
//! script a customer's page embeds) and
//! the reviewers' dashboard (`/dashboard`). Static files embedded from
//! `assets/`; everything they show comes from the public API.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, guard, web};

use super::assets;
use crate::http::error::ApiError;

/// The pages themselves; their scripts and styles are under `/assets/`.
const PAGES: &[(&str, &str)] = &[
    ("/widget", "widget.html"),
    ("/widget.js", "widget.js"),
    ("/dashboard", "dashboard.html"),
];

/// The pages only talk to this server and load nothing from elsewhere.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
    form-action 'self'";

pub fn routes(cfg: &mut utoipa_actix_web::service_config::ServiceConfig) {
    for (path, file) in PAGES {
        let file: &'static str = file;
        cfg.route(
            path,
            get_or_head().to(move |req: HttpRequest| async move { serve(&req, file) }),
        );
    }
    cfg.route("/assets/{file:.+}", get_or_head().to(asset));
    cfg.route(
        "/favicon.ico",
        get_or_head().to(|req: HttpRequest| async move { serve(&req, "favicon.svg") }),
    );
}

fn get_or_head() -> actix_web::Route {
    web::route().guard(guard::Any(guard::Get()).or(guard::Head()))
}

/// A script or stylesheet of the pages (`/assets/dashboard/main.js`, or
/// its hashed name `/assets/dashboard/main.3f2a9c1b04.js`).
async fn asset(req: HttpRequest, file: web::Path<String>) -> Result<HttpResponse, ApiError> {
    match assets::find(&file) {
        Some((a, immutable)) if !a.name.ends_with(".html") => Ok(respond(&req, a, immutable)),
        _ => Err(ApiError::not_found()),
    }
}

/// One page or file under its plain name: revalidated with its ETag.
fn serve(req: &HttpRequest, file: &str) -> HttpResponse {
    match assets::find(file) {
        Some((a, _)) => respond(req, a, false),
        None => HttpResponse::NotFound().finish(),
    }
}

/// Pages get their security headers. Scripts, styles and images may be
/// loaded by pages of any origin (§9: the widget is a script loaded by the
/// customer's site, its panel modules imported from there).
fn respond(req: &HttpRequest, a: &assets::Asset, immutable: bool) -> HttpResponse {
    let extra = if a.name.ends_with(".html") {
        vec![
            (header::CONTENT_SECURITY_POLICY, CSP.to_string()),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
        ]
    } else {
        vec![(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*".to_string())]
    };
    assets::respond(req, a, immutable, &extra)
}
