//! The rules of a form field's definition that a JSON Schema cannot
//! express: which keys a type takes, bounds in the type's own unit,
//! option values, the `pattern` (compiled with a size limit) and the
//! `default` (a valid value of the field).

use regex::{Regex, RegexBuilder};

use crate::domain::blocks::{Bound, Field, FieldKind};
use crate::domain::error::FieldError;
use crate::domain::values;

/// The most a compiled pattern may take (the engine is linear in the input;
/// this bounds the program itself).
const PATTERN_SIZE_LIMIT: usize = 256 * 1024;

/// Compiles `pattern` so that it matches a whole value. The pattern is
/// first compiled alone, so that `a)|(b` cannot escape the anchors.
pub fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    let build = |p: &str| {
        RegexBuilder::new(p)
            .size_limit(PATTERN_SIZE_LIMIT)
            .dfa_size_limit(PATTERN_SIZE_LIMIT)
            .nest_limit(64)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => "the pattern is too large".to_string(),
                other => other.to_string(),
            })
    };
    build(pattern)?;
    build(&format!(r"\A(?:{pattern})\z"))
}

/// Appends to `errors` what is wrong with field `f`, whose pointer is `at`
/// (`/blocks/1/fields/0`).
pub fn check_definition(f: &Field, at: &str, errors: &mut Vec<FieldError>) {
    let before = errors.len();
    options(f, at, errors);
    bounds(f, at, errors);
    if let Some(p) = &f.pattern {
        if !matches!(f.kind, FieldKind::Text | FieldKind::Textarea) {
            errors.push(FieldError::new(
                format!("{at}/pattern"),
                "not_allowed",
                "pattern applies to text and textarea fields",
            ));
        } else if let Err(e) = compile_pattern(p) {
            errors.push(FieldError::new(
                format!("{at}/pattern"),
                "invalid_pattern",
                format!("not a valid regular expression: {e}"),
            ));
        }
    }
    // A default is checked against a definition that is itself right.
    if errors.len() == before
        && let Some(d) = &f.default
    {
        check_default(f, d, at, errors);
    }
}

fn options(f: &Field, at: &str, errors: &mut Vec<FieldError>) {
    match (f.kind.has_options(), &f.options) {
        (true, None) => errors.push(FieldError::new(
            format!("{at}/options"),
            "required",
            "this field type needs options",
        )),
        (true, Some(opts)) => {
            let mut seen: Vec<&str> = Vec::new();
            for (k, o) in opts.iter().enumerate() {
                if seen.contains(&o.value.as_str()) {
                    errors.push(FieldError::new(
                        format!("{at}/options/{k}/value"),
                        "duplicate",
                        "option values must be unique",
                    ));
                }
                seen.push(&o.value);
            }
        }
        (false, Some(_)) => errors.push(FieldError::new(
            format!("{at}/options"),
            "not_allowed",
            "options are only allowed on select, radio and multiselect fields",
        )),
        (false, None) => {}
    }
}

/// Which bounds a type takes: (`min`, `max`).
fn takes_bounds(kind: FieldKind) -> (bool, bool) {
    match kind {
        FieldKind::Text
        | FieldKind::Email
        | FieldKind::Textarea
        | FieldKind::Number
        | FieldKind::Multiselect
        | FieldKind::Date
        | FieldKind::Time => (true, true),
        FieldKind::Url | FieldKind::Rating => (false, true),
        FieldKind::Select | FieldKind::Checkbox | FieldKind::Radio | FieldKind::Tel => {
            (false, false)
        }
    }
}

