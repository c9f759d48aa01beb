//! Which client a request comes from, for the limits counted per client
//! address (failed authentications, console logins).
//!
//! It is the connection's peer unless that peer is a proxy the operator
//! trusts (`serve --trusted-proxies`): then `X-Forwarded-For` is read from
//! the right, skipping the trusted hops, and the first address that is not a
//! trusted proxy is the client (nginx's `real_ip_recursive`). A header that
//! does not parse is not trusted at all: the peer counts. Without trusted
//! proxies the header is ignored, so a client cannot choose its own address.
//!
//! The per-client connection share ([`crate::conn`]) cannot look at headers
//! (it decides before any request): behind a proxy it counts the proxy.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::HeaderMap;
use axum::http::request::Parts;

/// The header proxies append the address they received from.
pub const FORWARDED_FOR: &str = "x-forwarded-for";

/// The client's address as `parts` show it, given the trusted proxies; the
/// unspecified address when the request came without a connection (a test
/// calling the router directly).
pub fn client_ip(parts: &Parts, trusted: &[ipnet::IpNet]) -> IpAddr {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |info| info.0.ip());
    resolve(peer, &parts.headers, trusted)
}

/// The client behind `peer`: see the [module docs](self).
pub fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &[ipnet::IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(&canonical(*ip)));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut hops = Vec::new();
    for value in headers.get_all(FORWARDED_FOR) {
        let Ok(text) = value.to_str() else {
            return peer;
        };
        for hop in text.split(',') {
            match parse_hop(hop.trim()) {
                Some(ip) => hops.push(ip),
                None => return peer,
            }
        }
    }
    let mut client = peer;
    for hop in hops.into_iter().rev() {
        client = hop;
        if !is_trusted(&hop) {
            break;
        }
    }
    client
}

/// An IPv4-mapped IPv6 address as its IPv4 (so `10.0.0.0/8` matches it).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// One `X-Forwarded-For` entry: an address, with a port or IPv6 brackets as
/// some proxies write it.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    hop.parse::<SocketAddr>()
        .ok()
        .map(|addr| canonical(addr.ip()))
        .or_else(|| {
            hop.strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .and_then(|h| h.parse().ok())
        })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(FORWARDED_FOR, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_proxy() {
        let proxies: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let spoofed = headers(&["1.2.3.4"]);
        assert_eq!(
            resolve(ip("203.0.113.9"), &spoofed, &proxies),
            ip("203.0.113.9")
        );
        assert_eq!(resolve(ip("203.0.113.9"), &spoofed, &[]), ip("203.0.113.9"));
        assert_eq!(resolve(ip("10.0.0.2"), &spoofed, &proxies), ip("1.2.3.4"));
    }

    #[test]
    fn the_first_untrusted_hop_from_the_right_is_the_client() {
        let proxies: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        // The client claims 6.6.6.6; the first proxy saw 198.51.100.7.
        let chain = headers(&["6.6.6.6, 198.51.100.7", "10.0.0.5"]);
        assert_eq!(
            resolve(ip("10.0.0.2"), &chain, &proxies),
            ip("198.51.100.7")
        );
        // Only trusted hops: the leftmost.
        let inner = headers(&["10.1.1.1, 10.0.0.5"]);
        assert_eq!(resolve(ip("10.0.0.2"), &inner, &proxies), ip("10.1.1.1"));
        // No header: the proxy itself.
        assert_eq!(
            resolve(ip("10.0.0.2"), &HeaderMap::new(), &proxies),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn ports_brackets_and_mapped_addresses_are_read_and_garbage_is_not_trusted() {
        let proxies: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        assert_eq!(
            resolve(ip("10.0.0.2"), &headers(&["198.51.100.7:5555"]), &proxies),
            ip("198.51.100.7")
        );
        assert_eq!(
            resolve(ip("10.0.0.2"), &headers(&["[2001:db8::1]"]), &proxies),
            ip("2001:db8::1")
        );
        assert_eq!(
            resolve(ip("::ffff:10.0.0.2"), &headers(&["198.51.100.7"]), &proxies),
            ip("198.51.100.7")
        );
        assert_eq!(
            resolve(ip("10.0.0.2"), &headers(&["1.2.3.4, not-an-ip"]), &proxies),
            ip("10.0.0.2")
        );
    }
}
