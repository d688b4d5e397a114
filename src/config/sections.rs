//! Config sections for leaving the sandbox and for what the operator hands to agents:
//! `[elevated]`, `[approvals]`, `[secrets.NAME]` and `[skills.NAME]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::scope::Scope;
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
    /// The login shell host commands run in: `sh` or `bash` (like `sandbox.shell`).
    pub shell: crate::config::Shell,
    /// Variable names host commands may receive beyond the built-in list (locale, TZ, TERM,
    /// COLUMNS/LINES, colour settings), from a request or moat's own environment. Names that
    /// change what a program runs are refused at load (docs/security.md, "Host commands").
    pub env_allow: Vec<String>,
    /// The directory host commands run in when a request names none (relative workdirs are
    /// taken from it). Empty: `$MOAT_HOME/host-work`, created private. It should be a
    /// directory no sandbox can write; one that a sandbox can write asks every time.
    pub workdir: String,
    /// Host directories, beside `workdir`, that a host command may run in (it or anything
    /// below it, symlinks resolved). A request naming any other workdir is refused, whatever
    /// the level: an agent must not pick the directory the operator's tools run in
    /// (docs/security.md, "Host commands"). Absolute, without `..`, checked at load.
    pub allowed_workdirs: Vec<String>,
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
    /// Pending approvals one session may have at once; a request past it is refused, so one
    /// agent cannot pile up waiters and rows (docs/approvals.md, "Limits").
    pub max_pending_per_session: u32,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            timeout_secs: 1800,
            ask_fallback: Security::Deny,
            running_notice_secs: 10,
            max_pending_per_session: 20,
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
    /// `prefix*` = every key starting with `prefix`). When `sandbox.scope` puts several
    /// sessions in one container, the patterns must cover whole containers
    /// ([`SecretConfig::splits_containers`]).
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

impl SecretConfig {
    /// Why this secret cannot be given out under `scope`, if it cannot: a session pattern that
    /// picks some but not all of the sessions sharing a container. Those sessions share one
    /// process table, so each can read the others' environment (`/proc/*/environ`); a secret
    /// meant for one of them reaches all (docs/security.md, "Shared containers").
    pub fn splits_containers(&self, scope: Scope) -> Option<String> {
        let sandbox = self.hosts.is_empty()
            || self
                .hosts
                .iter()
                .any(|h| h.trim().eq_ignore_ascii_case("sandbox"));
        if !sandbox {
            return None;
        }
        let bad = self
            .sessions
            .iter()
            .find(|p| !covers_whole_containers(p, scope))?;
        Some(match scope {
            Scope::Session => unreachable!("every pattern covers whole per-session containers"),
            Scope::Agent => format!(
                "`{bad}` picks single sessions, but sandbox.scope = \"agent\" puts all sessions of \
                 an agent (the key before `:`) in one container, where each can read the \
                 others' environment and processes; give the secret to whole agents \
                 (`AGENT*`, no `:`) or `*`, or set sandbox.scope = \"session\""
            ),
            Scope::Shared => format!(
                "`{bad}` picks single sessions, but sandbox.scope = \"shared\" puts every \
                 session in one container, where each can read the others' environment and \
                 processes; give the secret to `*`, or set sandbox.scope = \"session\""
            ),
        })
    }
}

/// Whether a session pattern matches all or none of the sessions of each container.
fn covers_whole_containers(pattern: &str, scope: Scope) -> bool {
    match scope {
        Scope::Session => true,
        Scope::Shared => pattern == "*",
        // An agent's container holds `AGENT` and every `AGENT:…`: a prefix without `:` takes
        // either all of them or none; an exact key or a prefix with `:` can take some.
        Scope::Agent => pattern
            .strip_suffix('*')
            .is_some_and(|prefix| !prefix.contains(':')),
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

    #[test]
    fn secrets_under_shared_containers() {
        // (scope, sessions, hosts, refused)
        let rows: &[(Scope, &[&str], &[&str], bool)] = &[
            (Scope::Session, &["bot:x"], &[], false),
            (Scope::Session, &["main"], &["sandbox"], false),
            (Scope::Agent, &["bot:x"], &[], true),
            (Scope::Agent, &["bot:*"], &[], true),
            (Scope::Agent, &["main"], &[], true),
            (Scope::Agent, &["bot*"], &[], false),
            (Scope::Agent, &["*"], &[], false),
            (Scope::Agent, &["bot*", "x:y"], &[], true),
            (Scope::Agent, &["bot:x"], &["host"], false),
            (Scope::Agent, &["bot:x"], &["host", "sandbox"], true),
            (Scope::Shared, &["bot*"], &[], true),
            (Scope::Shared, &["*"], &[], false),
            (Scope::Shared, &["main"], &["host"], false),
        ];
        for (scope, sessions, hosts, refused) in rows {
            let s = SecretConfig {
                env: "X".into(),
                sessions: sessions.iter().map(|p| p.to_string()).collect(),
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            };
            let why = s.splits_containers(*scope);
            assert_eq!(
                why.is_some(),
                *refused,
                "{scope:?} {sessions:?} {hosts:?}: {why:?}"
            );
            if let Some(why) = why {
                assert!(
                    why.contains("sandbox.scope") && why.contains("environment"),
                    "{why}"
                );
            }
        }
    }
}