fn bounds(f: &Field, at: &str, errors: &mut Vec<FieldError>) {
    let (min_ok, max_ok) = takes_bounds(f.kind);
    let mut good = true;
    for (key, bound, ok) in [("min", &f.min, min_ok), ("max", &f.max, max_ok)] {
        let Some(b) = bound else { continue };
        let ptr = format!("{at}/{key}");
        if !ok {
            errors.push(FieldError::new(
                ptr,
                "not_allowed",
                format!("a {:?} field takes no {key}", f.kind).to_lowercase(),
            ));
            good = false;
            continue;
        }
        if let Some(msg) = bad_bound(f.kind, b) {
            errors.push(FieldError::new(ptr, "invalid_bound", msg));
            good = false;
        }
    }
    if !good {
        return;
    }
    let ordered = match (&f.min, &f.max) {
        (Some(Bound::Number(a)), Some(Bound::Number(b))) => a <= b,
        // `YYYY-MM-DD` and `HH:MM` order as text.
        (Some(Bound::Text(a)), Some(Bound::Text(b))) => a <= b,
        _ => true,
    };
    if !ordered {
        errors.push(FieldError::new(
            format!("{at}/max"),
            "min_greater_than_max",
            "max must be greater than or equal to min",
        ));
    }
}

/// What is wrong with bound `b` of a field of type `kind`, if anything.
fn bad_bound(kind: FieldKind, b: &Bound) -> Option<String> {
    match (kind, b) {
        (FieldKind::Date, Bound::Text(t)) => values::parse_date(t)
            .is_none()
            .then(|| "must be a date YYYY-MM-DD".into()),
        (FieldKind::Time, Bound::Text(t)) => values::parse_time(t)
            .is_none()
            .then(|| "must be a time HH:MM".into()),
        (FieldKind::Date, _) => Some("must be a date YYYY-MM-DD".into()),
        (FieldKind::Time, _) => Some("must be a time HH:MM".into()),
        (FieldKind::Rating, Bound::Number(n)) => (n.fract() != 0.0 || !(2.0..=10.0).contains(n))
            .then(|| "a rating's max is a whole number from 2 to 10".into()),
        (FieldKind::Multiselect, Bound::Number(n)) => (n.fract() != 0.0 || *n < 0.0)
            .then(|| "a count of options: a whole number, at least 0".into()),
        (
            FieldKind::Text | FieldKind::Email | FieldKind::Textarea | FieldKind::Url,
            Bound::Number(n),
        ) => (*n < 0.0).then(|| "a length: at least 0".into()),
        (_, Bound::Number(_)) => None,
        (_, Bound::Text(_)) => Some("must be a number".into()),
    }
}

