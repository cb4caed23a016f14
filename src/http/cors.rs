//! §9 CORS for the widget API (`/widget/v1/…`): preflights answered 204,
//! `Access-Control-Allow-Origin: <origin>` and `Vary: Origin` on every
//! answer to a browser page, none on a refused origin (403
//! `origin_not_allowed`, decided by the handler from the chatbot's
//! `allowed_origins`). Every other path is left alone: `/api/v1` never sends
//! CORS headers, and the static files send their own (`pages`).

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{Error, HttpResponse};

use crate::http::error::OriginRefused;

pub const WIDGET_PREFIX: &str = "/widget/v1/";
/// What the widget sends besides the CORS-safelisted headers.
const ALLOW_HEADERS: &str = "authorization, content-type, last-event-id";
/// How long a browser may keep a preflight's answer (Chromium keeps at
/// most two hours).
const MAX_AGE: &str = "7200";
/// Headers the widget may read on an answer (a 429's wait).
const EXPOSE_HEADERS: &str = "retry-after";

pub async fn widget_cors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    if !req.path().starts_with(WIDGET_PREFIX) {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let Some(origin) = req.headers().get(header::ORIGIN).cloned() else {
        // The same URL answers browsers differently: shared caches must key
        // on Origin.
        let mut res = next.call(req).await?;
        res.headers_mut()
            .append(header::VARY, HeaderValue::from_static("Origin"));
        return Ok(res.map_into_left_body());
    };
    if req.method() == Method::OPTIONS
        && let Some(method) = req
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_METHOD)
            .cloned()
    {
        let resp = preflight(origin, &method);
        return Ok(req.into_response(resp).map_into_right_body());
    }
    let mut res = next.call(req).await?;
    let refused = res.response().extensions().contains::<OriginRefused>();
    let headers = res.headers_mut();
    if !refused {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSE_HEADERS),
        );
    }
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    Ok(res.map_into_left_body())
}

/// 204 for a preflight from `origin` asking for `method`. Whether the
/// chatbot allows the origin is decided on the request itself, which a
/// preflight does not carry (no credential, no body).
fn preflight(origin: HeaderValue, method: &HeaderValue) -> HttpResponse {
    let requested = method.to_str().unwrap_or_default().trim();
    let methods = match requested {
        "GET" | "POST" | "HEAD" | "" => "GET, HEAD, POST".to_string(),
        m if m.bytes().all(|b| b.is_ascii_alphabetic()) => format!("GET, HEAD, POST, {m}"),
        _ => "GET, HEAD, POST".to_string(),
    };
    let mut resp = HttpResponse::build(StatusCode::NO_CONTENT);
    resp.insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, origin))
        .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, methods))
        .insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOW_HEADERS))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, MAX_AGE))
        .insert_header((
            header::VARY,
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
        ));
    resp.finish()
}
