//! A request body checked key by key, then read into its typed request
//! struct (`http::views`). Every problem is one `errors` entry with its
//! pointer and code, all of them in one 422, and the handler only ever sees
//! the typed struct.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::http::error::{ApiError, FieldError};

/// The key checks of one JSON object body.
pub struct Check<'a> {
    /// The object checked, and the same as a value (read without a copy).
    body: &'a Map<String, Value>,
    value: &'a Value,
    /// The pointer of `body` in the request body (`""` at the top).
    at: String,
    errors: Vec<FieldError>,
}

/// Whether a key must be there.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Required,
    Optional,
}

impl<'a> Check<'a> {
    /// The checks of `body`, which allows only `keys` (any other is
    /// `unknown_field`).
    pub fn new(value: &'a Value, keys: &[&str]) -> Result<Self, ApiError> {
        let Some(body) = value.as_object() else {
            return Err(ApiError::field(
                "",
                "invalid_type",
                "the body must be a JSON object",
            ));
        };
        let errors = unknown(body, "", keys);
        Ok(Self {
            body,
            value,
            at: String::new(),
            errors,
        })
    }

    /// Checks the object under `key` (allowing only `keys`) with `f`, if
    /// it is there; anything else there is `invalid_type`.
    pub fn nested(
        &mut self,
        key: &str,
        keys: &[&str],
        f: impl FnOnce(&mut Check<'a>),
    ) -> &mut Self {
        match self.get(key) {
            None => {}
            Some(value @ Value::Object(body)) => {
                let at = self.pointer(key);
                let mut inner = Check {
                    body,
                    value,
                    errors: unknown(body, &at, keys),
                    at,
                };
                f(&mut inner);
                self.errors.append(&mut inner.errors);
            }
            Some(_) => self.errors.push(FieldError::new(
                self.pointer(key),
                "invalid_type",
                "must be an object",
            )),
        }
        self
    }

    fn pointer(&self, key: &str) -> String {
        format!("{}/{}", self.at, escape(key))
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.body.get(key).filter(|v| !v.is_null())
    }

    /// Whether no check so far found a problem with `key`.
    pub fn passed(&self, key: &str) -> bool {
        let at = self.pointer(key);
        !self.errors.iter().any(|e| e.field == at)
    }

    /// Records a problem found by a check of the handler's own.
    pub fn push(&mut self, error: FieldError) {
        self.errors.push(error);
    }

    /// A text of at most `max` characters that is not blank: absent (or
    /// null when optional) is fine unless required; blank is `required`.
    pub fn text(&mut self, key: &str, max: usize, need: Need) -> &mut Self {
        let (code, message) = match self.body.get(key) {
            None | Some(Value::Null) if need == Need::Optional => return self,
            None | Some(Value::Null) => ("required", format!("{key} is required")),
            Some(Value::String(s)) if s.trim().is_empty() => {
                ("required", "must not be empty".to_string())
            }
            Some(Value::String(s)) if s.chars().count() > max => {
                ("too_long", format!("must be at most {max} characters"))
            }
            Some(Value::String(_)) => return self,
            Some(_) => ("invalid_type", "must be a string".to_string()),
        };
        self.errors
            .push(FieldError::new(self.pointer(key), code, message));
        self
    }

    /// An optional string of at most `max` characters, empty allowed.
    pub fn string(&mut self, key: &str, max: usize) -> &mut Self {
        match self.body.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.chars().count() <= max => {}
            Some(Value::String(_)) => self.errors.push(FieldError::new(
                self.pointer(key),
                "too_long",
                format!("must be at most {max} characters"),
            )),
            Some(_) => self.errors.push(FieldError::new(
                self.pointer(key),
                "invalid_type",
                "must be a string",
            )),
        }
        self
    }

    /// An optional boolean.
    pub fn flag(&mut self, key: &str) -> &mut Self {
        self.kind(key, Value::is_boolean, "must be a boolean")
    }

    /// An optional object with any keys.
    pub fn object(&mut self, key: &str) -> &mut Self {
        self.kind(key, Value::is_object, "must be an object")
    }

