//! The host's side of the egress wall (docs/security.md, "Network egress").
//!
//! The session network leaves the host without an address on the bridge, so no unicast packet
//! from the sandbox reaches the host. A limited broadcast (`255.255.255.255`) needs no address
//! and no route: the bridge floods it up to the host, whose stack delivers it to every UDP
//! socket bound to `0.0.0.0` (seen on engine 20.10 with `rp_filter = 0`, and loose mode passes
//! it too). So the host also drops everything that arrives from the session's bridge, IPv4 and
//! IPv6, with one rule each in `INPUT`. Traffic between the sandbox and its proxy is bridged,
//! never host input, so it is not touched.

use std::process::Command;

/// Marks moat's rules, so an operator reading `iptables -S` knows whose they are.
const COMMENT: &str = "moat egress wall";

/// Why the host's side of the wall could not be raised. Messages complete "failed to …".
#[derive(Debug, thiserror::Error)]
pub(super) enum FirewallError {
    #[error("drop host input from bridge {0}: moat is not root, and only root changes the host's firewall (run the daemon as root, or set sandbox.egress.host_firewall = false to accept that the sandbox can send broadcast UDP to host services listening on all addresses)")]
    NotRoot(String),
    #[error("drop host input from bridge {bridge} with {tool}: {why}")]
    Tool {
        bridge: String,
        tool: &'static str,
        why: String,
    },
    #[error("drop host input from bridge {0}: this moat does not see the bridge, so it does not run in the host's network namespace (run it there, e.g. `network_mode: host` in compose, or set sandbox.egress.host_firewall = false to accept that the sandbox can send broadcast UDP to host services listening on all addresses)")]
    NotHostNamespace(String),
    #[error("read bridge name `{0}`: not a network interface name")]
    BadBridge(String),
}

/// The rule, without its verb, for `bridge`.
fn rule(bridge: &str) -> [&str; 8] {
    [
        "INPUT",
        "-i",
        bridge,
        "-m",
        "comment",
        "--comment",
        COMMENT,
        "-j",
    ]
}

/// An interface name as the kernel takes one (at most 15 bytes, no separators): the name comes
/// from the engine, but it is an argument of a root command.
fn check_bridge(bridge: &str) -> Result<(), FirewallError> {
    let ok = !bridge.is_empty()
        && bridge.len() <= 15
        && bridge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(FirewallError::BadBridge(bridge.chars().take(40).collect()))
    }
}

/// Makes sure the host drops input from `bridge` (idempotent: an existing rule is kept).
pub(super) fn raise(bridge: &str) -> Result<(), FirewallError> {
    check_bridge(bridge)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(FirewallError::NotRoot(bridge.to_string()));
    }
    // A rule in another namespace's firewall (moat in a container) would hold nothing.
    if !std::path::Path::new("/sys/class/net").join(bridge).exists() {
        return Err(FirewallError::NotHostNamespace(bridge.to_string()));
    }
    for tool in ["iptables", "ip6tables"] {
        sweep(tool);
        if run(tool, "-C", bridge).is_ok() {
            continue;
        }
        run(tool, "-I", bridge).map_err(|why| FirewallError::Tool {
            bridge: bridge.to_string(),
            tool,
            why,
        })?;
    }
    Ok(())
}

/// Removes the rules for `bridge` (missing ones are fine): with the session's network.
pub(super) fn lower(bridge: &str) {
    if check_bridge(bridge).is_err() || !nix::unistd::geteuid().is_root() {
        return;
    }
    for tool in ["iptables", "ip6tables"] {
        while run(tool, "-D", bridge).is_ok() {}
    }
}

/// Removes moat's rules for bridges that no longer exist: a network removed past moat (by
/// hand, or with the engine's prune) leaves its rule behind otherwise.
fn sweep(tool: &str) {
    let Ok(out) = Command::new(tool).args(["-w", "-S", "INPUT"]).output() else {
        return;
    };
    let listing = String::from_utf8_lossy(&out.stdout);
    for bridge in stale(&listing, |b| {
        std::path::Path::new("/sys/class/net").join(b).exists()
    }) {
        while run(tool, "-D", &bridge).is_ok() {}
    }
}

/// The bridges of moat's rules in an `iptables -S INPUT` listing that `exists` says are gone.
fn stale(listing: &str, exists: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for line in listing.lines() {
        if !line.contains(&format!("--comment \"{COMMENT}\"")) {
            continue;
        }
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            if w == "-i" {
                if let Some(b) = words.next() {
                    if check_bridge(b).is_ok() && !exists(b) && !out.iter().any(|o| o == b) {
                        out.push(b.to_string());
                    }
                }
            }
        }
    }
    out
}

/// Runs `tool verb rule DROP`; the error is the tool's own words.
fn run(tool: &str, verb: &str, bridge: &str) -> Result<(), String> {
    let out = Command::new(tool)
        // `-w`: wait for the xtables lock the engine also takes, instead of failing.
        .args(["-w", verb])
        .args(rule(bridge))
        .arg("DROP")
        .output()
        .map_err(|e| format!("run {tool}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr)
            .trim()
            .chars()
            .take(300)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_of_gone_bridges_are_found() {
        let listing = "-P INPUT ACCEPT\n\
            -A INPUT -i br-aaaaaaaaaaaa -m comment --comment \"moat egress wall\" -j DROP\n\
            -A INPUT -i br-bbbbbbbbbbbb -m comment --comment \"moat egress wall\" -j DROP\n\
            -A INPUT -i br-cccccccccccc -j DROP\n";
        let gone = stale(listing, |b| b == "br-aaaaaaaaaaaa");
        assert_eq!(gone, ["br-bbbbbbbbbbbb"]);
    }

    #[test]
    fn bridge_names_are_interface_names() {
        for ok in ["br-0123456789ab", "docker0", "moat_x"] {
            assert!(check_bridge(ok).is_ok(), "{ok}");
        }
        for bad in ["", "br-0123456789abc", "-j ACCEPT", "a b", "x;y", "ä"] {
            assert!(check_bridge(bad).is_err(), "{bad}");
        }
    }
}
