//! §17 customer portal credentials. A portal link's token and the session
//! it is exchanged for carry what they grant (one chatbot, read-only or
//! not, until when) and an HMAC by the server's key; nothing is stored.
//! The two kinds are signed apart (`portal-link`, `portal-session`), so a
//! link is never a session and a session never a link.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::TokenKey;
use crate::domain::ids::ChatbotId;

/// What a portal token grants.
#[derive(Debug, Clone, PartialEq)]
pub struct PortalGrant {
    pub chatbot_id: ChatbotId,
    /// Milliseconds since the epoch after which it is expired.
    pub expires_at: i64,
    pub read_only: bool,
}

/// Which of the two credentials a token is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PortalKind {
    /// In the link's fragment; exchanged once the page loads.
    Link,
    /// The page's bearer on `/api/v1`, held in memory only.
    Session,
}

impl PortalKind {
    fn prefix(self) -> &'static str {
        match self {
            PortalKind::Link => "pl_",
            PortalKind::Session => "ps_",
        }
    }

    fn domain(self) -> &'static [u8] {
        match self {
            PortalKind::Link => b"portal-link",
            PortalKind::Session => b"portal-session",
        }
    }
}

/// Longest token accepted (a chatbot id, a time and a flag, base64 + MAC).
const MAX_LEN: usize = 200;

impl TokenKey {
    /// `pl_…` or `ps_…`: base64url of `chatbot_id|expires_at|0|1`, a dot,
    /// base64url of its MAC.
    pub fn issue_portal(&self, kind: PortalKind, g: &PortalGrant) -> String {
        let body = format!(
            "{}|{}|{}",
            g.chatbot_id,
            g.expires_at,
            if g.read_only { 1 } else { 0 }
        );
        let mac = self
            .mac_parts(&[kind.domain(), body.as_bytes()])
            .unwrap_or_default();
        format!(
            "{}{}.{}",
            kind.prefix(),
            URL_SAFE_NO_PAD.encode(body),
            URL_SAFE_NO_PAD.encode(mac)
        )
    }

    /// The grant of a token of `kind`; `None` for anything altered, of the
    /// other kind or malformed (expiry is the caller's to check).
    pub fn open_portal(&self, kind: PortalKind, token: &str) -> Option<PortalGrant> {
        if token.len() > MAX_LEN {
            return None;
        }
        let rest = token.strip_prefix(kind.prefix())?;
        let (body64, mac64) = rest.split_once('.')?;
        let body = URL_SAFE_NO_PAD.decode(body64).ok()?;
        let mac = URL_SAFE_NO_PAD.decode(mac64).ok()?;
        let expected = self.mac_parts(&[kind.domain(), &body])?;
        if mac.len() != expected.len()
            || !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], &mac[..]))
        {
            return None;
        }
        let text = String::from_utf8(body).ok()?;
        let mut parts = text.split('|');
        let g = PortalGrant {
            chatbot_id: ChatbotId::stored(parts.next()?),
            expires_at: parts.next()?.parse().ok()?,
            read_only: match parts.next()? {
                "1" => true,
                "0" => false,
                _ => return None,
            },
        };
        parts.next().is_none().then_some(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(read_only: bool) -> PortalGrant {
        PortalGrant {
            chatbot_id: ChatbotId::stored("cb_01JZ0000000000000000000000"),
            expires_at: 1_800_000_000_000,
            read_only,
        }
    }

    #[test]
    fn round_trips_each_kind_and_keeps_them_apart() {
        let key = TokenKey::new(b"key");
        for ro in [false, true] {
            let link = key.issue_portal(PortalKind::Link, &grant(ro));
            let session = key.issue_portal(PortalKind::Session, &grant(ro));
            assert!(link.starts_with("pl_") && session.starts_with("ps_"));
            assert_eq!(key.open_portal(PortalKind::Link, &link), Some(grant(ro)));
            assert_eq!(
                key.open_portal(PortalKind::Session, &session),
                Some(grant(ro))
            );
            // A link is not a session, even with its prefix changed.
            assert_eq!(key.open_portal(PortalKind::Session, &link), None);
            let relabelled = format!("ps_{}", &link[3..]);
            assert_eq!(key.open_portal(PortalKind::Session, &relabelled), None);
        }
    }

    #[test]
    fn refuses_altered_foreign_and_malformed_tokens() {
        let key = TokenKey::new(b"key");
        let t = key.issue_portal(PortalKind::Link, &grant(true));
        assert_eq!(
            TokenKey::new(b"other").open_portal(PortalKind::Link, &t),
            None
        );
        // Read-only turned off in the body: the MAC no longer matches.
        let body = URL_SAFE_NO_PAD.encode("cb_01JZ0000000000000000000000|1800000000000|0");
        let mac = t.split_once('.').map(|(_, m)| m).unwrap_or_default();
        assert_eq!(
            key.open_portal(PortalKind::Link, &format!("pl_{body}.{mac}")),
            None
        );
        let mut bytes = t.clone().into_bytes();
        for i in 3..bytes.len() {
            bytes[i] ^= 1;
            if let Ok(s) = std::str::from_utf8(&bytes) {
                assert_eq!(key.open_portal(PortalKind::Link, s), None, "{s}");
            }
            bytes[i] ^= 1;
        }
        for bad in ["", "pl_", "pl_.", "pl_abc.def", &"pl_A".repeat(80)] {
            assert_eq!(key.open_portal(PortalKind::Link, bad), None, "{bad}");
        }
    }
}
