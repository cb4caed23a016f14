//! Where the §10 limits are applied: the client address behind trusted
//! proxies, and the checks each endpoint makes before it stores anything.

use std::net::IpAddr;

use actix_web::HttpRequest;

use super::AppState;
use crate::http::error::ApiError;
use crate::limits::StreamSlot;

/// How long a refused stream is told to wait (a place frees when another
/// stream of the token closes).
const STREAM_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// The client's address: the peer, or — when the peer is a trusted proxy —
/// the rightmost `X-Forwarded-For` address that is not a trusted proxy.
pub fn client_ip(req: &HttpRequest, trusted: &[ipnet::IpNet]) -> Option<IpAddr> {
    let peer = req.peer_addr()?.ip();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(&peer) {
        return Some(peer);
    }
    // Every X-Forwarded-For header, in order, as one list.
    let hops: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        match parse_hop(hop) {
            Some(ip) => {
                client = ip;
                if !is_trusted(&ip) {
                    break;
                }
            }
            // A hop that is no address: the last trusted one is the client.
            None => break,
        }
    }
    Some(client)
}

/// One `X-Forwarded-For` entry: an address, `[v6]` or `v4:port`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip);
    }
    hop.parse::<std::net::SocketAddr>().ok().map(|s| s.ip())
}

/// The key of a client address: an IPv4 address, or the /64 of an IPv6
/// one (one subscriber's usual allocation, so rotating through it gains
/// nothing).
fn ip_key(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.octets().to_vec(),
            None => v6.octets()[..8].to_vec(),
        },
    }
}

fn refused(what: &str, wait: std::time::Duration) -> ApiError {
    ApiError::rate_limited(wait, format!("too many {what}; retry later"))
}

/// A new conversation from this request's client (`--limit-conversations`).
pub fn conversation(st: &AppState, req: &HttpRequest) -> Result<(), ApiError> {
    let Some(ip) = client_ip(req, &st.settings.trusted_proxy) else {
        return Ok(());
    };
    st.limits
        .conversations
        .check(&ip_key(ip))
        .map_err(|w| refused("new conversations from this address", w))
}

/// A widget write of the visitor of `conversation_id` (`--limit-visitor`).
pub fn visitor_write(st: &AppState, conversation_id: &str) -> Result<(), ApiError> {
    st.limits
        .visitor
        .check(conversation_id.as_bytes())
        .map_err(|w| refused("widget writes for this visitor", w))
}

/// A request with the API key of `chatbot_id` (`--limit-api-key`).
pub fn api_key(st: &AppState, chatbot_id: &str) -> Result<(), ApiError> {
    st.limits
        .api_key
        .check(chatbot_id.as_bytes())
        .map_err(|w| refused("requests with this API key", w))
}

/// A place for one more live stream of the visitor of `conversation_id`
/// (`--max-streams-per-visitor`).
pub fn stream(st: &AppState, conversation_id: &str) -> Result<StreamSlot, ApiError> {
    st.limits
        .streams
        .acquire(conversation_id)
        .ok_or_else(|| refused("live streams open for this visitor", STREAM_RETRY))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn ip_of(peer: &str, xff: &[&str], trusted: &[&str]) -> IpAddr {
        let mut req = TestRequest::default().peer_addr(peer.parse().unwrap());
        for h in xff {
            req = req.append_header(("X-Forwarded-For", *h));
        }
        let trusted: Vec<ipnet::IpNet> = trusted.iter().map(|t| t.parse().unwrap()).collect();
        client_ip(&req.to_http_request(), &trusted).unwrap()
    }

    #[test]
    fn forwarded_for_counts_only_behind_a_trusted_proxy() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // No trusted proxy: the header is ignored.
        assert_eq!(
            ip_of("203.0.113.9:5000", &["1.2.3.4"], &[]),
            ip("203.0.113.9")
        );
        // Peer trusted: the rightmost untrusted hop.
        assert_eq!(
            ip_of(
                "10.0.0.2:5000",
                &["6.6.6.6, 1.2.3.4, 10.0.0.7"],
                &["10.0.0.0/8"]
            ),
            ip("1.2.3.4")
        );
        // A client cannot pick its address by prepending hops.
        assert_eq!(
            ip_of("10.0.0.2:5000", &["9.9.9.9", "1.2.3.4"], &["10.0.0.0/8"]),
            ip("1.2.3.4")
        );
        // Garbage in the header: the proxy's own view.
        assert_eq!(
            ip_of("10.0.0.2:5000", &["nonsense, 10.0.0.9"], &["10.0.0.0/8"]),
            ip("10.0.0.9")
        );
        // No header from a trusted peer: the peer.
        assert_eq!(ip_of("10.0.0.2:5000", &[], &["10.0.0.0/8"]), ip("10.0.0.2"));
        assert_eq!(
            ip_of("[::1]:5000", &["[2001:db8::1]:443"], &["::1/128"]),
            ip("2001:db8::1")
        );
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_64() {
        let a = ip_key("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = ip_key("2001:db8:1:2:bbbb::2".parse().unwrap());
        let c = ip_key("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
