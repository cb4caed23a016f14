//! The SSRF guard: webhook URLs must not reach loopback, private,
//! link-local or metadata addresses unless `--allow-private-webhooks` is set.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether an address is one a public webhook must never reach.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return is_private_v4(v4);
            }
            is_private_v6(v6)
        }
    }
}

/// The IPv4 address an IPv6 transition form carries, when the packet would
/// reach it: IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`,
/// NAT64 `64:ff9b::a.b.c.d` (RFC 6052) and 6to4 `2002:AABB:CCDD::/48`
/// (RFC 3056).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return Some(low(s[6], s[7]));
    }
    // `::` and `::1` are themselves (unspecified, loopback): private below.
    if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
        return Some(low(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(low(s[1], s[2]));
    }
    None
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.0.0/16, cloud metadata included
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xC0) == 64) // 100.64.0.0/10 shared address space
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24
        || (o[0] == 198 && (o[1] & 0xFE) == 18) // 198.18.0.0/15 benchmarking
        || o[0] >= 240
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xFE00) == 0xFC00 // unique local fc00::/7
        || (s[0] & 0xFFC0) == 0xFE80 // link-local fe80::/10
        || (s[0] == 0xfd00 && s[1] == 0x0ec2) // AWS metadata fd00:ec2::254
        || (s[0] & 0xFFC0) == 0xFEC0 // deprecated site-local fec0::/10
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // local-use NAT64 64:ff9b:1::/48
        || (s[0] == 0x2001 && s[1] == 0) // Teredo 2001::/32: tunnels to any IPv4 address
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation 2001:db8::/32
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard 100::/64
}

/// Why a URL may not be used as a webhook, if it may not.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    Invalid(String),
    Private(IpAddr),
    Unresolvable(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Invalid(m) => write!(f, "invalid url: {m}"),
            Refusal::Private(ip) => write!(f, "private_address: {ip} is not a public address"),
            Refusal::Unresolvable(m) => write!(f, "dns: {m}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// Parses a webhook URL (http or https, with a host).
pub fn parse_url(raw: &str) -> Result<url::Url, Refusal> {
    // The URL parser drops tabs and line breaks and skips extra slashes;
    // the text as given must already be clean.
    if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Refusal::Invalid(
            "the url must not contain control characters or spaces".into(),
        ));
    }
    let u = url::Url::parse(raw).map_err(|e| Refusal::Invalid(e.to_string()))?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(Refusal::Invalid("the scheme must be http or https".into()));
    }
    let after_scheme = raw
        .split_once(':')
        .map_or("", |(_, rest)| rest)
        .trim_start_matches(['/', '\\']);
    let authority_given = raw.len() - after_scheme.len() == u.scheme().len() + 3;
    if !authority_given || u.host_str().is_none_or(str::is_empty) {
        return Err(Refusal::Invalid(
            "the url needs a host: scheme://host[:port]/path".into(),
        ));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(Refusal::Invalid(
            "the url must not carry a user name or password".into(),
        ));
    }
    if u.port() == Some(0) {
        return Err(Refusal::Invalid("port 0 is not a port".into()));
    }
    Ok(u)
}

/// Resolves the URL's host and refuses it if any address is private.
/// Returns the resolved addresses (to pin the connection to them).
pub async fn check(raw: &str, allow_private: bool) -> Result<Vec<SocketAddr>, Refusal> {
    let u = parse_url(raw)?;
    let host = u
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_string();
    let port = u.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = if let Ok(ip) = host.parse::<IpAddr>() {
        vec![SocketAddr::new(ip, port)]
    } else {
        tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| Refusal::Unresolvable(format!("{host}: {e}")))?
            .collect()
    };
    if addrs.is_empty() {
        return Err(Refusal::Unresolvable(format!("{host}: no addresses")));
    }
    if !allow_private && let Some(a) = addrs.iter().find(|a| is_private(a.ip())) {
        return Err(Refusal::Private(a.ip()));
    }
    Ok(addrs)
}

/// The send-time check that needs no lookup: a URL whose host is a private
/// IP literal is refused. Host names are checked by [`GuardedResolver`] as
/// they are resolved for the connection itself. Returns the parsed URL.
pub fn check_literal(raw: &str, allow_private: bool) -> Result<url::Url, Refusal> {
    // Every attempt checks its endpoint's URL: the few endpoints a worker
    // thread sends to are parsed once each.
    thread_local! {
        static CHECKED: std::cell::RefCell<lru::LruCache<String, Checked>> =
            std::cell::RefCell::new(lru::LruCache::new(CHECKED_URLS));
    }
    CHECKED.with_borrow_mut(|cache| {
        if let Some((allowed, r)) = cache.get(raw)
            && *allowed == allow_private
        {
            return r.clone();
        }
        let r = check_uncached(raw, allow_private);
        cache.put(raw.to_string(), (allow_private, r.clone()));
        r
    })
}

/// A URL's check: whether private addresses were allowed, and the outcome.
type Checked = (bool, Result<url::Url, Refusal>);

/// URLs kept checked per thread by [`check_literal`].
const CHECKED_URLS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(256).unwrap();

