//! Whose silent connections are counted together (docs/nodes.md, "Bounds"): on a listener
//! that other machines reach, one peer must not hold every connection that has not yet shown
//! a credential. A peer is one IPv4 address, or one IPv6 /64 — a single host is commonly
//! handed a whole /64, so counting IPv6 addresses one by one would give it 2^64 shares.

use std::net::IpAddr;

/// One peer's share of the unidentified connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerShare(u128);

impl PeerShare {
    /// The share `ip` belongs to. An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`, as a
    /// dual-stack listener reports IPv4 clients) is the IPv4 address itself.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(u32::from(v4) as u128),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(u32::from(v4) as u128),
                // The top 64 bits, marked so no IPv6 prefix equals an IPv4 address.
                None => Self((u128::from(v6) >> 64) | (1 << 127)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        let s = |t: &str| PeerShare::of(t.parse().unwrap());
        // (a, b, the same share)
        let rows = [
            ("127.0.0.1", "127.0.0.1", true),
            ("127.0.0.1", "127.0.0.2", false),
            ("::ffff:10.0.0.1", "10.0.0.1", true),
            ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true),
            ("2001:db8:1:2::1", "2001:db8:1:3::1", false),
            // An IPv6 prefix whose bits read as an IPv4 address is still another peer.
            ("::a00:1", "10.0.0.1", false),
            ("0:0:0:0:1::", "0.0.0.0", false),
        ];
        for (a, b, same) in rows {
            assert_eq!(s(a) == s(b), same, "{a} {b}");
        }
    }
}
