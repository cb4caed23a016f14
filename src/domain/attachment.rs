//! The file an ask may carry (API §7): checked at the boundary, stored with
//! its question, listed on the message as an [`AttachmentRef`].

use crate::domain::ids::{ChatbotId, ConversationId, MessageId};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::error::FieldError;

/// At most 512 KiB decoded, so an ask's body stays under the 1 MiB limit.
pub const MAX_BYTES: usize = 512 * 1024;
pub const MAX_FILENAME_CHARS: usize = 120;

/// How a message lists an attachment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttachmentRef {
    pub id: String,
    pub filename: String,
    pub content_type: String,
    pub size: u64,
    /// `{public_url}/widget/v1/attachments/{id}`.
    pub url: String,
}

/// A checked attachment, not yet stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Upload {
    pub filename: String,
    pub content_type: String,
    pub data: Vec<u8>,
}

/// A stored attachment with its bytes.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub id: String,
    pub chatbot_id: ChatbotId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub filename: String,
    pub content_type: String,
    pub data: Vec<u8>,
    pub created_at: i64,
}

/// A plain file name: 1–120 characters, no path separators, no control
/// characters, not `.` or `..`.
pub fn valid_filename(s: &str) -> Result<(), &'static str> {
    let n = s.chars().count();
    if n == 0 || s.trim().is_empty() {
        return Err("a file name is required");
    }
    if n > MAX_FILENAME_CHARS {
        return Err("a file name is at most 120 characters");
    }
    if s == "." || s == ".." || s.chars().any(|c| c == '/' || c == '\\' || c.is_control()) {
        return Err("a plain file name: no path, no control characters");
    }
    Ok(())
}

/// A media type such as `text/plain` or `application/pdf; charset=utf-8`.
pub fn valid_content_type(s: &str) -> Result<(), &'static str> {
    if s.len() > 255 || s.chars().any(|c| c.is_control() || !c.is_ascii()) {
        return Err("a media type such as text/plain");
    }
    match s.parse::<mime::Mime>() {
        Ok(m) if !m.type_().as_str().is_empty() && !m.subtype().as_str().is_empty() => Ok(()),
        _ => Err("a media type such as text/plain"),
    }
}

/// Checks `attachment` of an ask body; errors point into `/attachment/…`.
pub fn parse(v: &Value, errors: &mut Vec<FieldError>) -> Option<Upload> {
    let Some(o) = v.as_object() else {
        errors.push(FieldError::new(
            "/attachment",
            "invalid_type",
            "an attachment is {filename, content_type, data}",
        ));
        return None;
    };
    for k in o.keys() {
        if !["filename", "content_type", "data"].contains(&k.as_str()) {
            errors.push(FieldError::new(
                format!("/attachment/{k}"),
                "unknown_field",
                "this key is not allowed here",
            ));
        }
    }
    let before = errors.len();
    let text = |k: &str, errors: &mut Vec<FieldError>| match o.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        None | Some(Value::Null) => {
            errors.push(FieldError::new(
                format!("/attachment/{k}"),
                "required",
                format!("{k} is required"),
            ));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(
                format!("/attachment/{k}"),
                "invalid_type",
                "must be a string",
            ));
            None
        }
    };
    let filename = text("filename", errors);
    if let Some(f) = &filename
        && let Err(m) = valid_filename(f)
    {
        let code = if f.chars().count() > MAX_FILENAME_CHARS {
            "too_long"
        } else {
            "invalid_format"
        };
        errors.push(FieldError::new("/attachment/filename", code, m));
    }
    let content_type = text("content_type", errors);
    if let Some(t) = &content_type
        && let Err(m) = valid_content_type(t)
    {
        errors.push(FieldError::new(
            "/attachment/content_type",
            "invalid_format",
            m,
        ));
    }
    let mut data = None;
    if let Some(d) = text("data", errors) {
        // Decoded size is at most 3/4 of the text: refuse what cannot fit
        // before decoding it.
        if d.len() / 4 * 3 > MAX_BYTES + 3 {
            errors.push(too_large());
        } else {
            match base64::engine::general_purpose::STANDARD.decode(d.as_bytes()) {
                Ok(b) if b.len() > MAX_BYTES => errors.push(too_large()),
                Ok(b) => data = Some(b),
                Err(_) => errors.push(FieldError::new(
                    "/attachment/data",
                    "invalid_base64",
                    "data is the file in standard base64",
                )),
            }
        }
    }
    if errors.len() > before {
        return None;
    }
    let filename = filename?;
    let content_type = content_type_for(&filename, content_type?.trim());
    Some(Upload {
        filename,
        content_type,
        data: data?,
    })
}

