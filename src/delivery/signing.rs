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

/// One `v1,…` signature.
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = secret_key(secret);
    let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(&key) {
        Ok(m) => m,
        Err(_) => return String::new(), // HMAC takes keys of any length
    };
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per live secret,
/// space-separated.
pub fn header(secrets: &[&str], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| sign(s, msg_id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
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
        assert!(h.split(' ').all(|s| s.starts_with("v1,")));
    }
}
