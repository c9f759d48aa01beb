//! The address ranges a webhook may not reach: everything that is not the
//! public internet (IANA's special-purpose registries, RFC 6890 and its
//! updates). A shop registers its own URLs, so a URL that points at the
//! service's own network (a database, a cloud metadata endpoint, an admin
//! port on loopback) would let a shop make the relay send requests there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// IPv4 ranges that are not public, with the name an operator's log gives.
const V4: &[(Ipv4Net, &str)] = &[
    (v4(0, 0, 0, 0, 8), "this network"),
    (v4(10, 0, 0, 0, 8), "private (RFC 1918)"),
    (v4(100, 64, 0, 0, 10), "shared address space (CGNAT)"),
    (v4(127, 0, 0, 0, 8), "loopback"),
    // 169.254.169.254 is the metadata service of most clouds.
    (v4(169, 254, 0, 0, 16), "link-local (cloud metadata)"),
    // A public address that Azure's hosts answer themselves (WireServer,
    // the metadata proxy): inside the cloud, an internal endpoint.
    (v4(168, 63, 129, 16, 32), "Azure platform endpoint"),
    (v4(172, 16, 0, 0, 12), "private (RFC 1918)"),
    // 192.0.0.192 is Oracle Cloud's metadata service.
    (v4(192, 0, 0, 0, 24), "IETF protocol assignments"),
    (v4(192, 0, 2, 0, 24), "documentation"),
    (v4(192, 88, 99, 0, 24), "6to4 relay anycast"),
    (v4(192, 168, 0, 0, 16), "private (RFC 1918)"),
    (v4(198, 18, 0, 0, 15), "benchmarking"),
    (v4(198, 51, 100, 0, 24), "documentation"),
    (v4(203, 0, 113, 0, 24), "documentation"),
    (v4(224, 0, 0, 0, 4), "multicast"),
    (v4(240, 0, 0, 0, 4), "reserved"),
];

/// IPv6 ranges that are not public. The forms that embed an IPv4 address
/// (mapped, NAT64, 6to4) are judged by that address instead
/// ([`embedded_v4`]).
const V6: &[(Ipv6Net, &str)] = &[
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "unspecified"),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "loopback"),
    (
        v6([0, 0, 0, 0, 0, 0, 0, 0], 96),
        "IPv4-compatible (deprecated)",
    ),
    (
        v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96),
        "IPv4-translated (SIIT)",
    ),
    (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "local-use NAT64"),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), "discard-only"),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        "IETF protocol assignments",
    ),
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "documentation"),
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), "documentation"),
    (v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16), "segment routing"),
    // fd00:ec2::254 is AWS's metadata service over IPv6.
    (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "unique-local"),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "link-local"),
    (
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        "site-local (deprecated)",
    ),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "multicast"),
];

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), prefix)
}

const fn v6(s: [u16; 8], prefix: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        prefix,
    )
}

/// The name of the special-purpose range `ip` is in, or `None` when it is a
/// public address. An IPv6 address that embeds an IPv4 one (`::ffff:a.b.c.d`,
/// NAT64's `64:ff9b::/96`, 6to4's `2002::/16`) is judged by the IPv4 address
/// it leads to.
pub fn special_purpose(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => v4_range(ip),
        IpAddr::V6(ip) => match embedded_v4(ip) {
            Some(inner) => v4_range(inner),
            None => V6
                .iter()
                .find(|(net, _)| net.contains(&ip))
                .map(|(_, name)| *name),
        },
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    if ip == Ipv4Addr::BROADCAST {
        return Some("broadcast");
    }
    V4.iter()
        .find(|(net, _)| net.contains(&ip))
        .map(|(_, name)| *name)
}

/// The IPv4 address an IPv6 address carries and leads to, if any.
pub(crate) fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(s: &str) -> Option<&'static str> {
        special_purpose(s.parse().unwrap())
    }

    #[test]
    fn the_issue_s_addresses_are_not_public() {
        assert_eq!(judge("127.0.0.1"), Some("loopback"));
        assert_eq!(
            judge("169.254.169.254"),
            Some("link-local (cloud metadata)")
        );
        assert_eq!(judge("10.0.0.1"), Some("private (RFC 1918)"));
        assert_eq!(judge("::1"), Some("loopback"));
    }

    #[test]
    fn every_family_of_internal_address_is_refused() {
        for ip in [
            "0.0.0.0",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.100.100.200",
            "168.63.129.16",
            "192.0.0.192",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "fe80::1",
            "fc00::1",
            "fd00:ec2::254",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "::127.0.0.1",
            "::ffff:0:7f00:1",
        ] {
            assert!(judge(ip).is_some(), "{ip} passed");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            assert_eq!(judge(ip), None, "{ip} refused");
        }
    }
}
