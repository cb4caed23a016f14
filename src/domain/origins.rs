//! A chatbot's `allowed_origins` (§9): the web origins its widget may be
//! embedded on, or any (`["*"]`, the default).

use std::sync::Arc;

use serde_json::Value;

use crate::domain::error::FieldError;

/// At most this many entries in one list.
pub const MAX_ORIGINS: usize = 100;
/// At most this many characters in one entry.
const MAX_LEN: usize = 300;

/// Parsed and normalised (`scheme://host[:port]`, lower case, no default
/// port); cheap to clone (one reference count).
#[derive(Debug, Clone, PartialEq)]
pub struct AllowedOrigins(Option<Arc<[Box<str>]>>);

impl Default for AllowedOrigins {
    fn default() -> Self {
        Self::any()
    }
}

impl AllowedOrigins {
    /// `["*"]`: every origin.
    pub fn any() -> Self {
        Self(None)
    }

    /// Whether a request with this `Origin` header may use the widget API.
    pub fn allows(&self, origin: &str) -> bool {
        match &self.0 {
            None => true,
            Some(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        }
    }

    /// The list as the API shows it (`["*"]` or the origins).
    pub fn to_json(&self) -> Value {
        match &self.0 {
            None => Value::from(vec!["*"]),
            Some(list) => Value::from(list.iter().map(|o| o.as_ref()).collect::<Vec<&str>>()),
        }
    }

    /// As stored: the JSON text of [`Self::to_json`].
    pub fn to_stored(&self) -> String {
        self.to_json().to_string()
    }

    /// From the stored JSON text (written by [`Self::to_stored`]); anything
    /// unreadable counts as no origin at all rather than any.
    pub fn from_stored(text: &str) -> Self {
        match serde_json::from_str::<Vec<String>>(text) {
            Ok(v) if v.len() == 1 && v[0] == "*" => Self::any(),
            Ok(v) => Self(Some(v.into_iter().map(String::into_boxed_str).collect())),
            Err(_) => Self(Some(Arc::from(Vec::new()))),
        }
    }

    /// The `allowed_origins` of a request body, with one error per bad
    /// entry (`/allowed_origins/<i>`, `invalid_origin`).
    pub fn parse(v: &Value) -> Result<Self, Vec<FieldError>> {
        let Value::Array(items) = v else {
            return Err(vec![FieldError::new(
                "/allowed_origins",
                "invalid_type",
                "must be an array of origins, or [\"*\"]",
            )]);
        };
        if items.len() > MAX_ORIGINS {
            return Err(vec![FieldError::new(
                "/allowed_origins",
                "too_long",
                format!("at most {MAX_ORIGINS} origins"),
            )]);
        }
        let mut errors = Vec::new();
        let mut out: Vec<Box<str>> = Vec::new();
        let mut any = false;
        for (i, item) in items.iter().enumerate() {
            let field = format!("/allowed_origins/{i}");
            match item {
                Value::String(s) if s == "*" && items.len() == 1 => any = true,
                Value::String(s) if s == "*" => errors.push(FieldError::new(
                    field,
                    "invalid_origin",
                    "\"*\" stands alone: [\"*\"] allows every origin",
                )),
                Value::String(s) => match normalise(s) {
                    Ok(o) => {
                        if !out.iter().any(|x| **x == *o) {
                            out.push(o.into_boxed_str());
                        }
                    }
                    Err(m) => errors.push(FieldError::new(field, "invalid_origin", m)),
                },
                _ => errors.push(FieldError::new(field, "invalid_origin", "must be a string")),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(if any {
            Self::any()
        } else {
            Self(Some(out.into()))
        })
    }
}

/// `scheme://host[:port]` with `http` or `https`, nothing after the host
/// and port; returned as a browser serialises it in `Origin`.
fn normalise(s: &str) -> Result<String, String> {
    const SHAPE: &str = "an origin is scheme://host[:port] (http or https), without a path";
    if s.len() > MAX_LEN {
        return Err(format!("at most {MAX_LEN} characters"));
    }
    let Some((scheme, rest)) = s.split_once("://") else {
        return Err(SHAPE.into());
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(SHAPE.into());
    }
    if rest.is_empty()
        || rest.contains(['/', '?', '#', '@', '\\'])
        || rest.contains(char::is_whitespace)
    {
        return Err(SHAPE.into());
    }
    let url = url::Url::parse(s).map_err(|_| SHAPE.to_string())?;
    if url.host().is_none() {
        return Err(SHAPE.into());
    }
    Ok(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(v: Value) -> AllowedOrigins {
        AllowedOrigins::parse(&v).expect("valid")
    }

    fn fields(v: Value) -> Vec<String> {
        AllowedOrigins::parse(&v)
            .expect_err("invalid")
            .into_iter()
            .map(|e| format!("{} {}", e.field, e.code))
            .collect()
    }

    #[test]
    fn origins_are_normalised_as_browsers_send_them() {
        let o = ok(json!([
            "HTTPS://Shop.Example.com",
            "http://127.0.0.1:8080",
            "https://a.example:443"
        ]));
        assert_eq!(
            o.to_json(),
            json!([
                "https://shop.example.com",
                "http://127.0.0.1:8080",
                "https://a.example"
            ])
        );
        assert!(o.allows("https://shop.example.com"));
        assert!(o.allows("http://127.0.0.1:8080"));
        assert!(!o.allows("http://127.0.0.1:8081"));
        assert!(!o.allows("null"));
        assert_eq!(AllowedOrigins::from_stored(&o.to_stored()), o);
    }

    #[test]
    fn star_alone_allows_every_origin_and_an_empty_list_none() {
        let any = ok(json!(["*"]));
        assert_eq!(any, AllowedOrigins::any());
        assert!(any.allows("https://anything.example"));
        assert_eq!(any.to_json(), json!(["*"]));
        assert_eq!(AllowedOrigins::from_stored(&any.to_stored()), any);
        let none = ok(json!([]));
        assert!(!none.allows("https://anything.example"));
    }

    #[test]
    fn each_bad_entry_is_named_by_its_pointer() {
        assert_eq!(
            fields(json!([
                "https://ok.example",
                "https://a.example/path",
                "ftp://a.example",
                "a.example",
                "*",
                7,
                "https://a.example/",
                "https://user@a.example",
                "https://a.example?q"
            ])),
            [1, 2, 3, 4, 5, 6, 7, 8]
                .map(|i| format!("/allowed_origins/{i} invalid_origin"))
                .to_vec()
        );
        assert_eq!(fields(json!("*")), vec!["/allowed_origins invalid_type"]);
    }
}
