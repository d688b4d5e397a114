//! The elevated gates (docs/approvals.md, "Leaving the sandbox"): whether a request may leave the sandbox, and with which
//! policy. Pure; the caller's identity comes from its token (HTTP, MCP) or the local user
//! (CLI).

use crate::config::{ElevatedConfig, ElevatedLevel};

use super::request::{ExecRequest, HostChoice, RequestError};
use crate::contract::Target;

/// Who is calling `exec`. Agents carry the identity of their token; the CLI is the local
/// operator account.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// Channel the request came through (`cli`, `slack`, …).
    pub provider: Option<String>,
    /// Sender id within the provider.
    pub sender: Option<String>,
    /// The agent, when the token names one.
    pub agent: Option<String>,
}

impl Caller {
    /// No identity: passes no `allow_from` gate.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// `moat mcp` over stdio for `session`: whoever launched it is an agent client, never the
    /// operator's CLI. It is provider `mcp` with the session key as sender, so an operator lets
    /// it leave the sandbox only with `elevated.allow_from.mcp = ["<session>"]`.
    pub fn mcp_stdio(session: &str) -> Self {
        Self {
            provider: Some("mcp".into()),
            sender: Some(session.to_string()),
            agent: None,
        }
    }

    /// The local command line: provider `cli`, sender = the OS user name.
    pub fn cli() -> Self {
        let uid = nix::unistd::getuid();
        let name = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_else(|| uid.to_string());
        Self {
            provider: Some("cli".into()),
            sender: Some(name),
            agent: None,
        }
    }