/// A default must be a value the field itself would accept, of the JSON
/// type the event carries (a number for `number`, a list for `multiselect`).
fn check_default(f: &Field, d: &serde_json::Value, at: &str, errors: &mut Vec<FieldError>) {
    let loose = Field {
        required: false,
        ..f.clone()
    };
    let same_type = |typed: &serde_json::Value| {
        std::mem::discriminant(typed) == std::mem::discriminant(d) || d.is_null()
    };
    match values::typed(&loose, Some(d)) {
        Ok(typed) if same_type(&typed) => {}
        Ok(_) => errors.push(FieldError::new(
            format!("{at}/default"),
            "invalid_default",
            "the default must be a value of the field's type",
        )),
        Err((code, message)) => errors.push(FieldError::new(
            format!("{at}/default"),
            "invalid_default",
            format!("the default is not a valid value ({code}: {message})"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errs(field: serde_json::Value) -> Vec<(String, &'static str)> {
        let f: Field = serde_json::from_value(field).unwrap();
        let mut out = Vec::new();
        check_definition(&f, "/f", &mut out);
        out.into_iter().map(|e| (e.field, e.code)).collect()
    }

    #[test]
    fn patterns_compile_anchored_and_refuse_bad_or_huge_ones() {
        let r = compile_pattern("[A-Z]{2}[0-9]+").unwrap();
        assert!(r.is_match("AB12"));
        assert!(!r.is_match("xAB12"));
        assert!(!r.is_match("AB12x"));
        assert!(compile_pattern("a)|(b").is_err());
        assert!(compile_pattern("(").is_err());
        assert!(compile_pattern(r"\w{1000}{1000}").is_err());
        assert_eq!(
            errs(json!({"name": "a", "type": "text", "label": "A", "pattern": "("})),
            vec![("/f/pattern".into(), "invalid_pattern")]
        );
        assert_eq!(
            errs(json!({"name": "a", "type": "email", "label": "A", "pattern": "x"})),
            vec![("/f/pattern".into(), "not_allowed")]
        );
    }

    #[test]
    fn bounds_are_in_the_types_own_unit() {
        assert!(
            errs(json!({"name": "d", "type": "date", "label": "D", "min": "2026-01-01", "max": "2026-12-31"}))
                .is_empty()
        );
        assert_eq!(
            errs(
                json!({"name": "d", "type": "date", "label": "D", "min": "2026-12-31", "max": "2026-01-01"})
            ),
            vec![("/f/max".into(), "min_greater_than_max")]
        );
        assert_eq!(
            errs(json!({"name": "d", "type": "date", "label": "D", "min": "2026-02-30"})),
            vec![("/f/min".into(), "invalid_bound")]
        );
        assert_eq!(
            errs(
                json!({"name": "t", "type": "time", "label": "T", "min": "18:00", "max": "09:00"})
            ),
            vec![("/f/max".into(), "min_greater_than_max")]
        );
        assert_eq!(
            errs(json!({"name": "r", "type": "rating", "label": "R", "max": 11})),
            vec![("/f/max".into(), "invalid_bound")]
        );
        assert_eq!(
            errs(json!({"name": "r", "type": "rating", "label": "R", "min": 1})),
            vec![("/f/min".into(), "not_allowed")]
        );
        assert_eq!(
            errs(
                json!({"name": "m", "type": "multiselect", "label": "M", "min": 3, "max": 2,
                         "options": [{"value": "a", "label": "A"}]})
            ),
            vec![("/f/max".into(), "min_greater_than_max")]
        );
        assert_eq!(
            errs(json!({"name": "r", "type": "radio", "label": "R"})),
            vec![("/f/options".into(), "required")]
        );
        assert_eq!(
            errs(json!({"name": "u", "type": "url", "label": "U",
                         "options": [{"value": "a", "label": "A"}]})),
            vec![("/f/options".into(), "not_allowed")]
        );
    }

    #[test]
    fn defaults_are_valid_values_of_the_type() {
        let opts = json!([{"value": "a", "label": "A"}, {"value": "b", "label": "B"}]);
        for ok in [
            json!({"name": "x", "type": "number", "label": "X", "default": 3, "max": 5}),
            json!({"name": "x", "type": "multiselect", "label": "X", "default": ["b"], "options": opts}),
            json!({"name": "x", "type": "date", "label": "X", "default": "2026-07-01"}),
            json!({"name": "x", "type": "rating", "label": "X", "default": 4}),
            json!({"name": "x", "type": "checkbox", "label": "X", "default": true}),
            json!({"name": "x", "type": "text", "label": "X", "default": "AB1", "pattern": "[A-Z]+[0-9]"}),
        ] {
            assert!(errs(ok.clone()).is_empty(), "{ok}");
        }
        for bad in [
            json!({"name": "x", "type": "number", "label": "X", "default": "3"}),
            json!({"name": "x", "type": "number", "label": "X", "default": 9, "max": 5}),
            json!({"name": "x", "type": "radio", "label": "X", "default": "c", "options": opts}),
            json!({"name": "x", "type": "time", "label": "X", "default": "25:00"}),
            json!({"name": "x", "type": "rating", "label": "X", "default": 6}),
            json!({"name": "x", "type": "checkbox", "label": "X", "default": "on"}),
            json!({"name": "x", "type": "text", "label": "X", "default": "ab", "pattern": "[A-Z]+"}),
        ] {
            assert_eq!(
                errs(bad.clone()),
                vec![("/f/default".into(), "invalid_default")],
                "{bad}"
            );
        }
    }
}
