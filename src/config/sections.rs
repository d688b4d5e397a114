//! Config sections for leaving the sandbox and for what the operator hands to agents:
//! `[elevated]`, `[approvals]`, `[secrets.NAME]` and `[skills.NAME]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::Security;

/// What an `elevated` request gets when the gates let it through.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ElevatedLevel {
    /// Commands stay in the sandbox unless a request asks for `elevated`; then the host policy
    /// (with approvals) applies.
    #[default]
    Off,
    /// Every command of an allowed caller runs on the host under the host policy.
    #[serde(alias = "on")]
    Ask,
    /// Elevated commands run on the host with security full and ask off: no approvals.
    Full,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ElevatedConfig {
    /// Master switch for running commands on the host.
    pub enabled: bool,
    /// Provider → sender ids allowed to run on the host (`cli` is the local command line,
    /// sender = the OS user name). `"*"` allows every sender of that provider.
    pub allow_from: BTreeMap<String, Vec<String>>,
    /// `off`, `ask` or `full` (see [`ElevatedLevel`]).
    pub default_level: ElevatedLevel,
    /// Host directories put in front of the login-shell PATH.
    pub path_prepend: Vec<String>,
    /// The user host commands run as (`name`, `uid` or `uid:gid`; empty = moat's own user).
    /// Another user cannot enter moat's 0700 home, so no host command can reach the socket,
    /// the operator token or the state database (docs/security.md, "The operator channel").
    pub user: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// Seconds a pending approval waits for an operator before `ask_fallback` applies.
    pub timeout_secs: u64,
    /// What happens when nobody decides in time: `deny`, `allowlist` (run only what the
    /// allowlist covers) or `full` (run). Never looser than the security level in force.
    pub ask_fallback: Security,
    /// Seconds after which an approved command still running sends one `Exec running` event.
    pub running_notice_secs: u64,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            timeout_secs: 1800,
            ask_fallback: Security::Deny,
            running_notice_secs: 10,
        }
    }
}

/// One secret: where its value comes from and who gets it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SecretConfig {
    /// Read the value from this variable of moat's own environment.
    pub env: String,
    /// Or from this file (must be mode 0600 or stricter, owned by moat's user).
    pub file: String,
    /// Session keys that get the value as the env var named like the secret (`*` = all;
    /// `agent:*` = every session of that agent).
    pub sessions: Vec<String>,
    /// `sandbox`, `host`, or both.
    pub hosts: Vec<String>,
}

/// A named skill: the binaries it needs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SkillConfig {
    /// Bare names resolved through PATH (or absolute paths) the skill runs.
    pub bins: Vec<String>,
    /// Enabled in config (`moat skills enable|disable` overrides this).
    pub enabled: bool,
}

impl SecretConfig {
    /// Whether the secret goes to `session` on the host (`true`) or in its sandbox.
    pub fn applies_to(&self, session: &str, on_host: bool) -> bool {
        let host = if on_host { "host" } else { "sandbox" };
        let hosts_ok = if self.hosts.is_empty() {
            !on_host
        } else {
            self.hosts
                .iter()
                .any(|h| h.trim().eq_ignore_ascii_case(host))
        };
        hosts_ok && self.sessions.iter().any(|p| session_matches(p, session))
    }
}

fn session_matches(pattern: &str, session: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => session.starts_with(prefix),
        None => pattern == session,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_targets() {
        let s = SecretConfig {
            sessions: vec!["main".into(), "bot:*".into()],
            ..Default::default()
        };
        let rows = [
            ("main", false, true),
            ("main", true, false),
            ("bot:1", false, true),
            ("other", false, false),
        ];
        for (session, host, want) in rows {
            assert_eq!(s.applies_to(session, host), want, "{session} {host}");
        }
        let both = SecretConfig {
            sessions: vec!["*".into()],
            hosts: vec!["host".into(), "Sandbox".into()],
            ..Default::default()
        };
        assert!(both.applies_to("x", true) && both.applies_to("y", false));
    }
}