/// The content type of common text formats, by the file name's extension.
pub fn text_type_by_extension(filename: &str) -> Option<&'static str> {
    let (_, ext) = filename.rsplit_once('.')?;
    Some(match ext.to_ascii_lowercase().as_str() {
        "diff" | "patch" => "text/x-diff",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "txt" | "log" | "text" | "ini" | "cfg" | "conf" | "env" => "text/plain",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "json" => "application/json",
        "ndjson" | "jsonl" => "application/x-ndjson",
        "xml" => "application/xml",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "rs" | "py" | "go" | "ts" | "rb" | "java" | "c" | "h" | "cpp" | "sh" | "sql" => {
            "text/plain"
        }
        _ => return None,
    })
}

/// The type an attachment is stored and served with: the one given, unless
/// it says nothing (`application/octet-stream`, empty) and the extension
/// names a common text format.
pub fn content_type_for(filename: &str, given: &str) -> String {
    let vague = given.is_empty() || given.eq_ignore_ascii_case("application/octet-stream");
    match text_type_by_extension(filename) {
        Some(t) if vague => t.to_string(),
        _ => given.to_string(),
    }
}

fn too_large() -> FieldError {
    FieldError::new(
        "/attachment/data",
        "too_large",
        "an attachment is at most 512 KiB",
    )
}

/// The plain-ASCII stand-in of a file name for the `filename=` parameter
/// (the exact name goes in `filename*=`).
pub fn ascii_fallback(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> (Option<Upload>, Vec<String>) {
        let mut e = Vec::new();
        let u = parse(&v, &mut e);
        (u, e.into_iter().map(|e| e.field).collect())
    }

    #[test]
    fn accepts_a_plain_file() {
        let (u, e) = check(
            json!({"filename": "report ü.pdf", "content_type": "application/pdf", "data": "aGk="}),
        );
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(u.unwrap().data, b"hi");
    }

    #[test]
    fn points_at_what_is_wrong() {
        for (v, field) in [
            (
                json!({"filename": "../etc/passwd", "content_type": "text/plain", "data": ""}),
                "/attachment/filename",
            ),
            (
                json!({"filename": "a\\b", "content_type": "text/plain", "data": ""}),
                "/attachment/filename",
            ),
            (
                json!({"filename": "a\nb", "content_type": "text/plain", "data": ""}),
                "/attachment/filename",
            ),
            (
                json!({"filename": "x".repeat(121), "content_type": "text/plain", "data": ""}),
                "/attachment/filename",
            ),
            (
                json!({"filename": "a", "content_type": "not a type", "data": ""}),
                "/attachment/content_type",
            ),
            (
                json!({"filename": "a", "content_type": "text/plain", "data": "!!"}),
                "/attachment/data",
            ),
            (
                json!({"filename": "a", "content_type": "text/plain"}),
                "/attachment/data",
            ),
            (
                json!({"filename": "a", "content_type": "text/plain", "data": "", "x": 1}),
                "/attachment/x",
            ),
            (json!("file"), "/attachment"),
        ] {
            assert_eq!(check(v).1, vec![field.to_string()]);
        }
        let big = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_BYTES + 1]);
        let (_, e) = check(json!({"filename": "a", "content_type": "text/plain", "data": big}));
        assert_eq!(e, vec!["/attachment/data"]);
        let ok = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_BYTES]);
        assert!(
            check(json!({"filename": "a", "content_type": "text/plain", "data": ok}))
                .1
                .is_empty()
        );
    }

    #[test]
    fn the_ascii_fallback_has_no_quotes_or_non_ascii() {
        assert_eq!(ascii_fallback("a \"b\"\\ü.txt"), "a _b___.txt");
    }

    #[test]
    fn common_text_formats_get_their_type_by_extension() {
        use super::content_type_for;
        assert_eq!(
            content_type_for("fix.diff", "application/octet-stream"),
            "text/x-diff"
        );
        assert_eq!(content_type_for("fix.PATCH", ""), "text/x-diff");
        assert_eq!(
            content_type_for("notes.md", "application/octet-stream"),
            "text/markdown"
        );
        assert_eq!(
            content_type_for("data.csv", "application/octet-stream"),
            "text/csv"
        );
        assert_eq!(
            content_type_for("run.log", "application/octet-stream"),
            "text/plain"
        );
        assert_eq!(
            content_type_for("ci.yml", "application/octet-stream"),
            "application/yaml"
        );
        assert_eq!(
            content_type_for("Cargo.toml", "application/octet-stream"),
            "application/toml"
        );
        assert_eq!(
            content_type_for("a.json", "application/octet-stream"),
            "application/json"
        );
        // A type given is kept; an unknown extension stays as given.
        assert_eq!(content_type_for("fix.diff", "text/plain"), "text/plain");
        assert_eq!(
            content_type_for("blob.bin", "application/octet-stream"),
            "application/octet-stream"
        );
    }
}
