//! `blockhook bench` run for real on a few hundred clicks: the server as a
//! child process, the floor forwarder, the built-in receiver. Checks that
//! the report is consistent — every accepted click delivered, percentiles
//! in order, rates positive — never how fast it was.

use std::collections::HashMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Runs `blockhook bench ARGS` to the end (bounded) and returns its exit
/// code and stdout, with its progress and errors (stderr) after it.
fn bench(args: &[&str]) -> (i32, String) {
    let (code, out, _) = bench_with_stderr(args);
    (code, out)
}

/// [`bench`], and what it printed on stderr.
fn bench_with_stderr(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .arg("bench")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start blockhook bench");
    // Read both pipes while it runs so that neither can fill up.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("blockhook bench {args:?} did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    let code = status.code().unwrap_or(-1);
    if code != 0 {
        eprintln!("blockhook bench {args:?} exited {code}; stderr:\n{err}");
    }
    (code, out, err)
}

/// The JSON report, one object per mode.
fn reports(stdout: &str) -> HashMap<String, Value> {
    all_reports(stdout)
        .into_iter()
        .map(|v| (v["mode"].as_str().expect("mode").to_string(), v))
        .collect()
}

/// The JSON report, one object per line, in order.
fn all_reports(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// Every accepted click delivered once, percentiles ordered, rates positive.
fn assert_consistent(r: &Value, clicks: u64) {
    let mode = r["mode"].as_str().unwrap_or_default();
    assert_eq!(r["accepted"], clicks, "{mode}: every click accepted: {r}");
    assert_eq!(
        r["delivered"], r["accepted"],
        "{mode}: every click delivered: {r}"
    );
    assert_eq!(r["errors"], 0, "{mode}: {r}");
    assert_eq!(r["unmatched"], 0, "{mode}: {r}");
    // The check: none lost, none twice, each conversation in click order.
    assert_eq!(r["lost"], 0, "{mode}: {r}");
    assert_eq!(r["duplicates"], 0, "{mode}: {r}");
    assert_eq!(r["out_of_order"], 0, "{mode}: {r}");
    assert_eq!(r["consistent"], true, "{mode}: {r}");
    let e2e = &r["e2e_ms"];
    let (p50, p90, p99, max) = (
        num(e2e, "p50"),
        num(e2e, "p90"),
        num(e2e, "p99"),
        num(e2e, "max"),
    );
    assert!(
        0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max,
        "{mode}: percentiles out of order: {e2e}"
    );
    // How long a click took to be answered, the first part of its e2e.
    let accept = &r["accept_ms"];
    let (a50, a99) = (num(accept, "p50"), num(accept, "p99"));
    assert!(
        0.0 < a50 && a50 <= a99 && a99 <= num(accept, "max"),
        "{mode}: answer latency {accept} against e2e {e2e}"
    );
    for key in [
        "accepted_per_s",
        "delivered_per_s",
        "floor_per_s",
        "floor_ratio",
        "server_peak_rss_mb",
    ] {
        let x = num(r, key);
        assert!(x > 0.0 && x.is_finite(), "{mode}: {key} = {x}");
    }
    assert!(num(r, "server_cpu_s") >= 0.0, "{mode}: {r}");
}

#[test]
fn closed_and_open_loop_deliver_every_accepted_click() {
    let (code, out) = bench(&[
        "--clicks",
        "300",
        "--concurrency",
        "8",
        "--rate",
        "200",
        "--duration",
        "1s",
        "--json",
    ]);
    assert_eq!(code, 0, "bench failed:\n{out}");
    let r = reports(&out);
    assert_eq!(
        r.len(),
        4,
        "floor, closed, floor again after it, open: {out}"
    );
    assert_consistent(&r["floor"], 300);
    assert_consistent(&r["closed"], 300);
    assert_consistent(&r["floor_after"], 300);
    assert_consistent(&r["open"], 200);
    // The server did the work of the blockhook modes.
    assert!(num(&r["closed"], "server_cpu_s") + num(&r["open"], "server_cpu_s") > 0.0);
    // Every mode is measured against the mean of the two floor runs of the
    // same bench, one before and one after the closed loop.
    let of = |m: &str| num(&r[m], "accepted_per_s").min(num(&r[m], "delivered_per_s"));
    let runs = [of("floor"), of("floor_after")];
    let floor = (runs[0] + runs[1]) / 2.0;
    for m in ["floor", "closed", "floor_after", "open"] {
        assert!((num(&r[m], "floor_per_s") - floor).abs() < 1e-6, "{m}");
        assert_eq!(
            r[m]["floor_runs_per_s"],
            serde_json::json!(runs),
            "{m}: both floor runs, in order"
        );
        let ratio = num(&r[m], "floor_ratio");
        let expected = num(&r[m], "accepted_per_s").min(num(&r[m], "delivered_per_s"))
            / num(&r[m], "floor_per_s");
        assert!(
            (ratio - expected).abs() < 1e-9,
            "{m}: ratio {ratio} vs {expected}"
        );
    }
}

#[test]
fn three_endpoints_run_beside_a_floor_that_also_sends_to_two_more_receivers() {
    let (code, out) = bench(&[
        "--clicks",
        "300",
        "--concurrency",
        "8",
        "--endpoints",
        "1,3",
        "--json",
    ]);
    assert_eq!(code, 0, "bench failed:\n{out}");
    let modes: Vec<String> = all_reports(&out)
        .iter()
        .map(|r| r["mode"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        modes,
        ["floor", "floor_3ep", "closed", "closed_3ep", "floor_after"],
        "{out}"
    );
    let r = reports(&out);
    for m in ["floor_3ep", "closed_3ep"] {
        assert_consistent(&r[m], 300);
        assert_eq!(
            r[m]["endpoints_made"], true,
            "{m}: both extra receivers got theirs: {out}"
        );
    }
    // The fan-out floor is measured against the floor, not one of its runs.
    let of = |m: &str| num(&r[m], "accepted_per_s").min(num(&r[m], "delivered_per_s"));
    let runs = serde_json::json!([of("floor"), of("floor_after")]);
    assert_eq!(r["closed_3ep"]["floor_runs_per_s"], runs, "{out}");
    // Its extra cost, and the share one endpoint's cost leaves for it.
    let machine = |m: &str| {
        let v = &r[m];
        (num(v, "server_cpu_s") + num(v, "bench_cpu_s")) * 1e6 / num(v, "accepted")
    };
    let extra = (machine("floor_3ep") - machine("floor")).max(0.0);
    let x = num(&r["closed_3ep"], "extra_sends_us_per_click");
    assert!((x - extra).abs() < 1e-6, "{x} against {extra}");
    let share = num(&r["closed_3ep"], "sends_only_share");
    let one = machine("closed");
    assert!((share - one / (one + extra)).abs() < 1e-9, "{share}");
    assert!(0.0 < share && share <= 1.0, "{share}");
}

#[test]
fn backlog_is_delivered_once_the_receiver_comes_back() {
    let (code, out) = bench(&["--backlog", "300", "--concurrency", "8", "--json"]);
    assert_eq!(code, 0, "bench failed:\n{out}");
    let r = reports(&out);
    assert_eq!(r.len(), 2, "floor and backlog: {out}");
    assert_consistent(&r["floor"], 300);
    // Without a closed loop the floor runs once and is its own measure.
    assert_eq!(r["floor"]["floor_ratio"], 1.0);
    assert_eq!(
        r["backlog"]["floor_runs_per_s"].as_array().map(Vec::len),
        Some(1)
    );
    let b = &r["backlog"];
    assert_consistent(b, 300);
    assert!(num(b, "backlog_rss_mb") > 0.0, "{b}");
    assert!(num(b, "resume_s") >= 0.0, "{b}");
    assert!(
        num(b, "server_peak_rss_mb") >= num(b, "backlog_rss_mb"),
        "{b}"
    );
}

#[test]
fn the_table_names_every_mode_and_the_floor_share() {
    let (code, out) = bench(&["--clicks", "200", "--concurrency", "4"]);
    assert_eq!(code, 0, "bench failed:\n{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("blockhook bench: sqlite database"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("mode") && lines[1].contains("floor"),
        "{out}"
    );
    let closed = lines
        .iter()
        .find(|l| l.starts_with("closed"))
        .unwrap_or_else(|| panic!("no closed row:\n{out}"));
    assert!(closed.contains('%'), "{closed}");
    assert!(lines.iter().any(|l| l.starts_with("floor ")), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("floor_after")), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("floor:") && l.contains("before and after the closed loop")),
        "{out}"
    );
}

