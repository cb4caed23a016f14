//! The JSON Schemas in `schemas/`, compiled once. Request bodies are checked
//! against them before anything else, and failures become field errors with
//! JSON pointers.

use std::sync::OnceLock;

use jsonschema::{Resource, Validator, error::ValidationErrorKind};
use serde_json::Value;

use crate::domain::error::FieldError;

/// Every schema file, by name, as shipped in `schemas/`.
pub const FILES: &[(&str, &str)] = &[
    (
        "blocks.schema.json",
        include_str!("../schemas/blocks.schema.json"),
    ),
    (
        "message.schema.json",
        include_str!("../schemas/message.schema.json"),
    ),
    (
        "reply.schema.json",
        include_str!("../schemas/reply.schema.json"),
    ),
];

const BASE: &str = "https://blockhook.dev/schemas/";

pub struct Schemas {
    pub message: Validator,
    pub reply: Validator,
}

fn parse(name: &str) -> Result<Value, String> {
    let text = FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| format!("no schema {name}"))?;
    serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))
}

/// Compiles the schema file `name` with every other schema available by its `$id`.
pub fn compile(name: &str) -> Result<Validator, String> {
    let mut opts = jsonschema::options();
    for (n, _) in FILES {
        let v = parse(n)?;
        let r = Resource::from_contents(v).map_err(|e| format!("{n}: {e}"))?;
        opts = opts.with_resource(format!("{BASE}{n}"), r);
    }
    opts.build(&parse(name)?)
        .map_err(|e| format!("{name}: {e}"))
}

impl Schemas {
    pub fn load() -> Result<Self, String> {
        Ok(Self {
            message: compile("message.schema.json")?,
            reply: compile("reply.schema.json")?,
        })
    }

    /// The compiled schemas, built on first use.
    pub fn get() -> &'static Schemas {
        static S: OnceLock<Schemas> = OnceLock::new();
        S.get_or_init(|| match Schemas::load() {
            Ok(s) => s,
            // The schemas are compiled into the binary and tested; a broken
            // one is a build defect, not a runtime condition.
            Err(e) => panic!("invalid bundled schema: {e}"),
        })
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Validates `instance`, returning one field error per failure with a
/// pointer to the offending key.
pub fn check(v: &Validator, instance: &Value) -> Vec<FieldError> {
    let mut out: Vec<FieldError> = Vec::new();
    for e in v.iter_errors(instance) {
        let path = e.instance_path.as_str().to_string();
        let (field, code, message): (String, &'static str, String) = match &e.kind {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for key in unexpected {
                    out.push(FieldError::new(
                        format!("{path}/{}", escape(key)),
                        "unknown_field",
                        "this key is not allowed here",
                    ));
                }
                continue;
            }
            ValidationErrorKind::Required { property } => {
                let p = property.as_str().unwrap_or_default();
                (
                    format!("{path}/{}", escape(p)),
                    "required",
                    "this key is required".into(),
                )
            }
            ValidationErrorKind::MaxLength { limit } => (
                path,
                "too_long",
                format!("must be at most {limit} characters"),
            ),
            ValidationErrorKind::MinLength { limit } => (
                path,
                "too_short",
                format!("must be at least {limit} characters"),
            ),
            ValidationErrorKind::MaxItems { limit } => {
                (path, "too_many", format!("must have at most {limit} items"))
            }
            ValidationErrorKind::MinItems { limit } => {
                (path, "too_few", format!("must have at least {limit} items"))
            }
            ValidationErrorKind::MaxProperties { limit } => {
                (path, "too_many", format!("must have at most {limit} keys"))
            }
            ValidationErrorKind::Type { .. } => (path, "invalid_type", e.to_string()),
            ValidationErrorKind::Enum { .. } | ValidationErrorKind::Constant { .. } => {
                (path, "invalid_value", e.to_string())
            }
            ValidationErrorKind::Pattern { .. } | ValidationErrorKind::Format { .. } => {
                (path, "invalid_format", e.to_string())
            }
            ValidationErrorKind::AnyOf { .. } if path.is_empty() => (
                "".into(),
                "required",
                "a message needs text or blocks".into(),
            ),
            _ => (path, "invalid", e.to_string()),
        };
        if !out.iter().any(|x| x.field == field && x.code == code) {
            out.push(FieldError::new(field, code, message));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bundled_schemas_compile() {
        Schemas::load().unwrap();
    }

    #[test]
    fn pointers_name_the_offending_key() {
        let s = Schemas::load().unwrap();
        let errs = check(
            &s.message,
            &json!({"text": "x", "blocks": [{"type": "actions", "elements": [{"type": "button", "label": "A", "bogus": 1}]}]}),
        );
        let fields: Vec<_> = errs.iter().map(|e| (e.field.as_str(), e.code)).collect();
        assert!(
            fields.contains(&("/blocks/0/elements/0/action_id", "required")),
            "{fields:?}"
        );
        assert!(
            fields.contains(&("/blocks/0/elements/0/bogus", "unknown_field")),
            "{fields:?}"
        );
    }
}
