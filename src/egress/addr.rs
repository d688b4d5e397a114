//! Which resolved addresses a glob may reach: only globally routable ones.
//!
//! An allowlist of address kinds rather than a list of bad ranges: a name the sandbox controls
//! (or a DNS answer an attacker controls) must not lead the proxy into the host's own network,
//! its loopback, the cloud metadata address or another container (docs/security.md, "Network
//! egress"). Only an exact entry reaches a non-public address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is a public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let internal = a == 0 // "this network"
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 169 && b == 254) // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // documentation
        || (a == 203 && b == 0 && c == 113) // documentation
        || a >= 224; // multicast, reserved, broadcast
    !internal
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) embeds an IPv4 address: judge that one.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return is_public_v4(v4);
    }
    // Global unicast is 2000::/3; everything else (loopback, unspecified, unique-local,
    // link-local, multicast, the IPv4-compatible block) is internal. Inside it, the
    // documentation block and 6to4 (which embeds an IPv4 address and is judged by it) are
    // special.
    if s[0] & 0xe000 != 0x2000 {
        return false;
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return false;
    }
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return is_public_v4(v4);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let rows: &[(&str, bool)] = &[
            ("1.1.1.1", true),
            ("151.101.0.223", true),
            ("0.0.0.0", false),
            ("10.1.2.3", false),
            ("127.0.0.1", false),
            ("127.255.0.1", false),
            ("100.64.0.1", false),
            ("100.128.0.1", true),
            ("169.254.169.254", false),
            ("172.16.0.1", false),
            ("172.31.255.255", false),
            ("172.32.0.1", true),
            ("192.168.1.1", false),
            ("192.0.2.1", false),
            ("198.18.0.1", false),
            ("224.0.0.1", false),
            ("255.255.255.255", false),
            ("2606:4700::1111", true),
            ("::1", false),
            ("::", false),
            ("fe80::1", false),
            ("fd00::1", false),
            ("fc00::1", false),
            ("ff02::1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:8.8.8.8", true),
            ("64:ff9b::a00:1", false),
            ("64:ff9b::808:808", true),
            ("2002:a00:1::", false),
            ("2002:808:808::", true),
            ("2001:db8::1", false),
            ("::127.0.0.1", false),
        ];
        for (ip, want) in rows {
            assert_eq!(is_public(ip.parse().unwrap()), *want, "{ip}");
        }
    }
}
