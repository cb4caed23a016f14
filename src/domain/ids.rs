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

/// Whether `s` is `{prefix}_` and 26 Crockford base32 characters (upper
/// case, as they are made).
pub fn well_formed(prefix: &str, s: &str) -> bool {
    let Some(tail) = s.strip_prefix(prefix).and_then(|t| t.strip_prefix('_')) else {
        return false;
    };
    tail.len() == 26 && tail.bytes().all(|c| CROCKFORD.contains(&c))
}

/// What every kind of id can do: be checked when it comes from outside.
pub trait TypedId: Sized {
    /// The id, when `s` is a well-formed id of this kind.
    fn parse(s: &str) -> Option<Self>;
}

/// A kind of id: a `String` underneath, its prefix in the type. A new one
/// is made by [`generate`](ChatbotId::generate); one from outside (a path,
/// a body) is checked by [`parse`](ChatbotId::parse) at the boundary; one
/// read back from the store is taken as it was written
/// ([`stored`](ChatbotId::stored)). It reads as a `&str` where one is
/// wanted, and serializes as the bare string.
macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A new, time-ordered id.
            pub fn generate() -> Self {
                Self(new_id($prefix))
            }

            /// An id from outside, when it is well formed.
            pub fn parse(s: &str) -> Option<Self> {
                well_formed($prefix, s).then(|| Self(s.to_owned()))
            }

            /// An id as the store (or a test) has it: not checked again.
            pub fn stored(s: impl Into<String>) -> Self {
                Self(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl TypedId for $name {
            fn parse(s: &str) -> Option<Self> {
                $name::parse(s)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        /// Stored documents are read back as written; what comes from
        /// outside is checked with `parse`.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map(Self)
            }
        }
    };
}

typed_id!(
    /// `cb_…`
    ChatbotId,
    "cb"
);
typed_id!(
    /// `conv_…`
    ConversationId,
    "conv"
);
typed_id!(
    /// `m_…`
    MessageId,
    "m"
);
typed_id!(
    /// `evt_…`
    EventId,
    "evt"
);
typed_id!(
    /// `int_…`
    InteractionId,
    "int"
);
typed_id!(
    /// `ep_…`
    EndpointId,
    "ep"
);

/// Every kind of id, for the stores' column conversions.
#[macro_export]
macro_rules! for_each_id {
    ($m:ident) => {
        $m!($crate::domain::ids::ChatbotId);
        $m!($crate::domain::ids::ConversationId);
        $m!($crate::domain::ids::MessageId);
        $m!($crate::domain::ids::EventId);
        $m!($crate::domain::ids::InteractionId);
        $m!($crate::domain::ids::EndpointId);
    };
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
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// Any 128 bits make an id that parses back, as its own kind only;
        /// one character changed parses exactly when it is still Crockford
        /// base32 (upper case).
        #[test]
        fn ids_parse_back_and_a_changed_one_only_when_still_crockford(
            value: u128,
            at in 0usize..26,
            c in proptest::char::any(),
        ) {
            let id = format!("evt_{}", crockford(value));
            prop_assert_eq!(EventId::parse(&id).map(String::from), Some(id.clone()));
            prop_assert!(ConversationId::parse(&id).is_none());
            let mut tail: Vec<char> = id["evt_".len()..].chars().collect();
            tail[at] = c;
            let changed = format!("evt_{}", tail.into_iter().collect::<String>());
            let still = c.is_ascii() && CROCKFORD.contains(&(c as u8));
            prop_assert_eq!(EventId::parse(&changed).is_some(), still);
        }
    }

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

    #[test]
    fn typed_ids_are_checked_at_the_boundary() {
        let id = ConversationId::generate();
        assert!(id.starts_with("conv_"));
        assert_eq!(ConversationId::parse(&id), Some(id.clone()));
        // Another kind's id, a short one, a lower-case one, one with a
        // letter Crockford base32 leaves out.
        assert_eq!(ConversationId::parse(&MessageId::generate()), None);
        assert_eq!(ConversationId::parse("conv_01JZYA"), None);
        assert_eq!(ConversationId::parse(&id.to_lowercase()), None);
        assert_eq!(
            ConversationId::parse("conv_01JZYA7M3TQX5V00000000000I"),
            None
        );
        assert_eq!(ChatbotId::parse("conv_01JZYA7M3TQX5V000000000000"), None);
        assert!(ChatbotId::parse("cb_01JZYA7M3TQX5V000000000000").is_some());
        assert_eq!(serde_json::to_string(&id).ok(), Some(format!("\"{id}\"")));
    }
}
