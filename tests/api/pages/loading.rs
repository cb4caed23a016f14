//! How the widget's files are served: the stable `/widget.js` revalidates
//! with its ETag; everything it loads has a content-hashed name, is cached
//! for a year and comes compressed as the client accepts (Brotli, gzip).

use std::io::Read;

use sha2::{Digest, Sha256};

use super::plain;
use crate::helpers::{TestApp, spawn_app};

async fn get(app: &TestApp, path: &str, accept: Option<&str>) -> reqwest::Response {
    let mut r = app.client.get(app.url(path));
    if let Some(a) = accept {
        r = r.header("Accept-Encoding", a);
    }
    r.send().await.expect("request")
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// Every `/assets/…` path quoted in `text`.
fn asset_paths(text: &str) -> Vec<String> {
    text.split(['"', '`', '\''])
        .filter(|s| s.starts_with("/assets/") || s.contains("}/assets/"))
        .map(|s| s[s.find("/assets/").unwrap_or(0)..].to_string())
        .collect()
}

#[actix_web::test]
async fn the_launcher_names_hashed_files_cached_for_a_year_and_served_compressed() {
    let app = spawn_app().await;
    // The stable entry: revalidated, never cached blindly.
    let r = get(&app, "/widget.js", None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "cache-control"), "no-cache");
    assert!(!header(&r, "etag").is_empty());
    let launcher = r.text().await.expect("body");
    let files = asset_paths(&launcher);
    // The panel's stylesheet and every one of its modules, by hashed name.
    for wanted in [
        "/assets/widget.css",
        "/assets/widget/main.js",
        "/assets/widget/widget.js",
        "/assets/widget/blocks.js",
        "/assets/lib/sse.js",
        "/assets/lib/dom.js",
    ] {
        assert!(
            files.iter().any(|f| plain(f) == wanted && f != wanted),
            "{wanted} is not listed by a hashed name in /widget.js: {files:?}"
        );
    }
    for path in files.iter().filter(|f| plain(f) != **f) {
        let identity = get(&app, path, None).await;
        assert_eq!(identity.status(), 200, "{path}");
        assert_eq!(
            header(&identity, "cache-control"),
            "public, max-age=31536000, immutable",
            "{path}"
        );
        assert_eq!(header(&identity, "access-control-allow-origin"), "*");
        assert!(
            header(&identity, "vary").contains("Accept-Encoding"),
            "{path}"
        );
        assert_eq!(header(&identity, "content-encoding"), "", "{path}");
        let body = identity.bytes().await.expect("body").to_vec();
        // The name is the bytes' hash: new bytes, new name.
        let hex: String = Sha256::digest(&body)[..5]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(
            path.contains(&format!(".{hex}.")),
            "{path} is not named by its hash {hex}"
        );

        let br = get(&app, path, Some("gzip, deflate, br")).await;
        assert_eq!(header(&br, "content-encoding"), "br", "{path}");
        let packed = br.bytes().await.expect("body").to_vec();
        assert!(packed.len() < body.len(), "{path}: Brotli is not smaller");
        let mut unpacked = Vec::new();
        brotli::Decompressor::new(&packed[..], 4096)
            .read_to_end(&mut unpacked)
            .expect("Brotli");
        assert_eq!(unpacked, body, "{path}: Brotli decodes to other bytes");

        let gz = get(&app, path, Some("gzip")).await;
        assert_eq!(header(&gz, "content-encoding"), "gzip", "{path}");
        let packed = gz.bytes().await.expect("body").to_vec();
        let mut unpacked = Vec::new();
        flate2::read::GzDecoder::new(&packed[..])
            .read_to_end(&mut unpacked)
            .expect("gzip");
        assert_eq!(unpacked, body, "{path}: gzip decodes to other bytes");

        // Refused codings are not used.
        let none = get(&app, path, Some("br;q=0, gzip;q=0")).await;
        assert_eq!(header(&none, "content-encoding"), "", "{path}");
    }
    // The entry itself comes compressed too, with a validator of its own.
    let br = get(&app, "/widget.js", Some("br")).await;
    assert_eq!(header(&br, "content-encoding"), "br");
    let etag = header(&br, "etag").to_string();
    let again = app
        .client
        .get(app.url("/widget.js"))
        .header("Accept-Encoding", "br")
        .header("If-None-Match", &etag)
        .send()
        .await
        .expect("request");
    assert_eq!(again.status(), 304);
}

#[actix_web::test]
async fn the_pages_refer_to_their_files_by_hashed_names() {
    let app = spawn_app().await;
    for page in ["/dashboard", "/widget", "/portal"] {
        let r = get(&app, page, None).await;
        assert_eq!(r.status(), 200, "{page}");
        assert_eq!(header(&r, "cache-control"), "no-cache", "{page}");
        let html = r.text().await.expect("body");
        let files = asset_paths(&html);
        assert!(!files.is_empty(), "{page}");
        for f in files {
            assert_ne!(plain(&f), f, "{page} refers to {f} by its plain name");
            let r = get(&app, &f, None).await;
            assert_eq!(r.status(), 200, "{f}");
            assert!(header(&r, "cache-control").contains("immutable"), "{f}");
        }
    }
}
