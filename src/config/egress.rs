//! `[sandbox.egress]`: what a session with `sandbox.network = "egress"` may reach through its
//! proxy (docs/security.md, "Network egress").

use serde::{Deserialize, Serialize};

/// What happens to a host no entry covers.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EgressAsk {
    /// Refused.
    #[default]
    Off,
    /// Refused now, and a pending approval of kind network asks an operator.
    OnMiss,
}

impl EgressAsk {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            EgressAsk::Off => "off",
            EgressAsk::OnMiss => "on-miss",
        }
    }

    /// Reads `off` or `on-miss`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "off" => Some(EgressAsk::Off),
            "on-miss" => Some(EgressAsk::OnMiss),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EgressConfig {
    /// Host globs with optional ports the sandbox may reach (`pkgs.example.org`,
    /// `*.files.example.net`, `host:8080`, `host:*`); an entry without a port covers 80 and
    /// 443. Empty: nothing is allowed.
    pub allow: Vec<String>,
    /// Entries refused whatever `allow` or an operator's grant says.
    pub deny: Vec<String>,
    /// `off` refuses a host no entry covers; `on-miss` refuses it and files a pending
    /// approval of kind network for an operator to decide.
    pub ask: EgressAsk,
    /// The Docker network the proxy reaches the outside through (the engine's default
    /// `bridge` unless set): the only network besides the session's internal one that the
    /// proxy joins, and one the sandbox never joins.
    pub outbound_network: String,
    /// Resolvers (IP addresses) the proxy looks allowed names up with; empty: the engine's
    /// (the host's). Names the policy refuses are never looked up at all.
    pub dns: Vec<String>,
    /// The host drops every packet from the session's bridge (root only): the only thing that
    /// stops a broadcast from the sandbox reaching host services on all addresses. False
    /// starts egress sessions under a daemon that is not root, without that part of the wall.
    pub host_firewall: bool,
    /// Minutes an operator's allow-once decision on a network approval lasts.
    pub grant_minutes: u64,
}

impl Default for EgressConfig {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            deny: Vec::new(),
            ask: EgressAsk::Off,
            outbound_network: "bridge".into(),
            dns: Vec::new(),
            host_firewall: true,
            grant_minutes: 10,
        }
    }
}
