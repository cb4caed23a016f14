//! `response_url` tokens: opaque, tamper-proof, scoped to one event's
//! message. The token carries what it grants and an HMAC by the server's key;
//! use counts and idempotency keys live in the store.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What a token grants.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The event the token was issued with (also the key of its use count).
    pub event_id: String,
    pub message_id: String,
    pub conversation_id: String,
    /// Milliseconds since the epoch after which the token is expired.
    pub expires_at: i64,
    /// `true` when the event is `message.received`: replies post new messages.
    pub new_message_only: bool,
}

/// HMAC-SHA256 of `body`, truncated to 160 bits. (HMAC takes keys of any
/// length, so this is `None` only in theory.)
fn mac(key: &[u8], body: &[u8]) -> Option<Vec<u8>> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).ok()?;
    m.update(body);
    Some(m.finalize().into_bytes()[..SIG_LEN].to_vec())
}

const SIG_LEN: usize = 20;

pub fn issue(key: &[u8], g: &Grant) -> String {
    let body = format!(
        "{}|{}|{}|{}|{}",
        g.event_id,
        g.message_id,
        g.conversation_id,
        g.expires_at,
        if g.new_message_only { 1 } else { 0 }
    );
    // Without a signature the token simply never verifies.
    let sig = mac(key, body.as_bytes()).unwrap_or_default();
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(body),
        URL_SAFE_NO_PAD.encode(sig)
    )
}

/// Checks the signature and decodes the grant; `None` for anything unknown
/// or altered (expiry is the caller's to check, to answer 410 not 404).
pub fn verify(key: &[u8], token: &str) -> Option<Grant> {
    let (body64, sig64) = token.split_once('.')?;
    let body = URL_SAFE_NO_PAD.decode(body64).ok()?;
    let sig = URL_SAFE_NO_PAD.decode(sig64).ok()?;
    let expected = mac(key, &body)?;
    if sig.len() != SIG_LEN || !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], &sig[..])) {
        return None;
    }
    let text = String::from_utf8(body).ok()?;
    let mut parts = text.split('|');
    let g = Grant {
        event_id: parts.next()?.to_string(),
        message_id: parts.next()?.to_string(),
        conversation_id: parts.next()?.to_string(),
        expires_at: parts.next()?.parse().ok()?,
        new_message_only: parts.next()? == "1",
    };
    if parts.next().is_some() {
        return None;
    }
    Some(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant {
        Grant {
            event_id: "evt_1".into(),
            message_id: "m_1".into(),
            conversation_id: "conv_1".into(),
            expires_at: 42,
            new_message_only: false,
        }
    }

    #[test]
    fn round_trips() {
        let t = issue(b"key", &grant());
        assert_eq!(verify(b"key", &t), Some(grant()));
    }

    #[test]
    fn rejects_altered_or_foreign_tokens() {
        let t = issue(b"key", &grant());
        assert_eq!(verify(b"other", &t), None);
        let mut bytes = t.into_bytes();
        bytes[3] ^= 1;
        assert_eq!(verify(b"key", &String::from_utf8(bytes).unwrap()), None);
        assert_eq!(verify(b"key", "garbage"), None);
    }
}
