//! The typed values of §14's field types: radio, multiselect, date, time,
//! url, tel and rating.

use serde_json::Value;

use super::{Fail, required};
use crate::domain::blocks::Field;

pub(super) fn is_option(field: &Field, value: &str) -> bool {
    field
        .options
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|o| o.value == value)
}

fn invalid_option() -> Fail {
    ("invalid_option", "must be one of the options".into())
}

/// A string value, `""` when absent; `code` when it is not a string.
fn text<'a>(raw: Option<&'a Value>, code: &'static str, what: &str) -> Result<&'a str, Fail> {
    match raw {
        None => Ok(""),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err((code, format!("must be {what}"))),
    }
}

pub(super) fn radio(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    let s = match raw {
        None => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(invalid_option()),
    };
    if s.is_empty() {
        return if field.required {
            Err(required())
        } else {
            Ok(Value::String(String::new()))
        };
    }
    if !is_option(field, s) {
        return Err(invalid_option());
    }
    Ok(Value::String(s.to_string()))
}

/// A list of option values (a single string is a list of one), kept in
/// the definition's order, each once.
pub(super) fn multiselect(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    let chosen: Vec<&str> = match raw {
        None => Vec::new(),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().ok_or_else(invalid_option))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid_option()),
    };
    if chosen.iter().any(|c| !is_option(field, c)) {
        return Err(invalid_option());
    }
    let picked: Vec<Value> = field
        .options
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|o| chosen.contains(&o.value.as_str()))
        .map(|o| Value::String(o.value.clone()))
        .collect();
    let n = picked.len() as f64;
    if n == 0.0 {
        return if field.required {
            Err(("required", "choose at least one option".into()))
        } else {
            Ok(Value::Array(picked))
        };
    }
    if let Some(min) = field.min_num()
        && n < min
    {
        return Err(("too_few", format!("choose at least {min}")));
    }
    if let Some(max) = field.max_num()
        && n > max
    {
        return Err(("too_many", format!("choose at most {max}")));
    }
    Ok(Value::Array(picked))
}

fn digits_at(s: &str, positions: &[usize]) -> bool {
    let b = s.as_bytes();
    positions
        .iter()
        .all(|&i| b.get(i).is_some_and(u8::is_ascii_digit))
}

/// A calendar date written `YYYY-MM-DD`.
pub fn parse_date(s: &str) -> Option<chrono::NaiveDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits_at(s, &[0, 1, 2, 3, 5, 6, 8, 9]) {
        return None;
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

/// A time of day written `HH:MM` (00:00–23:59).
pub fn parse_time(s: &str) -> Option<chrono::NaiveTime> {
    let b = s.as_bytes();
    if b.len() != 5 || b[2] != b':' || !digits_at(s, &[0, 1, 3, 4]) {
        return None;
    }
    chrono::NaiveTime::parse_from_str(s, "%H:%M").ok()
}

/// A date or a time: `""` is empty (`null`), bounds compare as text (the
/// fixed-width forms order like the values they write).
fn moment(
    field: &Field,
    raw: Option<&Value>,
    code: &'static str,
    what: &str,
    valid: fn(&str) -> bool,
) -> Result<Value, Fail> {
    let s = text(raw, code, what)?;
    if s.is_empty() {
        return if field.required {
            Err(required())
        } else {
            Ok(Value::Null)
        };
    }
    if !valid(s) {
        return Err((code, format!("must be {what}")));
    }
    if let Some(min) = field.min.as_ref().and_then(|b| b.text())
        && s < min
    {
        return Err(("too_early", format!("must be {min} or later")));
    }
    if let Some(max) = field.max.as_ref().and_then(|b| b.text())
        && s > max
    {
        return Err(("too_late", format!("must be {max} or earlier")));
    }
    Ok(Value::String(s.to_string()))
}

pub(super) fn date(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    moment(field, raw, "invalid_date", "a date YYYY-MM-DD", |s| {
        parse_date(s).is_some()
    })
}

pub(super) fn time(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    moment(field, raw, "invalid_time", "a time HH:MM", |s| {
        parse_time(s).is_some()
    })
}

pub(super) fn url(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    let s = text(raw, "invalid_url", "an http or https URL")?;
    if s.is_empty() {
        return if field.required {
            Err(required())
        } else {
            Ok(Value::String(String::new()))
        };
    }
    if let Some(max) = field.max_num()
        && s.chars().count() as f64 > max
    {
        return Err(("too_long", format!("must be at most {max} characters")));
    }
    let ok = !s.chars().any(char::is_whitespace)
        && url::Url::parse(s).is_ok_and(|u| {
            matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
        });
    if !ok {
        return Err(("invalid_url", "must be an http or https URL".into()));
    }
    Ok(Value::String(s.to_string()))
}

pub(super) fn tel(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    let s = text(raw, "invalid_phone", "a phone number")?;
    if s.is_empty() {
        return if field.required {
            Err(required())
        } else {
            Ok(Value::String(String::new()))
        };
    }
    let allowed = s
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '+' | ' ' | '-' | '(' | ')'));
    let digits = s.chars().filter(char::is_ascii_digit).count();
    if !allowed || !(7..=15).contains(&digits) {
        return Err((
            "invalid_phone",
            "must be a phone number: 7 to 15 digits, with +, spaces, - ( ) at most".into(),
        ));
    }
    Ok(Value::String(s.to_string()))
}

