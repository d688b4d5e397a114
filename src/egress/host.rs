//! The host a sandbox asks the proxy to reach, checked before anything else looks at it.
//!
//! The name comes from the sandbox (a `CONNECT` target or an absolute URI), so it is hostile
//! input: it is bounded, lower-cased and held to the characters a DNS name or an IP literal
//! can have (docs/security.md, "Network egress"). Anything else is refused before any
//! resolution happens.

use std::net::IpAddr;

use super::EgressError;

/// The longest DNS name (RFC 1035).
const MAX_HOST: usize = 253;

/// A checked, normalised host: a DNS name or an IP literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// Lower-case, without a trailing dot.
    Name(String),
    /// A literal address: never resolved, allowed only by an exact entry.
    Ip(IpAddr),
}

impl Host {
    /// Parses a host as it appears in an authority (`[v6]` brackets allowed).
    pub fn parse(raw: &str) -> Result<Self, EgressError> {
        let bad = || EgressError::BadHost(raw.chars().take(80).collect());
        if raw.is_empty() || raw.len() > MAX_HOST + 2 {
            return Err(bad());
        }
        if let Some(inner) = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            return inner
                .parse::<std::net::Ipv6Addr>()
                .map(|ip| Host::Ip(IpAddr::V6(ip)))
                .map_err(|_| bad());
        }
        if let Ok(ip) = raw.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
        if name.is_empty() || name.len() > MAX_HOST {
            return Err(bad());
        }
        for label in name.split('.') {
            let ok = !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-');
            if !ok {
                return Err(bad());
            }
        }
        // A last label of digits (or hex) that is not a dotted quad is an address in disguise
        // (`2130706433`, `0x7f.1`): the resolver would turn it into one, so it is refused.
        let last = name.rsplit('.').next().unwrap_or_default();
        if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
            return Err(bad());
        }
        Ok(Host::Name(name))
    }

    /// The host as written in an entry or a log line (IPv6 without brackets).
    pub fn text(&self) -> String {
        match self {
            Host::Name(n) => n.clone(),
            Host::Ip(ip) => ip.to_string(),
        }
    }
}

/// Splits `host:port` (a `CONNECT` target, `[v6]:port` for IPv6). The port is required.
pub fn split_authority(authority: &str) -> Result<(Host, u16), EgressError> {
    let bad = || EgressError::BadHost(authority.chars().take(80).collect());
    let (host, port) = authority.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if port == 0 {
        return Err(bad());
    }
    Ok((Host::parse(host)?, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        // (input, Some(normalised text) or None for refused)
        let rows: &[(&str, Option<&str>)] = &[
            ("Pkgs.Example.ORG", Some("pkgs.example.org")),
            ("pkgs.example.org.", Some("pkgs.example.org")),
            ("files.files.example.net", Some("files.files.example.net")),
            ("up_allowed", Some("up_allowed")),
            ("10.0.0.1", Some("10.0.0.1")),
            ("[::1]", Some("::1")),
            ("::1", Some("::1")),
            ("", None),
            (".", None),
            ("a..b", None),
            ("-a.org", None),
            ("a b", None),
            ("a%00.org", None),
            ("evil.org/x", None),
            ("2130706433", None),
            ("0x7f.1", None),
            ("127.1", None),
            ("[nonsense]", None),
        ];
        for (raw, want) in rows {
            let got = Host::parse(raw).ok().map(|h| h.text());
            assert_eq!(got.as_deref(), *want, "{raw}");
        }
        assert!(Host::parse(&"a.".repeat(200)).is_err());
    }

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("pkgs.example.org:443").unwrap(),
            (Host::Name("pkgs.example.org".into()), 443)
        );
        assert_eq!(
            split_authority("[::1]:8080").unwrap(),
            (Host::Ip("::1".parse().unwrap()), 8080)
        );
        for bad in [
            "pkgs.example.org",
            "pkgs.example.org:0",
            "pkgs.example.org:99999",
            ":443",
            "a:b",
        ] {
            assert!(split_authority(bad).is_err(), "{bad}");
        }
    }
}