fn check_uncached(raw: &str, allow_private: bool) -> Result<url::Url, Refusal> {
    let u = parse_url(raw)?;
    let ip = match u.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        _ => return Ok(u),
    };
    if !allow_private && is_private(ip) {
        return Err(Refusal::Private(ip));
    }
    Ok(u)
}

/// The delivery client's DNS resolver when private webhooks are not
/// allowed: it refuses a name that resolves to a private address, so the
/// addresses checked are the ones connected to (no rebinding window).
pub struct GuardedResolver;

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| Refusal::Unresolvable(format!("{host}: {e}")))?
                .collect();
            if let Some(a) = addrs.iter().find(|a| is_private(a.ip())) {
                return Err(Refusal::Private(a.ip()).into());
            }
            if addrs.is_empty() {
                return Err(
                    Box::new(Refusal::Unresolvable(format!("{host}: no addresses"))).into(),
                );
            }
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The refusal somewhere in an error's chain of causes, if any.
pub fn refusal_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return Some(r);
        }
        cur = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:0:7f00:1",
            "::ffff:0:10.0.0.1",
            "::ffff:7f00:1",
            "::7f00:1",
            "64:ff9b:1::7f00:1",
            "2002:7f00:1::1",
            "2002:a00:1::",
            "::ffff:192.168.0.1",
            "::ffff:0:a9fe:a9fe",
            "100.64.0.1",
            // IPv6 transition forms of private IPv4 addresses.
            "::127.0.0.1",
            "::a9fe:a9fe",
            "::10.0.0.1",
            "::ffff:a9fe:a9fe",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "64:ff9b:1::5db8:d822",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::",
            "2002:c0a8:101::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001::1",
            "fec0::1",
            "2001:db8::1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::8.8.8.8",
            "::ffff:8.8.8.8",
            "::ffff:0:808:808",
            "2001:4860:4860::8888",
        ] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn refuses_loopback_unless_allowed() {
        assert!(matches!(
            check("http://127.0.0.1:9/x", false).await,
            Err(Refusal::Private(_))
        ));
        assert!(check("http://127.0.0.1:9/x", true).await.is_ok());
        assert!(matches!(
            check("ftp://example.com", false).await,
            Err(Refusal::Invalid(_))
        ));
    }

    #[test]
    fn literal_check_refuses_private_ips_only() {
        assert!(matches!(
            check_literal("http://[::1]:9/x", false),
            Err(Refusal::Private(_))
        ));
        assert!(matches!(
            check_literal("http://169.254.169.254/latest", false),
            Err(Refusal::Private(_))
        ));
        assert!(check_literal("http://169.254.169.254/latest", true).is_ok());
        assert!(check_literal("https://93.184.216.34/x", false).is_ok());
        assert!(check_literal("https://hooks.example.com/x", false).is_ok());
    }

    #[test]
    fn literal_check_refuses_transition_forms() {
        for u in [
            "http://[::127.0.0.1]/x",
            "http://[::a9fe:a9fe]/x",
            "http://[64:ff9b::a9fe:a9fe]/x",
            "http://[64:ff9b:1::a00:1]/x",
            "http://[2002:7f00:1::]/x",
            "http://[2002:a9fe:a9fe::]/x",
            "http://[2001::1]/x",
            "http://[::ffff:127.0.0.1]/x",
            "http://[::ffff:0:7f00:1]/x",
            "http://[::ffff:7f00:1]:8080/x",
            "http://[0:0:0:0:ffff:0:7f00:1]/x",
            "http://[64:ff9b::7f00:1]/x",
            "http://[64:ff9b::127.0.0.1]/x",
            "http://[64:ff9b:1::7f00:1]/x",
            "http://[::127.0.0.1]/x",
            "http://[::7f00:1]/x",
            "http://[2002:7f00:1::1]/x",
            "http://[::ffff:0:c0a8:101]/x",
        ] {
            assert!(
                matches!(check_literal(u, false), Err(Refusal::Private(_))),
                "{u}"
            );
        }
    }

    #[test]
    fn refuses_malformed_urls() {
        for u in [
            "http://example.com/a\r\nX-Injected: 1",
            "http://example.com/a\nb",
            "http://exa\tmple.com/",
            "http://example.com:0/x",
            "http:///x",
            "http:/x.example.com/",
            "https:example.com/",
            "http://user:pass@example.com/x",
            "http://user@example.com/x",
            "http://:pass@example.com/x",
            "http:// example.com/",
        ] {
            assert!(matches!(parse_url(u), Err(Refusal::Invalid(_))), "{u}");
        }
        assert!(parse_url("https://hooks.example.com:8443/a?b=c").is_ok());
        assert!(parse_url("http://[2606:4700::1111]/x").is_ok());
    }

    #[tokio::test]
    async fn resolver_refuses_names_of_private_addresses() {
        use reqwest::dns::Resolve;
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let err = match GuardedResolver.resolve(name).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(e) => e,
        };
        assert!(matches!(
            refusal_in(err.as_ref()),
            Some(Refusal::Private(_))
        ));
    }
}