/// Two server processes on one PostgreSQL database behind the bench's
/// round-robin, next to one, in every mode: each accepted click delivered
/// once, each conversation's events in click order although its
/// consecutive clicks went to different instances.
#[test]
fn two_instances_on_postgres_lose_nothing_and_keep_order() {
    let db = crate::helpers::postgres_admin_url();
    let (code, out) = bench(&[
        "--database",
        &db,
        "--instances",
        "1,2",
        "--clicks",
        "300",
        "--concurrency",
        "8",
        "--conversations",
        "16",
        "--rate",
        "200",
        "--duration",
        "1s",
        "--backlog",
        "300",
        "--warmup",
        "50",
        "--json",
    ]);
    assert_eq!(code, 0, "bench failed:\n{out}");
    let all = all_reports(&out);
    let runs: Vec<(&str, u64)> = all
        .iter()
        .map(|r| {
            (
                r["mode"].as_str().unwrap_or_default(),
                r["instances"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            ("floor", 1),
            ("closed", 1),
            ("closed", 2),
            ("floor_after", 1),
            ("open", 1),
            ("open", 2),
            ("backlog", 1),
            ("backlog", 2),
        ],
        "{out}"
    );
    for r in &all {
        let clicks = match r["mode"].as_str() {
            Some("open") => 200,
            _ => 300,
        };
        // The backlog too: delivered once the receiver is back, in order.
        assert_consistent(r, clicks);
        if r["mode"] != "floor" && r["mode"] != "floor_after" {
            assert_eq!(r["database"], "postgres", "{r}");
            assert!(num(r, "database_cpu_s") >= 0.0, "{r}");
        }
    }
}

#[test]
fn two_instances_without_postgres_are_refused() {
    let (code, out, err) = bench_with_stderr(&["--instances", "2", "--clicks", "10"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.is_empty(), "nothing measured: {out}");
    assert!(
        err.contains("--instances 2 or more needs a database the instances share"),
        "{err}"
    );
}
