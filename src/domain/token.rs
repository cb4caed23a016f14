//! `response_url` tokens: opaque, tamper-proof, scoped to one event's
//! message. The token carries what it grants and an HMAC by the server's key;
//! use counts and idempotency keys live in the store.

use std::fmt::Write;

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

const SIG_LEN: usize = 20;

/// The server's token key, with its HMAC state set up once (the two key
/// blocks are hashed at start, not for every token).
#[derive(Clone)]
pub struct TokenKey(Option<Hmac<Sha256>>);

impl TokenKey {
    /// (HMAC takes keys of any length, so the key is `None` only in theory;
    /// a token without a signature simply never verifies.)
    pub fn new(key: &[u8]) -> Self {
        Self(<Hmac<Sha256> as Mac>::new_from_slice(key).ok())
    }

    /// HMAC-SHA256 of `body`, truncated to 160 bits.
    fn mac(&self, body: &[u8]) -> Option<[u8; SIG_LEN]> {
        let mut m = self.0.clone()?;
        m.update(body);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; SIG_LEN];
        out.copy_from_slice(&full[..SIG_LEN]);
        Some(out)
    }

    /// Appends the token granting `g` to `out`.
    pub fn issue_into(&self, out: &mut String, g: GrantRef<'_>) {
        let mut body = String::with_capacity(
            g.event_id.len() + g.message_id.len() + g.conversation_id.len() + 24,
        );
        for part in [g.event_id, g.message_id, g.conversation_id] {
            body.push_str(part);
            body.push('|');
        }
        let flag = if g.new_message_only { 1 } else { 0 };
        // Writing to a String cannot fail.
        let _ = write!(body, "{}|{flag}", g.expires_at);
        let sig = self.mac(body.as_bytes());
        URL_SAFE_NO_PAD.encode_string(body, out);
        out.push('.');
        if let Some(sig) = sig {
            URL_SAFE_NO_PAD.encode_string(sig, out);
        }
    }

    pub fn issue(&self, g: &Grant) -> String {
        let mut out = String::new();
        self.issue_into(&mut out, g.as_ref());
        out
    }

    /// Checks the signature and decodes the grant; `None` for anything
    /// unknown or altered (expiry is the caller's to check, to answer 410
    /// not 404).
    pub fn verify(&self, token: &str) -> Option<Grant> {
        let (body64, sig64) = token.split_once('.')?;
        let body = URL_SAFE_NO_PAD.decode(body64).ok()?;
        let sig = URL_SAFE_NO_PAD.decode(sig64).ok()?;
        let expected = self.mac(&body)?;
        if sig.len() != SIG_LEN
            || !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], &sig[..]))
        {
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
}

/// A grant by reference, to issue a token without copying its ids.
#[derive(Debug, Clone, Copy)]
pub struct GrantRef<'a> {
    pub event_id: &'a str,
    pub message_id: &'a str,
    pub conversation_id: &'a str,
    pub expires_at: i64,
    pub new_message_only: bool,
}

impl Grant {
    pub fn as_ref(&self) -> GrantRef<'_> {
        GrantRef {
            event_id: &self.event_id,
            message_id: &self.message_id,
            conversation_id: &self.conversation_id,
            expires_at: self.expires_at,
            new_message_only: self.new_message_only,
        }
    }
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
        let key = TokenKey::new(b"key");
        let t = key.issue(&grant());
        assert_eq!(key.verify(&t), Some(grant()));
    }

    /// An independent HMAC (Python's `hmac`) of the same grant: the format
    /// stays readable by tokens issued before.
    #[test]
    fn issues_the_documented_format() {
        assert_eq!(
            TokenKey::new(b"key").issue(&grant()),
            "ZXZ0XzF8bV8xfGNvbnZfMXw0Mnww.-k7usgZZQe6hWH1qILbrdbGgQ10"
        );
    }

    #[test]
    fn rejects_altered_or_foreign_tokens() {
        let key = TokenKey::new(b"key");
        let t = key.issue(&grant());
        assert_eq!(TokenKey::new(b"other").verify(&t), None);
        let mut bytes = t.into_bytes();
        bytes[3] ^= 1;
        assert_eq!(key.verify(&String::from_utf8(bytes).unwrap()), None);
        assert_eq!(key.verify("garbage"), None);
    }
}
