//! Values written into the text of a statement, for the few statements
//! sent as a simple query (several statements in one message, and so in one
//! round trip, which the extended protocol's bound parameters cannot be):
//! the click batch's `BEGIN` with its read, and its write with its `COMMIT`
//! (as `EXECUTE`s of statements prepared on its connection).
//!
//! Every text is an escape-string literal (`E'…'`) with its backslashes and
//! quotes doubled, which the server reads back byte for byte whatever
//! `standard_conforming_strings` says (libpq's `PQescapeStringConn` does the
//! same for UTF-8). A NUL byte can neither be sent in a query (it ends the
//! message's string) nor stored in a text column: it is refused, and the
//! caller falls back to bound parameters, which the server refuses in turn.
//! Arrays are `ARRAY[…]` of such literals, cast to their type.

use std::fmt::Write;

use crate::store::{StoreError, StoreResult};

/// Appends `s` as an escape-string literal.
pub fn text(out: &mut String, s: &str) -> StoreResult<()> {
    out.reserve(s.len() + 3);
    out.push_str("E'");
    let mut rest = s;
    while let Some(k) = rest.find(['\'', '\\', '\0']) {
        out.push_str(&rest[..k]);
        match rest.as_bytes()[k] {
            b'\'' => out.push_str("''"),
            b'\\' => out.push_str("\\\\"),
            _ => {
                return Err(StoreError::Backend(
                    "a NUL byte cannot be written into a statement".into(),
                ));
            }
        }
        rest = &rest[k + 1..];
    }
    out.push_str(rest);
    out.push('\'');
    Ok(())
}

/// `ARRAY[…]::text[]`.
pub fn texts<'a>(items: impl IntoIterator<Item = &'a str>) -> StoreResult<String> {
    array(items, "text", text)
}

/// `ARRAY[…]::text[]` of texts and NULLs.
pub fn opt_texts<'a>(items: impl IntoIterator<Item = Option<&'a str>>) -> StoreResult<String> {
    array(items, "text", |out, s| match s {
        Some(s) => text(out, s),
        None => {
            out.push_str("NULL");
            Ok(())
        }
    })
}

/// `ARRAY[…]::bigint[]`.
pub fn bigints(items: &[i64]) -> StoreResult<String> {
    array(items, "bigint", |out, n| {
        let _ = write!(out, "{n}");
        Ok(())
    })
}

/// `ARRAY[…]::bigint[]` of integers and NULLs.
pub fn opt_bigints(items: &[Option<i64>]) -> StoreResult<String> {
    array(items, "bigint", |out, n| {
        match n {
            Some(n) => {
                let _ = write!(out, "{n}");
            }
            None => out.push_str("NULL"),
        }
        Ok(())
    })
}

/// `ARRAY[…]::bytea[]`, each in bytea's hex form (`\x…`).
pub fn byteas<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> StoreResult<String> {
    array(items, "bytea", |out, b| {
        out.reserve(2 * b.len() + 6);
        out.push_str("E'\\\\x");
        data_encoding::HEXLOWER.encode_append(b, out);
        out.push('\'');
        Ok(())
    })
}

fn array<T>(
    items: impl IntoIterator<Item = T>,
    of: &str,
    mut one: impl FnMut(&mut String, T) -> StoreResult<()>,
) -> StoreResult<String> {
    let mut out = String::from("ARRAY[");
    for (k, item) in items.into_iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        one(&mut out, item)?;
    }
    out.push_str("]::");
    out.push_str(of);
    out.push_str("[]");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> String {
        let mut out = String::new();
        text(&mut out, s).unwrap();
        out
    }

    #[test]
    fn quotes_and_backslashes_are_doubled_and_nothing_else_changes() {
        assert_eq!(lit("plain"), "E'plain'");
        assert_eq!(lit("it's"), "E'it''s'");
        assert_eq!(lit(r"a\b"), r"E'a\\b'");
        assert_eq!(lit(r"\'; DROP TABLE x; --"), r"E'\\''; DROP TABLE x; --'");
        assert_eq!(lit("$1 $$ é \n"), "E'$1 $$ é \n'");
    }

    #[test]
    fn a_nul_byte_is_refused() {
        assert!(text(&mut String::new(), "a\0b").is_err());
        assert!(texts(["ok", "a\0"]).is_err());
    }

    #[test]
    fn arrays_hold_each_value_in_order_cast_to_their_type() {
        assert_eq!(texts(["a", "b'"]).unwrap(), r"ARRAY[E'a',E'b''']::text[]");
        assert_eq!(texts([]).unwrap(), "ARRAY[]::text[]");
        assert_eq!(
            opt_texts([None, Some("x")]).unwrap(),
            "ARRAY[NULL,E'x']::text[]"
        );
        assert_eq!(bigints(&[-1, 0, 42]).unwrap(), "ARRAY[-1,0,42]::bigint[]");
        assert_eq!(
            opt_bigints(&[Some(7), None]).unwrap(),
            "ARRAY[7,NULL]::bigint[]"
        );
        let b: [&[u8]; 2] = [&[0, 255, 16], &[]];
        assert_eq!(byteas(b).unwrap(), r"ARRAY[E'\\x00ff10',E'\\x']::bytea[]");
    }
}
