//! Runs a scenario of `tests/dashboard/pages.mjs` (playwright-core driving
//! the system's Chromium, axe-core in the page) and returns what it saw.
//! Chromium and the driver's `npm ci` are required: a missing one fails,
//! never skips. Screenshots go to `target/tmp/screenshots`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dashboard")
}

/// Where the browser tests leave their screenshots.
pub fn screenshots() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&d).expect("screenshots dir");
    d
}

fn drive(scenario: &str, extra: Value) -> Value {
    let dir = dir();
    assert!(
        dir.join("node_modules/playwright-core").exists()
            && dir.join("node_modules/axe-core").exists(),
        "the browser driver is not installed: run `npm ci --prefix tests/dashboard` (scripts/test does)"
    );
    let mut input = json!({
        "scenario": scenario,
        "chromium": super::browser::chromium(),
        "screenshots": screenshots(),
    });
    if let (Some(o), Some(e)) = (input.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    let mut child = Command::new("node")
        .arg(dir.join("pages.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node is required to drive the pages");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("driver ran");
    assert!(
        out.status.success(),
        "{scenario}: the driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("driver output is JSON")
}

/// The scenario, run off the test's runtime (the app keeps serving).
pub async fn run(scenario: &'static str, extra: Value) -> Value {
    let out = actix_web::rt::task::spawn_blocking(move || drive(scenario, extra))
        .await
        .expect("driver thread");
    // Captured by the test harness and shown only when the test fails: what
    // the page reported, whole, next to the assertion that failed.
    eprintln!("{scenario}: {out}");
    out
}

/// axe-core found nothing.
pub fn no_violations(what: &str, v: &Value) {
    assert_eq!(v, &json!([]), "{what}: axe-core violations");
}
