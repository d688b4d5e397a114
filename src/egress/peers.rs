//! Who may use a session's proxy: only addresses on the session's internal network.
//!
//! The proxy also sits on the outbound network, where other containers live (on the
//! engine's default `bridge`, any container the host runs). Without this check they could
//! use the session's allowlist and file approvals in its name (docs/security.md, "Network
//! egress").

use std::net::IpAddr;

use super::EgressError;

/// One subnet in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The network address.
    base: IpAddr,
    /// Prefix length in bits.
    bits: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> Result<Self, EgressError> {
        let bad = || EgressError::BadEntry {
            entry: text.chars().take(60).collect(),
            why: "not a subnet in CIDR notation".into(),
        };
        let (ip, bits) = text.trim().split_once('/').ok_or_else(bad)?;
        let base: IpAddr = ip.parse().map_err(|_| bad())?;
        let bits: u8 = bits.parse().map_err(|_| bad())?;
        let max = if base.is_ipv4() { 32 } else { 128 };
        if bits > max {
            return Err(bad());
        }
        Ok(Self { base, bits })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.base, ip) {
            (IpAddr::V4(b), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - self.bits as u32).unwrap_or(0);
                u32::from(b) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(b), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - self.bits as u32).unwrap_or(0);
                u128::from(b) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// Parses a comma-separated list (the proxy's `--peers`).
pub fn parse_list(text: &str) -> Result<Vec<Cidr>, EgressError> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Cidr::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership() {
        // (cidr, ip, inside)
        let rows: &[(&str, &str, bool)] = &[
            ("172.18.0.0/16", "172.18.3.4", true),
            ("172.18.0.0/16", "172.19.0.1", false),
            ("172.18.0.0/16", "::ffff:172.18.0.9", true),
            ("10.0.0.0/8", "10.255.255.255", true),
            ("10.1.2.3/32", "10.1.2.3", true),
            ("10.1.2.3/32", "10.1.2.4", false),
            ("0.0.0.0/0", "8.8.8.8", true),
            ("fd00::/64", "fd00::1", true),
            ("fd00::/64", "fd00:0:0:1::1", false),
            ("fd00::/64", "10.0.0.1", false),
        ];
        for (cidr, ip, want) in rows {
            let c = Cidr::parse(cidr).unwrap();
            assert_eq!(c.contains(ip.parse().unwrap()), *want, "{cidr} {ip}");
        }
        for bad in ["", "10.0.0.0", "10.0.0.0/33", "x/8", "fd00::/129"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_list("10.0.0.0/8,fd00::/64").unwrap().len(), 2);
    }
}
