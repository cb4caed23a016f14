//! `blockhook ask`: ask a person from a script and exit with the answer.
//!
//! Exit codes: see [`EXIT_CODES_HELP`].

use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};

#[derive(Debug, Clone, Args)]
pub struct AskArgs {
    /// The conversation to ask in.
    pub conversation_id: String,
    /// The question (up to 600 characters).
    pub question: String,
    /// An option, `id:label` (or just `id`); repeat for more.
    #[arg(short = 'o', long = "option", value_name = "ID:LABEL")]
    pub options: Vec<String>,
    /// Allow choosing several options.
    #[arg(long)]
    pub multi: bool,
    /// Allow a free-text answer.
    #[arg(long)]
    pub custom: bool,
    /// Label of the accept button (a question without options).
    #[arg(long)]
    pub accept: Option<String>,
    /// Label of the decline button.
    #[arg(long)]
    pub decline: Option<String>,
    /// Allow a comment with a decline.
    #[arg(long)]
    pub comment: bool,
    #[arg(long)]
    pub title: Option<String>,
    /// How long to wait: `90s`, `10m`, `2h` (5 s to 1 d; default 10m).
    #[arg(long)]
    pub timeout: Option<String>,
    /// A file the person can open from the question (at most 512 KiB).
    #[arg(long, value_name = "FILE")]
    pub attach: Option<std::path::PathBuf>,
    /// The server.
    #[arg(long, env = "BLOCKHOOK_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The chatbot's API key (`sk_…`).
    #[arg(long = "api-key", env = "BLOCKHOOK_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Print the server's JSON as it came (the answer, or the problem of a
    /// refusal) instead of a readable line.
    #[arg(long)]
    pub json: bool,
}

/// Shown by `blockhook ask --help`.
pub const EXIT_CODES_HELP: &str = "\
Examples:
  blockhook ask conv_01J… \"Deploy to production?\"
  blockhook ask conv_01J… \"Which region?\" -o eu:Europe -o us:\"United States\" --custom
  blockhook ask conv_01J… \"Merge this?\" --attach fix.diff --timeout 30m
  BLOCKHOOK_URL=https://hooks.example.com BLOCKHOOK_API_KEY=sk_… blockhook ask …

Exit codes:
  0   answered (the chosen ids, the text) or accepted
  1   declined (the comment, if any, is printed)
  2   expired or withdrawn
  64  usage error (a timeout outside 5s to 1d included)
  65  the server refused the request as invalid
  66  an --attach file that does not exist or cannot be read
  67  no such conversation for this API key
  69  server unreachable, or a question is already pending in the conversation
  77  missing or bad API key";

pub const EXIT_USAGE: i32 = 64;
const MIN_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// The timeout given, checked before any request.
pub fn timeout(args: &AskArgs) -> Result<Option<Duration>, String> {
    let Some(t) = &args.timeout else {
        return Ok(None);
    };
    let d = crate::domain::duration::parse(t).map_err(|e| format!("--timeout: {e}"))?;
    if !(MIN_TIMEOUT..=MAX_TIMEOUT).contains(&d) {
        return Err(format!("--timeout must be 5s to 1d, got {t}"));
    }
    Ok(Some(d))
}

pub const EXIT_DECLINED: i32 = 1;
pub const EXIT_NO_ANSWER: i32 = 2;
pub const EXIT_DATAERR: i32 = 65;
pub const EXIT_NOINPUT: i32 = 66;
pub const EXIT_UNAVAILABLE: i32 = 69;
pub const EXIT_NOPERM: i32 = 77;
/// No such conversation (EX_NOUSER: the addressee is unknown).
pub const EXIT_NO_CONVERSATION: i32 = 67;

/// A problem (RFC 9457) as one line: `error: <title>: <detail> (code)`;
/// a body that is no problem, as it came.
pub fn problem_line(status: u16, body: &str) -> String {
    let v: Value = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    if s("title").is_empty() {
        return format!("error: HTTP {status}: {}", body.trim());
    }
    let mut line = format!("error: {}", s("title"));
    if !s("detail").is_empty() {
        line.push_str(": ");
        line.push_str(s("detail"));
    }
    if let Some(errors) = v.get("errors").and_then(Value::as_array) {
        let fields: Vec<String> = errors
            .iter()
            .map(|e| {
                let f = e.get("field").and_then(Value::as_str).unwrap_or_default();
                let m = e.get("message").and_then(Value::as_str).unwrap_or_default();
                format!("{f}: {m}")
            })
            .collect();
        if !fields.is_empty() {
            line.push_str(" [");
            line.push_str(&fields.join("; "));
            line.push(']');
        }
    }
    if !s("code").is_empty() {
        line.push_str(&format!(" ({})", s("code")));
    }
    line
}

