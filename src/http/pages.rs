//! The people-facing pages: the widget demo (`/widget` + `/widget.js`, the
//! script a customer's page embeds) and
//! the reviewers' dashboard (`/dashboard`). Static files embedded from
//! `assets/`; everything they show comes from the public API.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, guard, web};
use rust_embed::RustEmbed;

use crate::error::ApiError;

#[derive(RustEmbed)]
#[folder = "assets/"]
struct Assets;

/// The pages themselves; their scripts and styles are under `/assets/`.
const PAGES: &[(&str, &str)] = &[
    ("/widget", "widget.html"),
    ("/widget.js", "widget.js"),
    ("/dashboard", "dashboard.html"),
];

/// The pages only talk to this server and load nothing from elsewhere.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
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

/// A script or stylesheet of the pages (`/assets/dashboard/main.js`).
async fn asset(req: HttpRequest, file: web::Path<String>) -> Result<HttpResponse, ApiError> {
    if file.ends_with(".html") || Assets::get(&file).is_none() {
        return Err(ApiError::not_found());
    }
    Ok(serve(&req, &file))
}

fn content_type(file: &str) -> &'static str {
    match file.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

/// One embedded file, with an ETag so a reload costs a 304. Scripts,
/// styles and images may be loaded by pages of any origin (§9: the widget
/// is a module script imported from the customer's site).
fn serve(req: &HttpRequest, file: &str) -> HttpResponse {
    let Some(asset) = Assets::get(file) else {
        return HttpResponse::NotFound().finish();
    };
    let etag = format!(
        "\"{}\"",
        data_encoding::HEXLOWER.encode(&asset.metadata.sha256_hash()[..16])
    );
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if fresh {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    resp.insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"));
    if file.ends_with(".html") {
        resp.insert_header((header::CONTENT_SECURITY_POLICY, CSP))
            .insert_header((header::REFERRER_POLICY, "no-referrer"));
    } else {
        resp.insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"));
    }
    if fresh {
        return resp.finish();
    }
    resp.content_type(content_type(file))
        .body(asset.data.into_owned())
}
