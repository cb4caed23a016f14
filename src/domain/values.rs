//! Typed form values: what a visitor (or a reviewer) submits, checked
//! against the stored field definitions and turned into the typed `values`
//! every event carries.

use serde_json::{Map, Number, Value};

use crate::domain::blocks::{Field, FieldKind};
use crate::domain::error::FieldError;

mod more;

pub use more::{parse_date, parse_time};

/// Checks `input` against `fields`. On success returns every field's typed
/// value, in definition order; on failure one error per bad field, with
/// pointers `{base}/<name>`.
pub fn check(
    fields: &[Field],
    input: &Map<String, Value>,
    base: &str,
) -> Result<Map<String, Value>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut out = Map::with_capacity(fields.len());
    for key in input.keys() {
        if !fields.iter().any(|f| &f.name == key) {
            errors.push(FieldError::new(
                format!("{base}/{}", escape(key)),
                "unknown_field",
                "this form has no such field",
            ));
        }
    }
    for field in fields {
        let at = format!("{base}/{}", escape(&field.name));
        match typed(field, input.get(&field.name)) {
            Ok(v) => {
                out.insert(field.name.clone(), v);
            }
            Err((code, message)) => errors.push(FieldError::new(at, code, message)),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Why a value was refused: its code and a message.
pub type Fail = (&'static str, String);

fn required() -> Fail {
    ("required", "this field is required".into())
}

/// The typed value of `field` for what was sent (`None` when the key is
/// absent), or why it is refused.
pub fn typed(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    let raw = match raw {
        None | Some(Value::Null) => None,
        Some(v) => Some(v),
    };
    match field.kind {
        FieldKind::Radio => more::radio(field, raw),
        FieldKind::Multiselect => more::multiselect(field, raw),
        FieldKind::Date => more::date(field, raw),
        FieldKind::Time => more::time(field, raw),
        FieldKind::Url => more::url(field, raw),
        FieldKind::Tel => more::tel(field, raw),
        FieldKind::Rating => more::rating(field, raw),
        FieldKind::Text | FieldKind::Email | FieldKind::Textarea => {
            let s = match raw {
                None => "",
                Some(Value::String(s)) => s.as_str(),
                Some(_) => return Err(("invalid_type", "must be a string".into())),
            };
            if s.trim().is_empty() {
                if field.required {
                    return Err(required());
                }
                return Ok(Value::String(String::new()));
            }
            let len = s.chars().count() as f64;
            if let Some(min) = field.min_num()
                && len < min
            {
                return Err(("too_short", format!("must be at least {min} characters")));
            }
            if let Some(max) = field.max_num()
                && len > max
            {
                return Err(("too_long", format!("must be at most {max} characters")));
            }
            if field.kind == FieldKind::Email && !is_email(s) {
                return Err(("invalid_email", "must be an email address".into()));
            }
            if let Some(p) = &field.pattern {
                // A stored pattern compiled when it was defined; one that no
                // longer does (a newer engine) matches nothing.
                let ok = crate::domain::fields::compile_pattern(p).is_ok_and(|r| r.is_match(s));
                if !ok {
                    return Err((
                        "pattern_mismatch",
                        "does not have the expected format".into(),
                    ));
                }
            }
            Ok(Value::String(s.to_string()))
        }
        FieldKind::Number => {
            let n = match raw {
                None => None,
                Some(Value::String(s)) if s.trim().is_empty() => None,
                Some(Value::String(s)) => match s.trim().parse::<f64>() {
                    Ok(f) if f.is_finite() => Some(number(f, s.trim())),
                    _ => return Err(("not_a_number", "must be a number".into())),
                },
                Some(Value::Number(n)) => Some(n.clone()),
                Some(_) => return Err(("not_a_number", "must be a number".into())),
            };
            let Some(n) = n else {
                if field.required {
                    return Err(required());
                }
                return Ok(Value::Null);
            };
            let f = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = field.min_num()
                && f < min
            {
                return Err(("too_small", format!("must be at least {min}")));
            }
            if let Some(max) = field.max_num()
                && f > max
            {
                return Err(("too_large", format!("must be at most {max}")));
            }
            Ok(Value::Number(n))
        }
        FieldKind::Select => {
            let s = match raw {
                None => "",
                Some(Value::String(s)) => s.as_str(),
                Some(_) => return Err(("invalid_option", "must be one of the options".into())),
            };
            if s.is_empty() {
                if field.required {
                    return Err(required());
                }
                return Ok(Value::String(String::new()));
            }
            if !more::is_option(field, s) {
                return Err(("invalid_option", "must be one of the options".into()));
            }
            Ok(Value::String(s.to_string()))
        }
        FieldKind::Checkbox => {
            let b = match raw {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(Value::String(s)) => match s.as_str() {
                    "on" | "true" | "1" | "yes" => true,
                    "" | "off" | "false" | "0" | "no" => false,
                    _ => return Err(("invalid_type", "must be a boolean or \"on\"".into())),
                },
                Some(_) => return Err(("invalid_type", "must be a boolean or \"on\"".into())),
            };
            if field.required && !b {
                return Err(("required", "this box must be ticked".into()));
            }
            Ok(Value::Bool(b))
        }
    }
}

/// A JSON number from a numeric string: integral values stay integers.
pub(crate) fn number(f: f64, text: &str) -> Number {
    if let Ok(i) = text.parse::<i64>() {
        return Number::from(i);
    }
    Number::from_f64(f).unwrap_or_else(|| Number::from(0))
}

/// A pragmatic address check: one `@`, a non-empty local part, a dotted
/// domain, no spaces.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && !s.chars().any(char::is_whitespace)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields() -> Vec<Field> {
        serde_json::from_value(json!([
            {"name": "full_name", "type": "text", "label": "Name", "required": true, "max": 5},
            {"name": "email", "type": "email", "label": "Email"},
            {"name": "n", "type": "number", "label": "N", "min": 1, "max": 10},
            {"name": "topic", "type": "select", "label": "T", "options": [{"value": "a", "label": "A"}]},
            {"name": "ok", "type": "checkbox", "label": "OK", "required": true}
        ]))
        .unwrap()
    }

    #[test]
    fn types_values_with_empty_defaults() {
        let input = json!({"full_name": "Ann", "ok": "on", "n": "7"});
        let out = check(&fields(), input.as_object().unwrap(), "/values").unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"full_name": "Ann", "email": "", "n": 7, "topic": "", "ok": true})
        );
    }

    #[test]
    fn reports_each_bad_field() {
        let input =
            json!({"full_name": "Annabel", "email": "x@", "n": "abc", "topic": "b", "extra": 1});
        let errs = check(&fields(), input.as_object().unwrap(), "/values").unwrap_err();
        let got: Vec<(String, &str)> = errs.iter().map(|e| (e.field.clone(), e.code)).collect();
        assert!(got.contains(&("/values/extra".into(), "unknown_field")));
        assert!(got.contains(&("/values/full_name".into(), "too_long")));
        assert!(got.contains(&("/values/email".into(), "invalid_email")));
        assert!(got.contains(&("/values/n".into(), "not_a_number")));
        assert!(got.contains(&("/values/topic".into(), "invalid_option")));
        assert!(got.contains(&("/values/ok".into(), "required")));
    }

    #[test]
    fn bounds_numbers() {
        let f = fields();
        let small = json!({"full_name": "A", "ok": true, "n": 0});
        let e = check(&f, small.as_object().unwrap(), "/values").unwrap_err();
        assert_eq!(e[0].code, "too_small");
        let large = json!({"full_name": "A", "ok": true, "n": "11"});
        let e = check(&f, large.as_object().unwrap(), "/values").unwrap_err();
        assert_eq!(e[0].code, "too_large");
    }
}
