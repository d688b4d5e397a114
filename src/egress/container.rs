//! What an egress session is made of, derived purely from names and config: the internal
//! network, the proxy container's spec and the variables that point the sandbox's tools at
//! the proxy (docs/security.md, "Network egress").
//!
//! One proxy per session rather than one shared proxy: each proxy can only reach its own
//! session's control socket, so "which session is this connection from?" is answered by
//! construction instead of by trusting a source address, and a proxy's crash or load touches
//! one session only.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::runtime::{ContainerSpec, Mount};

/// Label on the proxy container and the network: the sandbox container they serve.
pub const EGRESS_LABEL: &str = "dev.moat.egress-for";
/// The port the proxy listens on inside its container.
pub const PROXY_PORT: u16 = 3128;
/// Where the session's egress directory (the control socket) appears in the proxy.
pub const CONTROL_MOUNT: &str = "/run/moat-egress";
/// The `sandbox.network` value that turns this on.
pub const EGRESS_NETWORK: &str = "egress";

/// The engine-side names of one session's egress parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressNames {
    /// The internal network the sandbox and the proxy share.
    pub network: String,
    /// The proxy container; also its host name on the internal network.
    pub proxy: String,
}

impl EgressNames {
    /// Derived from the sandbox container's name. The proxy's name is a DNS label (at most 63
    /// characters), since the sandbox reaches it by that name.
    pub fn for_container(container: &str) -> Self {
        let proxy = if container.len() + 6 <= 63 {
            format!("{container}-proxy")
        } else {
            let hash = hex::encode(&Sha256::digest(container.as_bytes())[..4]);
            let head: String = container.chars().take(48).collect();
            format!("{head}-proxy-{hash}")
        };
        Self {
            network: format!("{container}-net"),
            proxy,
        }
    }
}

/// `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY`, upper and lower case: ordinary tools (curl, pip,
/// git, npm) use them; a tool that ignores them has no route at all.
pub fn proxy_env(proxy_host: &str) -> Vec<String> {
    let url = format!("http://{proxy_host}:{PROXY_PORT}");
    let mut env = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", url.as_str()),
        ("HTTPS_PROXY", url.as_str()),
        ("NO_PROXY", "localhost,127.0.0.1,::1"),
    ] {
        env.push(format!("{name}={value}"));
        env.push(format!("{}={value}", name.to_ascii_lowercase()));
    }
    env
}

/// The proxy container: the moat binary from the proxy image, hardened like a sandbox
/// (read-only root, no capabilities, no new privileges, small limits), on the internal
/// network only at creation (the outbound network is attached before start), with the
/// session's egress directory as its only mount.
pub fn proxy_spec(
    names: &EgressNames,
    container: &str,
    image: &str,
    user: (u32, u32),
    egress_dir: &str,
    peers: &[String],
    dns: &[String],
) -> ContainerSpec {
    ContainerSpec {
        name: names.proxy.clone(),
        image: image.to_string(),
        labels: BTreeMap::from([(EGRESS_LABEL.to_string(), container.to_string())]),
        user: format!("{}:{}", user.0, user.1),
        env: vec!["LANG=C.UTF-8".into(), "MOAT_LOG=warn".into()],
        mounts: vec![Mount {
            source: egress_dir.to_string(),
            target: CONTROL_MOUNT.into(),
            read_only: false,
        }],
        tmpfs: BTreeMap::new(),
        read_only_root: true,
        network: names.network.clone(),
        cap_add: Vec::new(),
        security_opt: vec!["no-new-privileges:true".into()],
        pids_limit: 128,
        memory_bytes: 256 << 20,
        shm_bytes: 0,
        nano_cpus: 0,
        // The engine's default runtime even when the sandbox runs under runsc: the proxy is
        // moat's own code and must reach a host unix socket, which gVisor keeps closed.
        runtime: None,
        working_dir: "/".into(),
        cmd: vec![
            "/usr/local/bin/moat".into(),
            "egress-proxy".into(),
            "--listen".into(),
            format!("0.0.0.0:{PROXY_PORT}"),
            "--control".into(),
            format!("{CONTROL_MOUNT}/{}", super::control::SOCKET_NAME),
            "--peers".into(),
            peers.join(","),
        ],
        dns: dns.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels() {
        let short = EgressNames::for_container("moat-main-1a2b3c4d");
        assert_eq!(short.proxy, "moat-main-1a2b3c4d-proxy");
        assert_eq!(short.network, "moat-main-1a2b3c4d-net");
        let long_name = format!("moat-{}-1a2b3c4d", "x".repeat(49));
        assert_eq!(long_name.len(), 63);
        let long = EgressNames::for_container(&long_name);
        assert!(long.proxy.len() <= 63, "{}", long.proxy);
        assert_ne!(
            long.proxy,
            EgressNames::for_container(&format!("{long_name}y")).proxy
        );
    }

    #[test]
    fn env_points_every_case_at_the_proxy() {
        let env = proxy_env("p");
        for name in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"] {
            assert!(env.contains(&format!("{name}=http://p:3128")), "{name}");
        }
        assert!(env.iter().any(|e| e.starts_with("no_proxy=")));
    }

    #[test]
    fn proxy_is_hardened_and_mounts_only_its_channel() {
        let names = EgressNames::for_container("moat-a-1");
        let spec = proxy_spec(
            &names,
            "moat-a-1",
            "img",
            (65534, 65534),
            "/h/egress/a",
            &["10.9.0.0/24".into()],
            &["10.9.0.53".into()],
        );
        assert_eq!(spec.dns, ["10.9.0.53"]);
        assert!(spec.read_only_root);
        assert!(spec.cap_add.is_empty());
        assert_eq!(spec.network, "moat-a-1-net");
        assert_eq!(spec.user, "65534:65534");
        assert_eq!(spec.mounts.len(), 1);
        assert_eq!(spec.mounts[0].target, CONTROL_MOUNT);
        assert!(!spec.labels.contains_key(crate::session::MOAT_LABEL));
        let at = spec.cmd.iter().position(|a| a == "--peers").unwrap();
        assert_eq!(spec.cmd[at + 1], "10.9.0.0/24");
    }
}
