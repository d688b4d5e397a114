//! This machine's own addresses, as the kernel has them now (docs/security.md, "The operator
//! channel"). A TCP client at one of them is a socket in moat's own network namespace, whatever
//! the interface: loopback, the host's main address, the gateway address of a Docker network.
//! So the check that refuses host commands the operator's rights must cover every one of them,
//! not loopback alone: a host `curl` to `172.17.0.1:7878` is as local as one to `127.0.0.1`.
//!
//! Interfaces come and go (Docker makes a bridge for each network it creates), so the list is
//! read from the kernel (`getifaddrs`, netlink underneath) each time it is asked, never kept:
//! [`tcp_peer`](super::tcp_peer) asks once per connection, at its first request, and only for
//! a client that is not on loopback. One read costs a netlink dump of the address table, far
//! less than the `/proc` scan that follows for a local client.

use std::net::IpAddr;

#[derive(Debug, thiserror::Error)]
pub enum LocalAddrsError {
    #[error("read this machine's network addresses (getifaddrs): {0}")]
    Read(#[from] nix::Error),
}

/// `ip` as its IPv4 address when it is an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a
/// dual-stack listener reports for an IPv4 client), else unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Every address assigned to an interface of this network namespace, IPv4 and IPv6, each in
/// its [`canonical`] form.
pub fn interface_addrs() -> Result<Vec<IpAddr>, LocalAddrsError> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs()? {
        let Some(addr) = ifa.address else { continue };
        let ip = if let Some(v4) = addr.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        let ip = canonical(ip);
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    Ok(out)
}

/// Whether `ip` is this machine's own: a loopback address (all of 127.0.0.0/8 and `::1`, which
/// the kernel answers locally whether or not `lo` lists them) or one of `own`.
pub fn is_own(ip: IpAddr, own: &[IpAddr]) -> bool {
    let ip = canonical(ip);
    ip.is_loopback() || own.contains(&ip)
}

/// [`is_own`] against the addresses the kernel has now. When they cannot be read the answer
/// is yes: the caller then looks for the client among this machine's sockets, and refuses it
/// when it cannot be found, rather than let a local client pass as a remote one.
pub fn is_local(ip: IpAddr) -> bool {
    if is_own(ip, &[]) {
        return true;
    }
    match interface_addrs() {
        Ok(own) => is_own(ip, &own),
        Err(e) => {
            tracing::warn!(error = %e, "treating a TCP client as local");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn mapped_and_loopback_forms() {
        let own = [ip("172.17.0.1"), ip("fd00::2")];
        for (addr, want) in [
            ("127.0.0.1", true),
            ("127.8.9.10", true),
            ("::1", true),
            ("::ffff:127.0.0.1", true),
            ("172.17.0.1", true),
            ("::ffff:172.17.0.1", true),
            ("fd00::2", true),
            ("172.17.0.2", false),
            ("::ffff:172.17.0.2", false),
            ("fd00::3", false),
            ("192.0.2.9", false),
        ] {
            assert_eq!(is_own(ip(addr), &own), want, "{addr}");
        }
        assert_eq!(canonical(ip("::ffff:10.1.2.3")), ip("10.1.2.3"));
        assert_eq!(canonical(ip("fd00::2")), ip("fd00::2"));
    }

    /// The live table: loopback is there, and every address listed is local by `is_local`.
    #[test]
    fn the_kernel_lists_this_machines_addresses() {
        let own = interface_addrs().unwrap();
        assert!(own.contains(&ip("127.0.0.1")), "{own:?}");
        for a in &own {
            assert!(is_local(*a), "{a}");
        }
        // A documentation address no machine here has.
        assert!(!is_local(ip("198.51.100.77")));
    }
}
