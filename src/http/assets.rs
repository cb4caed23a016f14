//! The pages' static files as the build prepared them (`build.rs`): each
//! under its own name and under a content-hashed one, precompressed with
//! gzip and Brotli. Serving picks the encoding the client accepts and the
//! caching the name allows: a hashed name never changes its bytes, so it is
//! cached for a year; a plain name (a page, `/widget.js`) revalidates with
//! its `ETag`.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};

/// One file of `assets/`.
pub struct Asset {
    /// Its path under `assets/` (`widget/main.js`).
    pub name: &'static str,
    /// The same with a hash of its bytes (`widget/main.3f2a9c1b04.js`).
    pub hashed: &'static str,
    pub etag: &'static str,
    pub raw: &'static [u8],
    pub gzip: Option<&'static [u8]>,
    pub brotli: Option<&'static [u8]>,
}

static ASSETS: &[Asset] = include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The file at `path` (plain or hashed name) and whether the name is the
/// hashed one.
pub fn find(path: &str) -> Option<(&'static Asset, bool)> {
    ASSETS.iter().find_map(|a| {
        if a.hashed == path {
            Some((a, true))
        } else if a.name == path {
            Some((a, false))
        } else {
            None
        }
    })
}

/// The hashed name of `name` (`widget.css` → `widget.0a1b2c3d4e.css`).
pub fn hashed(name: &str) -> Option<&'static str> {
    ASSETS.iter().find(|a| a.name == name).map(|a| a.hashed)
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Encoding {
    Brotli,
    Gzip,
    Identity,
}

/// The best encoding `accept` (an `Accept-Encoding` value) allows: Brotli,
/// then gzip, then none. A coding with `q=0` is refused; `*` stands for
/// any not named.
pub fn negotiate(accept: Option<&str>) -> Encoding {
    let Some(accept) = accept else {
        return Encoding::Identity;
    };
    let q = |name: &str| -> Option<f32> {
        let mut star = None;
        for part in accept.split(',') {
            let mut it = part.split(';');
            let coding = it.next().unwrap_or("").trim().to_ascii_lowercase();
            let weight = it
                .find_map(|p| p.trim().strip_prefix("q=").map(str::to_owned))
                .and_then(|w| w.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if coding == name {
                return Some(weight);
            }
            if coding == "*" {
                star = Some(weight);
            }
        }
        star
    };
    if q("br").is_some_and(|w| w > 0.0) {
        Encoding::Brotli
    } else if q("gzip").is_some_and(|w| w > 0.0) {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

fn content_type(file: &str) -> &'static str {
    match file.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

/// The answer for `asset`, or a 304 when the client's copy is current.
/// `extra` headers are added to both (a page's security headers).
pub fn respond(
    req: &HttpRequest,
    asset: &Asset,
    immutable: bool,
    extra: &[(header::HeaderName, String)],
) -> HttpResponse {
    let accept = req
        .headers()
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok());
    let (body, coding, suffix) = match negotiate(accept) {
        Encoding::Brotli if asset.brotli.is_some() => (asset.brotli, Some("br"), "-br"),
        Encoding::Brotli | Encoding::Gzip if asset.gzip.is_some() => {
            (asset.gzip, Some("gzip"), "-gz")
        }
        _ => (Some(asset.raw), None, ""),
    };
    let body = body.unwrap_or(asset.raw);
    // One validator per representation (RFC 9110 §8.8.3).
    let etag = format!("\"{}{suffix}\"", asset.etag);
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if fresh {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    resp.insert_header((header::ETAG, etag))
        .insert_header((
            header::CACHE_CONTROL,
            if immutable {
                "public, max-age=31536000, immutable"
            } else {
                "no-cache"
            },
        ))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::VARY, "Accept-Encoding"));
    for (k, v) in extra {
        resp.insert_header((k.clone(), v.as_str()));
    }
    if fresh {
        return resp.finish();
    }
    if let Some(c) = coding {
        resp.insert_header((header::CONTENT_ENCODING, c));
    }
    resp.content_type(content_type(asset.name)).body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_prefers_brotli_then_gzip_and_respects_q_zero() {
        assert_eq!(negotiate(Some("gzip, deflate, br, zstd")), Encoding::Brotli);
        assert_eq!(negotiate(Some("gzip")), Encoding::Gzip);
        assert_eq!(negotiate(Some("br;q=0, gzip;q=0.5")), Encoding::Gzip);
        assert_eq!(negotiate(Some("*;q=0")), Encoding::Identity);
        assert_eq!(negotiate(Some("*")), Encoding::Brotli);
        assert_eq!(negotiate(Some("identity")), Encoding::Identity);
        assert_eq!(negotiate(None), Encoding::Identity);
    }

    #[test]
    fn every_script_import_names_a_hashed_file_that_exists() {
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(a.raw).expect("utf-8");
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let Some(spec) = line
                    .split(" from \"")
                    .nth(1)
                    .and_then(|s| s.split('"').next())
                else {
                    continue;
                };
                let file = spec.rsplit('/').next().unwrap_or("");
                assert!(
                    ASSETS
                        .iter()
                        .any(|b| b.hashed.ends_with(file) && b.hashed != b.name),
                    "{}: {spec} is not a hashed file",
                    a.name
                );
            }
        }
    }
}