    pub fn label(&self) -> String {
        format!(
            "{}:{}",
            self.provider.as_deref().unwrap_or("-"),
            self.sender.as_deref().unwrap_or("-")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run on the host: elevated execution is refused; failing gates: {}; {context}", gates.join("; "))]
pub struct GateError {
    /// Each failing gate with the config key that fixes it.
    pub gates: Vec<String>,
    pub context: String,
}

/// Decides the target. `host=host` and `elevated: true` ask for the host; with neither, a
/// `default_level` other than `off` moves an allowed caller to the host (a caller the gates
/// refuse then simply stays in the sandbox). An explicit request the gates refuse is an error
/// listing every failing gate.
pub fn target(
    req: &ExecRequest,
    cfg: &ElevatedConfig,
    caller: &Caller,
    session: &str,
) -> Result<Target, ElevatedError> {
    let host_asked = match req.host()? {
        HostChoice::Host => true,
        HostChoice::Sandbox => false,
        HostChoice::Node => return Err(RequestError::NodeNotHere.into()),
    };
    let failing = failing_gates(cfg, caller);
    let full = cfg.default_level == ElevatedLevel::Full;
    let wanted = match req.elevated {
        Some(true) => true,
        Some(false) => host_asked,
        None => host_asked || (cfg.default_level != ElevatedLevel::Off && failing.is_empty()),
    };
    if !wanted {
        return Ok(Target::Sandbox);
    }
    if !failing.is_empty() {
        return Err(ElevatedError::Gates(GateError {
            gates: failing,
            context: format!("provider={} session={session}", caller.label()),
        }));
    }
    Ok(Target::Host { full })
}

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ElevatedError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Gates(#[from] GateError),
}

fn failing_gates(cfg: &ElevatedConfig, caller: &Caller) -> Vec<String> {
    let mut gates = Vec::new();
    if !cfg.enabled {
        gates.push("elevated.enabled is false (set `elevated.enabled = true`)".to_string());
    }
    match (&caller.provider, &caller.sender) {
        (Some(p), Some(s)) => {
            let allowed = cfg
                .allow_from
                .get(p)
                .is_some_and(|ids| ids.iter().any(|i| i == "*" || i == s));
            if !allowed {
                // The advice adds to what is there: an inline `allow_from = { … }` would
                // replace the other providers' lists, and a bare list this provider's ids.
                let mut ids: Vec<String> = cfg
                    .allow_from
                    .get(p)
                    .map(|l| l.iter().map(|i| format!("{i:?}")).collect())
                    .unwrap_or_default();
                ids.push(format!("{s:?}"));
                gates.push(format!(
                    "sender `{s}` is not in elevated.allow_from.{p} (add it: under [elevated], `allow_from.{p} = [{}]`)",
                    ids.join(", ")
                ));
            }
        }
        _ => gates.push(
            "the caller carries no provider/sender identity, so elevated.allow_from cannot match (use a token that names one)"
                .to_string(),
        ),
    }
    gates
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cfg(enabled: bool, allow: &[(&str, &str)], level: ElevatedLevel) -> ElevatedConfig {
        let mut allow_from: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (p, s) in allow {
            allow_from
                .entry(p.to_string())
                .or_default()
                .push(s.to_string());
        }
        ElevatedConfig {
            enabled,
            allow_from,
            default_level: level,
            ..Default::default()
        }
    }

    fn caller(p: &str, s: &str) -> Caller {
        Caller {
            provider: Some(p.into()),
            sender: Some(s.into()),
            agent: None,
        }
    }

    fn req(elevated: Option<bool>, host: Option<&str>) -> ExecRequest {
        ExecRequest {
            command: "id".into(),
            elevated,
            host: host.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn gates_and_levels() {
        use ElevatedLevel::*;
        let alice = caller("cli", "alice");
        let rows: Vec<(ElevatedConfig, ExecRequest, Caller, Result<Target, usize>)> = vec![
            (
                cfg(false, &[], Off),
                req(None, None),
                alice.clone(),
                Ok(Target::Sandbox),
            ),
            (
                cfg(false, &[], Off),
                req(Some(true), None),
                alice.clone(),
                Err(2),
            ),
            (
                cfg(true, &[], Off),
                req(Some(true), None),
                alice.clone(),
                Err(1),
            ),
            (
                cfg(false, &[("cli", "alice")], Off),
                req(Some(true), None),
                alice.clone(),
                Err(1),
            ),
            (
                cfg(true, &[("cli", "alice")], Off),
                req(Some(true), None),
                alice.clone(),
                Ok(Target::Host { full: false }),
            ),
            (
                cfg(true, &[("cli", "*")], Full),
                req(None, Some("gateway")),
                alice.clone(),
                Ok(Target::Host { full: true }),
            ),
            (
                cfg(true, &[("cli", "alice")], Ask),
                req(None, None),
                alice.clone(),
                Ok(Target::Host { full: false }),
            ),
            // A default level never errors for a caller the gates refuse: it stays inside.
            (
                cfg(true, &[("cli", "bob")], Ask),
                req(None, None),
                alice.clone(),
                Ok(Target::Sandbox),
            ),
            (
                cfg(true, &[("cli", "alice")], Ask),
                req(Some(false), None),
                alice.clone(),
                Ok(Target::Sandbox),
            ),
            (
                cfg(true, &[("cli", "alice")], Off),
                req(Some(true), None),
                Caller::anonymous(),
                Err(1),
            ),
            (
                cfg(true, &[("slack", "alice")], Off),
                req(Some(true), None),
                alice.clone(),
                Err(1),
            ),
        ];
        for (i, (c, r, who, want)) in rows.into_iter().enumerate() {
            match (target(&r, &c, &who, "main"), want) {
                (Ok(t), Ok(w)) => assert_eq!(t, w, "row {i}"),
                (Err(ElevatedError::Gates(g)), Err(n)) => {
                    assert_eq!(g.gates.len(), n, "row {i}: {g}")
                }
                (got, w) => panic!("row {i}: got {got:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn the_error_names_every_failing_gate_and_its_key() {
        let err = target(
            &req(Some(true), None),
            &cfg(false, &[], ElevatedLevel::Off),
            &caller("cli", "alice"),
            "main",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("run on the host: elevated execution is refused"),
            "{err}"
        );
        assert!(err.contains("elevated.enabled"), "{err}");
        assert!(err.contains("elevated.allow_from.cli"), "{err}");
        assert!(err.contains("provider=cli:alice session=main"), "{err}");
    }

    /// The advice adds the sender to what is configured: it keeps the provider's ids and
    /// names only this provider's key, so following it never drops another provider's list
    /// (an inline `allow_from = { cli = [...] }` would replace the whole table).
    #[test]
    fn the_allow_from_advice_keeps_what_is_there() {
        let err = target(
            &req(Some(true), None),
            &cfg(true, &[("cli", "bob"), ("slack", "U1")], ElevatedLevel::Ask),
            &caller("cli", "alice"),
            "main",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(r#"under [elevated], `allow_from.cli = ["bob", "alice"]`"#),
            "{err}"
        );
        assert!(!err.contains("allow_from = {"), "{err}");
    }
}
