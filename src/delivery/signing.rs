//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256>` over
//! `"{webhook-id}.{webhook-timestamp}.{body}"`, keyed by the bytes of a
//! `whsec_…` secret.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key bytes of a `whsec_` secret (the base64 after the prefix).
pub fn secret_key(secret: &str) -> Vec<u8> {
    let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    STANDARD
        .decode(b64)
        .unwrap_or_else(|_| b64.as_bytes().to_vec())
}

/// Keys of the secrets a thread signed with lately, their HMAC state set up
/// (the key blocks are hashed once per secret, not once per delivery).
const KEYS_KEPT: std::num::NonZeroUsize = std::num::NonZeroUsize::new(256).unwrap();

/// A secret's HMAC state, from the thread's cache or set up and kept. HMAC
/// takes keys of any length, so this is `None` only in theory; the
/// signature is then left empty (it would never verify anyway).
fn keyed(secret: &str) -> Option<Hmac<Sha256>> {
    thread_local! {
        static KEYS: std::cell::RefCell<lru::LruCache<String, Hmac<Sha256>>> =
            std::cell::RefCell::new(lru::LruCache::new(KEYS_KEPT));
    }
    KEYS.with_borrow_mut(|keys| {
        if let Some(m) = keys.get(secret) {
            return Some(m.clone());
        }
        let m = <Hmac<Sha256> as Mac>::new_from_slice(&secret_key(secret)).ok()?;
        keys.put(secret.to_string(), m.clone());
        Some(m)
    })
}

/// Appends one `v1,…` signature to `out`.
fn sign_into(out: &mut String, secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) {
    let Some(mut mac) = keyed(secret) else {
        return;
    };
    let mut ts = [0u8; 24];
    let n = {
        let mut w = &mut ts[..];
        // An i64 has at most 20 characters: this cannot fail.
        let _ = std::io::Write::write_fmt(&mut w, format_args!("{timestamp}"));
        24 - w.len()
    };
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(&ts[..n]);
    mac.update(b".");
    mac.update(body);
    out.push_str("v1,");
    STANDARD.encode_string(mac.finalize().into_bytes(), out);
}

/// One `v1,…` signature.
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut out = String::with_capacity(48);
    sign_into(&mut out, secret, msg_id, timestamp, body);
    out
}

/// The `webhook-signature` header: one signature per live secret,
/// space-separated.
pub fn header(secrets: &[&str], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut out = String::with_capacity(48 * secrets.len());
    for (i, s) in secrets.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        sign_into(&mut out, s, msg_id, timestamp, body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector published with the Standard Webhooks specification
    /// (and used by its reference libraries).
    #[test]
    fn standard_webhooks_vector() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let ts = 1614265330;
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(secret, id, ts, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn two_secrets_give_two_signatures() {
        let h = header(
            &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_AAAA"],
            "id",
            1,
            b"{}",
        );
        assert_eq!(h.split(' ').count(), 2);
        // Each secret keeps its own key (the second is not the first again).
        assert_ne!(h.split(' ').next(), h.split(' ').nth(1));
        assert_eq!(
            h.split(' ').next(),
            Some(sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "id", 1, b"{}").as_str())
        );
        assert!(h.split(' ').all(|s| s.starts_with("v1,")));
    }
}