    fn kind(&mut self, key: &str, ok: fn(&Value) -> bool, message: &str) -> &mut Self {
        if self.get(key).is_some_and(|v| !ok(v)) {
            self.errors
                .push(FieldError::new(self.pointer(key), "invalid_type", message));
        }
        self
    }

    /// Every problem found, or nothing.
    pub fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Validation(self.errors))
        }
    }

    /// The body as its typed struct, if every check passed. A failure here
    /// is a check that missed a case: still a 422, never a 5xx.
    pub fn typed<T: DeserializeOwned>(self) -> Result<T, ApiError> {
        let value = self.value;
        self.finish()?;
        T::deserialize(value).map_err(|e| ApiError::field("", "invalid", e.to_string()))
    }
}

/// `unknown_field` for each key of `o` (at `at`) not in `keys`.
fn unknown(o: &Map<String, Value>, at: &str, keys: &[&str]) -> Vec<FieldError> {
    o.keys()
        .filter(|k| !keys.contains(&k.as_str()))
        .map(|k| {
            FieldError::new(
                format!("{at}/{}", escape(k)),
                "unknown_field",
                "this key is not allowed here",
            )
        })
        .collect()
}

/// `key` as a JSON pointer token (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(e: ApiError) -> Vec<(String, &'static str)> {
        match e {
            ApiError::Validation(v) => v.into_iter().map(|f| (f.field, f.code)).collect(),
            _ => Vec::new(),
        }
    }

    #[derive(serde::Deserialize, Debug)]
    struct Sample {
        text: String,
        note: Option<String>,
        on: Option<bool>,
    }

    #[test]
    fn every_problem_is_reported_with_its_pointer() {
        let body = json!({"text": "  ", "note": 3, "on": "yes", "x~/y": 1});
        let mut c = Check::new(&body, &["text", "note", "on"]).unwrap();
        c.text("text", 10, Need::Required)
            .string("note", 5)
            .flag("on");
        let e = c.typed::<Sample>().unwrap_err();
        assert_eq!(
            fields(e),
            vec![
                ("/x~0~1y".to_string(), "unknown_field"),
                ("/text".to_string(), "required"),
                ("/note".to_string(), "invalid_type"),
                ("/on".to_string(), "invalid_type"),
            ]
        );
    }

    #[test]
    fn a_clean_body_is_read_into_its_struct() {
        let body = json!({"text": "hello", "on": null});
        let mut c = Check::new(&body, &["text", "note", "on"]).unwrap();
        c.text("text", 10, Need::Required).flag("on");
        let s: Sample = c.typed().unwrap();
        assert_eq!(s.text, "hello");
        assert!(s.note.is_none() && s.on.is_none());
    }

    #[test]
    fn missing_long_and_non_object_bodies_are_refused() {
        let body = json!({"text": "far too long"});
        let mut c = Check::new(&body, &["text"]).unwrap();
        c.text("text", 4, Need::Required)
            .text("other", 4, Need::Required);
        assert_eq!(
            fields(c.finish().unwrap_err()),
            vec![
                ("/text".to_string(), "too_long"),
                ("/other".to_string(), "required")
            ]
        );
        assert!(Check::new(&json!([1]), &[]).is_err());
    }

    #[test]
    fn a_nested_object_is_checked_under_its_pointer() {
        let body = json!({"member": {"id": "", "name": "x"}});
        let mut c = Check::new(&body, &["member"]).unwrap();
        c.nested("member", &["id"], |m| {
            m.text("id", 10, Need::Optional);
        });
        assert_eq!(
            fields(c.finish().unwrap_err()),
            vec![
                ("/member/name".to_string(), "unknown_field"),
                ("/member/id".to_string(), "required")
            ]
        );
        let body = json!({"member": 5});
        let mut c = Check::new(&body, &["member"]).unwrap();
        c.nested("member", &[], |_| {});
        assert_eq!(
            fields(c.finish().unwrap_err()),
            vec![("/member".to_string(), "invalid_type")]
        );
    }
}
