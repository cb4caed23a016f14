//! Text every store can keep: no NUL character anywhere in a request
//! (PostgreSQL's `text` and `jsonb` cannot hold U+0000; SQLite could, but
//! both stores must answer the same).

use serde_json::Value;

/// Appends one JSON pointer reference token (RFC 6901: `~` → `~0`, `/` → `~1`).
fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            '\0' => pointer.push_str("\\u0000"),
            c => pointer.push(c),
        }
    }
}

/// The JSON pointer of the first string or key holding a NUL character.
pub fn first_nul(v: &Value) -> Option<String> {
    let mut pointer = String::new();
    walk(v, &mut pointer).then_some(pointer)
}

fn walk(v: &Value, pointer: &mut String) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
            let len = pointer.len();
            push_token(pointer, &i.to_string());
            let found = walk(item, pointer);
            if !found {
                pointer.truncate(len);
            }
            found
        }),
        Value::Object(map) => map.iter().any(|(k, item)| {
            let len = pointer.len();
            push_token(pointer, k);
            let found = k.contains('\0') || walk(item, pointer);
            if !found {
                pointer.truncate(len);
            }
            found
        }),
        _ => false,
    }
}

/// A stable text of a JSON value (object keys sorted), for comparing bodies.
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn points_at_the_first_nul() {
        assert_eq!(first_nul(&json!({"a": "ok", "b": [1, "x"]})), None);
        assert_eq!(
            first_nul(&json!({"display_name": "a\u{0}b"})).as_deref(),
            Some("/display_name")
        );
        assert_eq!(
            first_nul(&json!({"blocks": [{"x": 1}, {"t/~": ["", "\u{0}"]}]})).as_deref(),
            Some("/blocks/1/t~1~0/1")
        );
        assert_eq!(
            first_nul(&json!({"values": {"k\u{0}": 1}})).as_deref(),
            Some("/values/k\\u0000")
        );
    }
}
