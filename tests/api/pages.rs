//! §8 the people-facing pages: the widget demo and the reviewers' dashboard,
//! served from the binary, over real HTTP (and in a real browser, `browser`).

mod browser;
mod cdp;
mod dashboard;
mod driver;
mod embed;
mod embed_looks;
mod loading;
mod portal;
mod portal_endpoints;
mod review;
mod rich_blocks;
mod site;
mod widget_link;
mod widget_use;

use crate::helpers::{TestApp, spawn_app};

async fn fetch(app: &TestApp, path: &str) -> (u16, String, reqwest::header::HeaderMap, String) {
    let r = app.client.get(app.url(path)).send().await.expect("request");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let ctype = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, ctype, headers, r.text().await.expect("body"))
}

/// Answers 200 with `ctype`; returns the body.
async fn page(app: &TestApp, path: &str, ctype: &str) -> String {
    let (status, got, _, body) = fetch(app, path).await;
    assert_eq!(status, 200, "{path}");
    assert!(got.starts_with(ctype), "{path}: content type {got}");
    assert!(!body.is_empty(), "{path}: empty");
    body
}

/// The relative imports of an ES module (`from "./x.js"`, `from "../lib/x.js"`),
/// resolved against the module's own path.
fn imports(path: &str, module: &str) -> Vec<String> {
    let dir = &path[..path.rfind('/').unwrap_or(0)];
    module
        .lines()
        .filter(|l| l.starts_with("import ") || l.starts_with("export "))
        .filter_map(|l| l.split(" from \"").nth(1))
        .filter_map(|l| l.split('"').next())
        .map(|rel| {
            let mut parts: Vec<&str> = dir.split('/').collect();
            for seg in rel.split('/') {
                match seg {
                    "." => {}
                    ".." => {
                        parts.pop();
                    }
                    s => parts.push(s),
                }
            }
            parts.join("/")
        })
        .collect()
}

/// Every module reachable from `entry`, each answering 200 as JavaScript.
async fn module_graph(app: &TestApp, entry: &str) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut todo = vec![entry.to_string()];
    while let Some(m) = todo.pop() {
        if seen.iter().any(|(p, _)| *p == m) {
            continue;
        }
        let body = page(app, &m, "text/javascript").await;
        todo.extend(imports(&m, &body));
        seen.push((m, body));
    }
    seen
}

/// `/assets/widget/main.3f2a9c1b04.js` → `/assets/widget/main.js`: the
/// file a content-hashed name stands for.
pub fn plain(path: &str) -> String {
    let mut parts: Vec<&str> = path.split('.').collect();
    if parts.len() >= 3 {
        let hash = parts[parts.len() - 2];
        if hash.len() == 10 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            parts.remove(parts.len() - 2);
        }
    }
    parts.join(".")
}

fn has(graph: &[(String, String)], path: &str) -> bool {
    graph.iter().any(|(p, _)| plain(p) == path)
}

#[actix_web::test]
async fn the_widget_page_and_its_script_answer_with_their_content_types() {
    let app = spawn_app().await;
    let html = page(&app, "/widget", "text/html").await;
    assert!(html.contains(r#"<script src="/widget.js""#), "{html}");
    assert!(html.contains(r#"href="/assets/widget."#), "{html}");
    assert!(html.contains("data-blockhook-widget"), "{html}");
    let loader = page(&app, "/widget.js", "text/javascript").await;
    assert!(loader.contains("/assets/widget/main."), "{loader}");
    assert!(loader.contains("/assets/widget."), "{loader}");
    page(&app, "/assets/widget.css", "text/css").await;
    let graph = module_graph(&app, "/assets/widget/main.js").await;
    for m in [
        "/assets/widget/widget.js",
        "/assets/widget/blocks.js",
        "/assets/widget/api.js",
        "/assets/lib/sse.js",
        "/assets/lib/dom.js",
    ] {
        assert!(has(&graph, m), "{m} is not reached from main.js");
    }
    let code: String = graph.iter().map(|(_, b)| b.as_str()).collect();
    for used in [
        "/widget/v1/chatbots/",
        "/conversations/",
        "/messages",
        "/clicks",
        "/forms/",
        "/stream",
        "Last-Event-ID",
    ] {
        assert!(code.contains(used), "the widget does not use {used}");
    }
}

#[actix_web::test]
async fn the_dashboard_and_every_module_it_imports_answer() {
    let app = spawn_app().await;
    let html = page(&app, "/dashboard", "text/html").await;
    assert!(
        html.contains(r#"<script type="module" src="/assets/dashboard/main."#),
        "{html}"
    );
    assert!(html.contains(r#"href="/assets/dashboard."#), "{html}");
    page(&app, "/assets/dashboard.css", "text/css").await;
    let graph = module_graph(&app, "/assets/dashboard/main.js").await;
    for m in [
        "api.js",
        "deliveries.js",
        "detail.js",
        "inbox.js",
        "health.js",
    ] {
        let path = format!("/assets/dashboard/{m}");
        assert!(has(&graph, &path), "{m} is not imported");
    }
    assert!(has(&graph, "/assets/lib/sse.js"));
}

#[actix_web::test]
async fn the_pages_load_nothing_from_other_origins() {
    let app = spawn_app().await;
    for path in ["/widget", "/dashboard"] {
        let (_, _, headers, body) = fetch(&app, path).await;
        let csp = headers
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(csp.contains("default-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("connect-src 'self'"), "{path}: {csp}");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path}"
        );
    }
    let mut files = module_graph(&app, "/assets/widget/main.js").await;
    files.extend(module_graph(&app, "/assets/dashboard/main.js").await);
    for path in ["/widget.js", "/assets/widget.css", "/assets/dashboard.css"] {
        files.push((path.to_string(), fetch(&app, path).await.3));
    }
    for (path, body) in files {
        for line in body.lines() {
            assert!(
                !line.contains("http://") && !line.contains("https://"),
                "{path} refers to another origin: {line}"
            );
        }
    }
}

#[actix_web::test]
async fn an_unchanged_asset_revalidates_with_304() {
    let app = spawn_app().await;
    let (_, _, headers, _) = fetch(&app, "/widget.js").await;
    let etag = headers
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .expect("etag")
        .to_string();
    let r = app
        .client
        .get(app.url("/widget.js"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 304);
    assert!(r.bytes().await.expect("body").is_empty());
    let r = app
        .client
        .get(app.url("/widget.js"))
        .header("If-None-Match", "\"something-else\"")
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 200);
}

#[actix_web::test]
async fn unknown_assets_are_404_problems() {
    let app = spawn_app().await;
    for path in [
        "/assets/nope.js",
        "/assets/widget.html",
        "/assets/../Cargo.toml",
        "/assets/%2e%2e/Cargo.toml",
    ] {
        let (status, ctype, _, _) = fetch(&app, path).await;
        assert_eq!(status, 404, "{path}");
        assert!(
            ctype.starts_with("application/problem+json"),
            "{path}: {ctype}"
        );
    }
}