/// How long past the question's timeout a lost server is still waited for.
const REATTACH_GRACE: Duration = Duration::from_secs(30);

/// Waits for the answer of question `id` through
/// `GET /api/v1/interactions/{id}/answer?wait=`, long-polling while it is
/// pending and retrying with backoff while the server is away (restarting,
/// or another instance taking over), until an answer or `until`.
pub async fn reattach(
    client: &reqwest::Client,
    base: &str,
    api_key: &str,
    id: &str,
    until: std::time::Instant,
) -> Result<Value, String> {
    let url = format!("{base}/api/v1/interactions/{id}/answer?wait=25");
    let mut delays = crate::mcp::reconnect_delays();
    loop {
        let r = client.get(&url).bearer_auth(api_key).send().await;
        let why = match r {
            Ok(r) if r.status().is_success() => {
                match r.text().await.map_err(|e| e.to_string()).and_then(|t| {
                    serde_json::from_str::<Value>(t.trim()).map_err(|e| e.to_string())
                }) {
                    Ok(v) if v.get("answer").and_then(Value::as_str) == Some("pending") => {
                        delays = crate::mcp::reconnect_delays();
                        continue;
                    }
                    Ok(v) => return Ok(v),
                    Err(e) => format!("the answer was cut off: {e}"),
                }
            }
            Ok(r) if matches!(r.status().as_u16(), 502..=504) => {
                format!("the server answered {}", r.status())
            }
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                return Err(format!("{status}: {}", text.trim()));
            }
            Err(e) => format!("server unreachable: {e}"),
        };
        if std::time::Instant::now() > until {
            return Err(why);
        }
        tokio::time::sleep(delays.next().unwrap_or(Duration::from_secs(5))).await;
    }
}

/// The request body for `args`.
pub fn body(args: &AskArgs) -> Value {
    let mut b = json!({"message": args.question});
    if !args.options.is_empty() {
        let opts: Vec<Value> = args
            .options
            .iter()
            .map(|o| match o.split_once(':') {
                Some((id, label)) => json!({"id": id, "label": label}),
                None => json!(o),
            })
            .collect();
        b["options"] = json!(opts);
    }
    if args.multi {
        b["multiple"] = json!(true);
    }
    if args.custom {
        b["custom"] = json!(true);
    }
    if let Some(a) = &args.accept {
        b["accept"] = json!(a);
    }
    if let Some(d) = &args.decline {
        b["decline"] = json!(d);
    }
    if args.comment {
        b["comment"] = json!(true);
    }
    if let Some(t) = &args.title {
        b["title"] = json!(t);
    }
    if let Some(t) = &args.timeout {
        b["timeout"] = json!(t);
    }
    b
}

/// The `attachment` of a file: its name, a content type guessed from its
/// extension, its bytes in base64. An error names the file.
pub fn attachment(path: &std::path::Path) -> Result<Value, String> {
    use base64::Engine;
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let filename = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a file", path.display()))?;
    let content_type = crate::domain::attachment::text_type_by_extension(&filename)
        .map(str::to_string)
        .unwrap_or_else(|| {
            mime_guess::from_path(path)
                .first_or_octet_stream()
                .essence_str()
                .to_string()
        });
    Ok(json!({
        "filename": filename,
        "content_type": content_type,
        "data": base64::engine::general_purpose::STANDARD.encode(data),
    }))
}

