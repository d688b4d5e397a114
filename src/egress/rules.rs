//! Entries of `sandbox.egress.allow` and `deny`: a host glob with an optional port.
//!
//! `pkgs.example.org` is exact; `*.files.example.net` matches any name below it (not the name itself);
//! `*` matches every name. Without a port an entry covers the web ports 80 and 443; `:8080`
//! names one port and `:*` every port (docs/security.md, "Network egress").

use super::host::Host;
use super::EgressError;

/// Ports an entry without a port covers.
const WEB_PORTS: [u16; 2] = [80, 443];

/// One parsed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What the host must be.
    pattern: Pattern,
    /// Which ports the entry covers.
    ports: Ports,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// This host exactly (a name or an IP literal).
    Exact(Host),
    /// Any name ending in `.suffix`.
    Below(String),
    /// Every name (never an IP literal).
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ports {
    Web,
    One(u16),
    All,
}

impl Rule {
    /// Parses one entry as written in the config or by an operator's grant.
    pub fn parse(entry: &str) -> Result<Self, EgressError> {
        let bad = |why: &str| EgressError::BadEntry {
            entry: entry.chars().take(80).collect(),
            why: why.to_string(),
        };
        let entry = entry.trim();
        // `host:port`, but a bare IPv6 literal is all colons: only `[v6]:port` has a port.
        let (host, ports) = match entry.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => {
                let ports = match p {
                    "*" => Ports::All,
                    p => Ports::One(
                        p.parse()
                            .ok()
                            .filter(|&n| n != 0)
                            .ok_or_else(|| bad("the port must be 1-65535 or *"))?,
                    ),
                };
                (h, ports)
            }
            _ => (entry, Ports::Web),
        };
        let pattern = if host == "*" {
            Pattern::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            match Host::parse(suffix) {
                Ok(Host::Name(n)) => Pattern::Below(n),
                _ => return Err(bad("`*.` must be followed by a DNS name")),
            }
        } else if host.contains('*') {
            return Err(bad("`*` may only stand alone or start the entry as `*.`"));
        } else {
            Pattern::Exact(Host::parse(host).map_err(|_| bad("not a host name or address"))?)
        };
        Ok(Rule { pattern, ports })
    }

    /// Whether the entry names this host exactly (no glob).
    pub fn is_exact(&self) -> bool {
        matches!(self.pattern, Pattern::Exact(_))
    }

    pub fn matches(&self, host: &Host, port: u16) -> bool {
        let port_ok = match self.ports {
            Ports::Web => WEB_PORTS.contains(&port),
            Ports::One(p) => p == port,
            Ports::All => true,
        };
        let host_ok = match (&self.pattern, host) {
            (Pattern::Exact(h), _) => h == host,
            (Pattern::Below(suffix), Host::Name(n)) => n
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.ends_with('.')),
            (Pattern::Any, Host::Name(_)) => true,
            (_, Host::Ip(_)) => false,
        };
        port_ok && host_ok
    }
}

/// The exact entry an operator's grant adds for `host:port`.
pub fn grant_entry(host: &Host, port: u16) -> String {
    match host {
        Host::Ip(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        h => format!("{}:{port}", h.text()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    #[test]
    fn matching() {
        // (entry, host, port, matches)
        let rows: &[(&str, &str, u16, bool)] = &[
            ("pkgs.example.org", "pkgs.example.org", 443, true),
            ("pkgs.example.org", "pkgs.example.org", 80, true),
            ("pkgs.example.org", "pkgs.example.org", 22, false),
            ("pkgs.example.org", "www.pkgs.example.org", 443, false),
            ("Pkgs.Example.ORG", "pkgs.example.org", 443, true),
            ("pkgs.example.org:8443", "pkgs.example.org", 8443, true),
            ("pkgs.example.org:8443", "pkgs.example.org", 443, false),
            ("pkgs.example.org:*", "pkgs.example.org", 22, true),
            ("*.files.example.net", "files.files.example.net", 443, true),
            ("*.files.example.net", "a.b.files.example.net", 443, true),
            ("*.files.example.net", "files.example.net", 443, false),
            ("*.files.example.net", "evilfiles.example.net", 443, false),
            ("*", "anything.example", 443, true),
            ("*", "10.0.0.1", 443, false),
            ("*:*", "anything.example", 5432, true),
            ("10.0.0.1", "10.0.0.1", 443, true),
            ("10.0.0.1:8080", "10.0.0.1", 8080, true),
            ("[::1]:8080", "::1", 8080, true),
            ("::1", "::1", 443, true),
        ];
        for (entry, host, port, want) in rows {
            let rule = Rule::parse(entry).unwrap();
            assert_eq!(
                rule.matches(&h(host), *port),
                *want,
                "{entry} {host}:{port}"
            );
        }
    }

    #[test]
    fn bad_entries() {
        for entry in [
            "",
            "py*.org",
            "*.",
            "*.*",
            "pkgs.example.org:0",
            "pkgs.example.org:x",
            "a b",
            "**",
        ] {
            assert!(Rule::parse(entry).is_err(), "{entry}");
        }
    }

    #[test]
    fn exactness_and_grants() {
        assert!(Rule::parse("pkgs.example.org").unwrap().is_exact());
        assert!(!Rule::parse("*.pkgs.example.org").unwrap().is_exact());
        let v6 = h("::1");
        let g = Rule::parse(&grant_entry(&v6, 8080)).unwrap();
        assert!(g.is_exact() && g.matches(&v6, 8080) && !g.matches(&v6, 8081));
        let n = h("up.test");
        let g = Rule::parse(&grant_entry(&n, 9000)).unwrap();
        assert!(g.matches(&n, 9000) && !g.matches(&n, 443));
    }
}
