//! Identifiers: a prefix and the 26 Crockford base32 characters of a UUIDv7.

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Encodes 128 bits as 26 Crockford base32 characters (ULID layout: the
/// first character carries the top 3 bits).
pub fn crockford(value: u128) -> String {
    let mut out = String::with_capacity(26);
    for i in 0..26u32 {
        let shift = 125 - 5 * i as i32;
        let idx = if shift >= 0 {
            (value >> shift) & 31
        } else {
            (value << (-shift)) & 31
        };
        out.push(CROCKFORD[idx as usize] as char);
    }
    out
}

/// A new time-ordered id with the given prefix, e.g. `evt_01JZYA7M3T…`.
pub fn new_id(prefix: &str) -> String {
    let uuid = uuid::Uuid::now_v7();
    let mut s = String::with_capacity(prefix.len() + 27);
    s.push_str(prefix);
    s.push('_');
    s.push_str(&crockford(uuid.as_u128()));
    s
}

/// Random secret bytes (for API keys, visitor tokens and signing secrets).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    use rand::RngCore;
    let mut b = [0u8; N];
    rand::rng().fill_bytes(&mut b);
    b
}

/// A random credential with a prefix: `sk_…`, `vt_…`.
pub fn new_secret(prefix: &str) -> String {
    let bytes = random_bytes::<24>();
    format!("{prefix}_{}", data_encoding::BASE64URL_NOPAD.encode(&bytes))
}

/// Hex SHA-256 of a credential; only this is stored.
pub fn hash_secret(secret: &str) -> String {
    use sha2::{Digest, Sha256};
    data_encoding::HEXLOWER.encode(&Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crockford_known_values() {
        assert_eq!(crockford(0), "00000000000000000000000000");
        assert_eq!(crockford(u128::MAX), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
        assert_eq!(crockford(1), "00000000000000000000000001");
    }

    #[test]
    fn ids_are_prefixed_and_ordered() {
        let a = new_id("evt");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id("evt");
        assert!(a.starts_with("evt_") && a.len() == 30);
        assert!(a < b);
    }
}
