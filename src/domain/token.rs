//! `response_url` tokens: opaque, tamper-proof, scoped to one event's
//! message. The token carries what it grants and an HMAC by the server's key;
//! use counts and idempotency keys live in the store.

use std::fmt::Write;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::domain::ids::{ConversationId, EventId, MessageId};

pub mod portal;

/// What a token grants.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// The event the token was issued with (also the key of its use count).
    pub event_id: EventId,
    pub message_id: MessageId,
    pub conversation_id: ConversationId,
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
            event_id: EventId::stored(parts.next()?),
            message_id: MessageId::stored(parts.next()?),
            conversation_id: ConversationId::stored(parts.next()?),
            expires_at: parts.next()?.parse().ok()?,
            new_message_only: parts.next()? == "1",
        };
        if parts.next().is_some() {
            return None;
        }
        Some(g)
    }
}

/// Bytes of a cursor: a random nonce, the position masked, a MAC.
const CURSOR_NONCE: usize = 8;
const CURSOR_MAC: usize = 12;

impl TokenKey {
    /// HMAC of the parts, each followed by a separator byte.
    fn mac_parts(&self, parts: &[&[u8]]) -> Option<[u8; SIG_LEN]> {
        let mut m = self.0.clone()?;
        for p in parts {
            m.update(p);
            m.update(b"\x1f");
        }
        let full = m.finalize().into_bytes();
        let mut out = [0u8; SIG_LEN];
        out.copy_from_slice(&full[..SIG_LEN]);
        Some(out)
    }

    /// The mask of a cursor's position: a keyed function of its scope and
    /// nonce, so equal positions never look alike.
    fn cursor_pad(&self, scope: &str, nonce: &[u8]) -> Option<[u8; 8]> {
        let m = self.mac_parts(&[b"cursor-pad", scope.as_bytes(), nonce])?;
        let mut pad = [0u8; 8];
        pad.copy_from_slice(&m[..8]);
        Some(pad)
    }

    /// An opaque, tamper-evident cursor for `position` in the collection
    /// `scope` (which names the tenant: a cursor of another collection or
    /// tenant does not open). base64url of nonce, masked position and MAC.
    pub fn seal_cursor(&self, scope: &str, position: i64, nonce: [u8; CURSOR_NONCE]) -> String {
        let pad = self.cursor_pad(scope, &nonce).unwrap_or_default();
        let mut masked = position.to_be_bytes();
        for (b, p) in masked.iter_mut().zip(pad) {
            *b ^= p;
        }
        let mac = self
            .mac_parts(&[b"cursor", scope.as_bytes(), &nonce, &masked])
            .unwrap_or_default();
        let mut raw = Vec::with_capacity(CURSOR_NONCE + 8 + CURSOR_MAC);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&masked);
        raw.extend_from_slice(&mac[..CURSOR_MAC]);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The position of a cursor sealed for `scope`; `None` for anything
    /// altered, foreign or malformed.
    pub fn open_cursor(&self, scope: &str, cursor: &str) -> Option<i64> {
        if cursor.len() > 64 {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        if raw.len() != CURSOR_NONCE + 8 + CURSOR_MAC {
            return None;
        }
        let (nonce, rest) = raw.split_at(CURSOR_NONCE);
        let (masked, mac) = rest.split_at(8);
        let expected = self.mac_parts(&[b"cursor", scope.as_bytes(), nonce, masked])?;
        if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..CURSOR_MAC], mac)) {
            return None;
        }
        let pad = self.cursor_pad(scope, nonce)?;
        let mut pos = [0u8; 8];
        for (i, b) in pos.iter_mut().enumerate() {
            *b = masked[i] ^ pad[i];
        }
        Some(i64::from_be_bytes(pos))
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
            event_id: EventId::stored("evt_1"),
            message_id: MessageId::stored("m_1"),
            conversation_id: ConversationId::stored("conv_1"),
            expires_at: 42,
            new_message_only: false,
        }
    }

    #[test]
    fn cursors_are_opaque_and_tamper_evident() {
        let key = TokenKey::new(b"key");
        let c = key.seal_cursor("events:cb_1", 9, [1; 8]);
        assert_eq!(key.open_cursor("events:cb_1", &c), Some(9));
        assert!(!c.contains('9') || c.len() > 30, "{c}");
        // Same position, another nonce: another text.
        let d = key.seal_cursor("events:cb_1", 9, [2; 8]);
        assert_ne!(c, d);
        assert_eq!(key.open_cursor("events:cb_1", &d), Some(9));
        // Another tenant's or collection's scope, another key, any change.
        assert_eq!(key.open_cursor("events:cb_2", &c), None);
        assert_eq!(TokenKey::new(b"other").open_cursor("events:cb_1", &c), None);
        let mut raw = URL_SAFE_NO_PAD.decode(&c).unwrap();
        for i in 0..raw.len() {
            raw[i] ^= 1;
            assert_eq!(
                key.open_cursor("events:cb_1", &URL_SAFE_NO_PAD.encode(&raw)),
                None
            );
            raw[i] ^= 1;
        }
        for bad in ["", "9", "abc", "!!!!", &"A".repeat(100)] {
            assert_eq!(key.open_cursor("events:cb_1", bad), None, "{bad}");
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
