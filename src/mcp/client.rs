//! The MCP server's calls to the blockhook server: ask without waiting, then
//! long-poll the answer (each poll well under a minute, so no call outlives a
//! connection or a proxy's idle timeout).

use std::time::Duration;

use serde_json::{Value, json};

/// Why a call failed: the problem's `code` (or `unreachable`), with what the
/// server said.
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: String,
    pub status: Option<u16>,
    pub detail: String,
    pub errors: Option<Value>,
}

impl Failure {
    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code, "detail": self.detail});
        if let Some(s) = self.status {
            v["status"] = json!(s);
        }
        if let Some(e) = &self.errors {
            v["errors"] = e.clone();
        }
        v
    }
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

fn unreachable(e: impl std::fmt::Display) -> Failure {
    Failure {
        code: "unreachable".into(),
        status: None,
        detail: format!("the blockhook server could not be reached: {e}"),
        errors: None,
    }
}

impl Api {
    pub fn new(base: &str, key: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // Longer than the longest answer wait (50 s).
            .timeout(Duration::from_secs(80))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            key: key.to_string(),
        })
    }

    async fn read(resp: reqwest::Response) -> Result<Value, Failure> {
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(unreachable)?;
        let body: Value = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return if body.is_object() {
                Ok(body)
            } else {
                Err(Failure {
                    code: "bad_response".into(),
                    status: Some(status),
                    detail: "the server's answer was not JSON".into(),
                    errors: None,
                })
            };
        }
        let s = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        Err(Failure {
            code: s("code").unwrap_or_else(|| format!("http_{status}")),
            status: Some(status),
            detail: s("detail").unwrap_or_else(|| text.chars().take(300).collect()),
            errors: body.get("errors").cloned(),
        })
    }

    /// `method` on `path` (below the base), with a JSON body if any.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<String>,
    ) -> Result<Value, Failure> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        Self::read(req.send().await.map_err(unreachable)?).await
    }

    /// Posts the question without waiting; its interaction id.
    pub async fn start(&self, conversation_id: &str, mut body: Value) -> Result<String, Failure> {
        body["wait"] = json!(false);
        let path = format!("/api/v1/conversations/{}/ask", urlencode(conversation_id));
        let v = self
            .call(reqwest::Method::POST, &path, Some(body.to_string()))
            .await?;
        v.get("interaction_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Failure {
                code: "bad_response".into(),
                status: None,
                detail: "the server gave no interaction_id".into(),
                errors: None,
            })
    }

    /// The answer object, or `{"answer": "pending"}` after `wait` seconds.
    pub async fn answer(&self, interaction_id: &str, wait: u64) -> Result<Value, Failure> {
        let path = format!(
            "/api/v1/interactions/{}/answer?wait={wait}",
            urlencode(interaction_id)
        );
        self.call(reqwest::Method::GET, &path, None).await
    }

    /// The interaction (`GET /api/v1/interactions/{id}`).
    pub async fn interaction(&self, interaction_id: &str) -> Result<Value, Failure> {
        let path = format!("/api/v1/interactions/{}", urlencode(interaction_id));
        self.call(reqwest::Method::GET, &path, None).await
    }

    /// Withdraws a pending question (`POST /api/v1/interactions/{id}/cancel`).
    pub async fn cancel(&self, interaction_id: &str) -> Result<Value, Failure> {
        let path = format!("/api/v1/interactions/{}/cancel", urlencode(interaction_id));
        self.call(reqwest::Method::POST, &path, Some("{}".into()))
            .await
    }
}

/// Percent-encodes a path segment (ids are plain, but a caller may pass anything).
fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