/// What to print and the exit code for an answer.
pub fn render(answer: &Value) -> (String, i32) {
    let s = |k: &str| {
        answer
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match answer.get("answer").and_then(Value::as_str) {
        Some("chose") => {
            let ids: Vec<String> = answer
                .get("options")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            (ids.join("\n"), 0)
        }
        Some("custom") => (s("text"), 0),
        Some("accepted") => (String::new(), 0),
        Some("declined") => (s("comment"), EXIT_DECLINED),
        _ => (String::new(), EXIT_NO_ANSWER),
    }
}

pub async fn run(args: AskArgs) -> i32 {
    let Some(api_key) = args.api_key.clone().filter(|k| !k.trim().is_empty()) else {
        eprintln!("blockhook ask: no API key: pass --api-key sk_… or set BLOCKHOOK_API_KEY");
        return EXIT_NOPERM;
    };
    let wait = match timeout(&args) {
        Ok(t) => t.unwrap_or(Duration::from_secs(600)),
        Err(e) => {
            eprintln!("blockhook ask: {e}");
            return EXIT_USAGE;
        }
    };
    // The file is read before anything is asked.
    let mut body = body(&args);
    if let Some(path) = &args.attach {
        match attachment(path) {
            Ok(a) => body["attachment"] = a,
            Err(e) => {
                eprintln!("blockhook ask: cannot read the attachment {e}");
                return EXIT_NOINPUT;
            }
        }
    }
    if std::io::stderr().is_terminal() {
        eprintln!(
            "blockhook ask: waiting for an answer in {} (up to {})…",
            args.conversation_id,
            humantime::format_duration(wait)
        );
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder().build() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("blockhook ask: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let url = format!(
        "{}/api/v1/conversations/{}/ask",
        args.url.trim_end_matches('/'),
        args.conversation_id
    );
    let started = std::time::Instant::now();
    let resp = client
        .post(url)
        .bearer_auth(&api_key)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    let resp = match resp {
        Ok(r) => r,
        Err(e) => {
            eprintln!("blockhook ask: server unreachable: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let status = resp.status().as_u16();
    let header_id = resp
        .headers()
        .get("blockhook-interaction-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = resp.text().await;
    if status != 200 {
        let text = text.unwrap_or_default();
        if args.json {
            eprintln!("{}", text.trim());
        } else {
            eprintln!("{}", problem_line(status, &text));
        }
        return match status {
            401 => EXIT_NOPERM,
            404 => EXIT_NO_CONVERSATION,
            400 | 413 | 415 | 422 => EXIT_DATAERR,
            _ => EXIT_UNAVAILABLE,
        };
    }
    let answer = match text.map(|t| serde_json::from_str::<Value>(t.trim())) {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) if header_id.is_none() => {
            eprintln!("blockhook ask: unreadable answer: {e}");
            return EXIT_UNAVAILABLE;
        }
        Err(e) if header_id.is_none() => {
            eprintln!("blockhook ask: the answer was cut off: {e}");
            return EXIT_UNAVAILABLE;
        }
        // Cut off (the server stopped): re-attach by the id.
        _ => None,
    };
    let pending = answer
        .as_ref()
        .is_none_or(|a| a.get("answer").and_then(Value::as_str) == Some("pending"));
    let answer = match answer {
        Some(a) if !pending => a,
        a => {
            let id = a
                .as_ref()
                .and_then(|a| a.get("interaction_id"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(header_id);
            let Some(id) = id else {
                eprintln!("blockhook ask: the server ended the wait without naming the question");
                return EXIT_UNAVAILABLE;
            };
            let base = args.url.trim_end_matches('/');
            let until = started + wait + REATTACH_GRACE;
            match reattach(&client, base, &api_key, &id, until).await {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("blockhook ask: {e} (the question {id} stays open)");
                    return EXIT_UNAVAILABLE;
                }
            }
        }
    };
    if args.json {
        println!("{answer}");
        return render(&answer).1;
    }
    let (out, code) = render(&answer);
    if !out.is_empty() {
        println!("{out}");
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_answers_and_exit_codes() {
        assert_eq!(
            render(&json!({"answer": "chose", "options": ["a", "b"]})),
            ("a\nb".into(), 0)
        );
        assert_eq!(
            render(&json!({"answer": "custom", "text": "blue"})),
            ("blue".into(), 0)
        );
        assert_eq!(render(&json!({"answer": "accepted"})), (String::new(), 0));
        assert_eq!(
            render(&json!({"answer": "declined", "comment": "no"})),
            ("no".into(), 1)
        );
        assert_eq!(render(&json!({"answer": "expired"})).1, 2);
        assert_eq!(render(&json!({"answer": "withdrawn"})).1, 2);
    }

    #[test]
    fn a_problem_is_one_readable_line() {
        let p = r#"{"type":"https://x/problems/not_found","title":"Not found","status":404,"detail":"no such conversation","code":"not_found"}"#;
        assert_eq!(
            problem_line(404, p),
            "error: Not found: no such conversation (not_found)"
        );
        let v = r#"{"title":"Validation failed","status":422,"detail":"bad","code":"validation_failed","errors":[{"field":"/timeout","code":"x","message":"too long"}]}"#;
        assert_eq!(
            problem_line(422, v),
            "error: Validation failed: bad [/timeout: too long] (validation_failed)"
        );
        assert_eq!(
            problem_line(502, "Bad Gateway"),
            "error: HTTP 502: Bad Gateway"
        );
    }
}