pub(super) fn rating(field: &Field, raw: Option<&Value>) -> Result<Value, Fail> {
    let nan = || ("not_a_number", "must be a whole number".to_string());
    let n: Option<f64> = match raw {
        None => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(s.trim().parse::<f64>().map_err(|_| nan())?),
        Some(Value::Number(n)) => n.as_f64(),
        Some(_) => return Err(nan()),
    };
    let Some(n) = n else {
        return if field.required {
            Err(required())
        } else {
            Ok(Value::Null)
        };
    };
    if !n.is_finite() || n.fract() != 0.0 {
        return Err(nan());
    }
    let top = field.rating_max();
    if n < 1.0 {
        return Err(("too_small", "must be at least 1".into()));
    }
    if n > top as f64 {
        return Err(("too_large", format!("must be at most {top}")));
    }
    Ok(Value::from(n as i64))
}

#[cfg(test)]
mod tests {
    use super::super::check;
    use serde_json::{Value, json};

    fn form() -> Vec<crate::domain::blocks::Field> {
        let opts = json!([{"value": "a", "label": "A"}, {"value": "b", "label": "B"}, {"value": "c", "label": "C"}]);
        serde_json::from_value(json!([
            {"name": "r", "type": "radio", "label": "R", "options": opts},
            {"name": "m", "type": "multiselect", "label": "M", "options": opts, "max": 2},
            {"name": "d", "type": "date", "label": "D", "min": "2026-01-01", "max": "2026-12-31"},
            {"name": "t", "type": "time", "label": "T", "min": "09:00", "max": "17:30"},
            {"name": "u", "type": "url", "label": "U", "max": 40},
            {"name": "p", "type": "tel", "label": "P"},
            {"name": "s", "type": "rating", "label": "S", "max": 10}
        ]))
        .unwrap()
    }

    fn codes(input: Value) -> Vec<(String, &'static str)> {
        match check(&form(), input.as_object().unwrap(), "/values") {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| (e.field, e.code)).collect(),
        }
    }

    #[test]
    fn empty_values_of_every_new_type() {
        let out = check(&form(), &serde_json::Map::new(), "/values").unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"r": "", "m": [], "d": null, "t": null, "u": "", "p": "", "s": null})
        );
        let blank = json!({"r": "", "m": "", "d": "", "t": "", "u": "", "p": "", "s": ""});
        assert_eq!(codes(blank), vec![]);
    }

    #[test]
    fn typed_values_of_every_new_type() {
        let input = json!({"r": "b", "m": ["c", "a", "c"], "d": "2026-07-01", "t": "09:30",
                           "u": "https://example.com/x", "p": "+1 (555) 010-9999", "s": "9"});
        let out = check(&form(), input.as_object().unwrap(), "/values").unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"r": "b", "m": ["a", "c"], "d": "2026-07-01", "t": "09:30",
                   "u": "https://example.com/x", "p": "+1 (555) 010-9999", "s": 9})
        );
    }

    #[test]
    fn codes_of_every_new_type() {
        let got = codes(
            json!({"r": "z", "m": ["a", "b", "c"], "d": "2026-02-30", "t": "08:59",
                               "u": "ftp://example.com", "p": "12345", "s": 11}),
        );
        assert_eq!(
            got,
            vec![
                ("/values/r".into(), "invalid_option"),
                ("/values/m".into(), "too_many"),
                ("/values/d".into(), "invalid_date"),
                ("/values/t".into(), "too_early"),
                ("/values/u".into(), "invalid_url"),
                ("/values/p".into(), "invalid_phone"),
                ("/values/s".into(), "too_large"),
            ]
        );
        let got = codes(
            json!({"m": ["z"], "d": "2027-01-01", "t": "7:00", "u": "https://example.com/a-very-long-path-indeed-yes",
                               "p": "+1 555 CALL NOW", "s": 0}),
        );
        assert_eq!(
            got,
            vec![
                ("/values/m".into(), "invalid_option"),
                ("/values/d".into(), "too_late"),
                ("/values/t".into(), "invalid_time"),
                ("/values/u".into(), "too_long"),
                ("/values/p".into(), "invalid_phone"),
                ("/values/s".into(), "too_small"),
            ]
        );
        assert_eq!(
            codes(json!({"s": 2.5, "d": 20260101})),
            vec![
                ("/values/d".into(), "invalid_date"),
                ("/values/s".into(), "not_a_number")
            ]
        );
    }
}
