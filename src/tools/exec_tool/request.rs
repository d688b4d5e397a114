//! The `exec` tool's parameters (docs/mcp.md, "Tools"), exactly as agents send them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Parameters of one `exec` call. Enum-like strings stay raw here: an unknown value counts as
/// "not given" (docs/mcp.md, "Tools"), which the accessors below implement.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecRequest {
    pub command: String,
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub yield_ms: Option<f64>,
    #[serde(default)]
    pub background: Option<bool>,
    /// Seconds; `0` disables the timeout.
    #[serde(default)]
    pub timeout: Option<f64>,
    #[serde(default)]
    pub pty: Option<bool>,
    #[serde(default)]
    pub elevated: Option<bool>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub security: Option<String>,
    #[serde(default)]
    pub ask: Option<String>,
    /// With `host: "node"`: the paired node to run on (docs/nodes.md, "Calls"); without it,
    /// the session's default node (the operator's), then `exec.node`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// With `host: "node"`: `sandbox` (the default: a sandbox of the node's) or `host` (the
    /// node's host, through the node's own gates and approvals).
    #[serde(default, alias = "node_host", skip_serializing_if = "Option::is_none")]
    pub node_host: Option<String>,
    /// The login shell instead of `sandbox.shell`, for an edge whose own protocol names it
    /// (E2B's process service runs `bash -l -c`, docs/e2b.md, "Processes"). Never read from
    /// the wire: agents choose no shell.
    #[serde(skip)]
    pub shell: Option<crate::config::Shell>,
    /// The container user the command runs as instead of the sandbox's (`"0"`: root), for
    /// an edge whose protocol names one in a session that may become root (E2B's
    /// `user="root"`, docs/e2b.md, "Users"). Never read from the wire.
    #[serde(skip)]
    pub user: Option<String>,
    /// The container directory the command starts in instead of the workspace, for an edge
    /// whose protocol starts commands in the user's home (E2B's, docs/e2b.md, "Processes").
    /// Never read from the wire: an agent's directory is `workdir`, mapped and checked.
    #[serde(skip)]
    pub start_in: Option<String>,
    /// Variables the edge itself sets for its protocol, under the request's `env` (E2B's
    /// `HOME`, `USER`, `LOGNAME` for the user a call runs as): the session's, not the agent's,
    /// so an allowlist does not judge them as request env. Never read from the wire.
    #[serde(skip)]
    pub edge_env: BTreeMap<String, String>,
}

/// Where a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostChoice {
    Sandbox,
    Host,
    /// A paired node (docs/nodes.md): the call is forwarded, never run here.
    Node,
}

/// Where a forwarded call runs on its node (`nodeHost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeHost {
    Sandbox,
    Host,
}

impl NodeHost {
    /// The word the node's wire carries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
            Self::Host => "host",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RequestError {
    #[error("Provide a command to start.")]
    EmptyCommand,
    #[error("start the command: it contains a NUL byte")]
    NulInCommand,
    /// `host` names where a command runs, never a machine: a hostname-like value must not
    /// quietly fall back to the sandbox (docs/mcp.md, "host").
    #[error("run on host `{0}`: host accepts only auto, sandbox, gateway, host or node (it chooses where the command runs, not a machine; a node is named by `node`)")]
    UnknownHost(String),
    /// `node` or `nodeHost` without `host: "node"`: the call would run here while its
    /// caller meant another machine.
    #[error(
        "run on node `{0}`: set host to `node` as well (without it the command would run here)"
    )]
    NodeWithoutHost(String),
    #[error("run on a node's `{0}`: nodeHost accepts only sandbox or host")]
    UnknownNodeHost(String),
    /// A place that judges no node's call: the node's own policy does (docs/nodes.md).
    #[error("judge a call for a node here: the node's own policy and approvals decide it")]
    NodeNotHere,
}

impl ExecRequest {
    pub fn validate(&self) -> Result<(), RequestError> {
        if self.command.trim().is_empty() {
            return Err(RequestError::EmptyCommand);
        }
        if self.command.contains('\0') {
            return Err(RequestError::NulInCommand);
        }
        if self.host()? != HostChoice::Node {
            if let Some(n) = self.node.as_deref().filter(|n| !n.trim().is_empty()) {
                return Err(RequestError::NodeWithoutHost(shown(n)));
            }
            if let Some(h) = self.node_host.as_deref().filter(|h| !h.trim().is_empty()) {
                return Err(RequestError::NodeWithoutHost(shown(h)));
            }
        } else {
            self.node_host()?;
        }
        Ok(())
    }

    /// `auto`/`sandbox` → sandbox (or the host with `elevated`), `host`/`gateway` → host,
    /// `node` → a paired node; an empty value is "not given"; anything else is refused by
    /// name.
    pub fn host(&self) -> Result<HostChoice, RequestError> {
        let h = self.host.as_deref().map(|h| h.trim().to_ascii_lowercase());
        match h.as_deref() {
            Some("host") | Some("gateway") => Ok(HostChoice::Host),
            Some("node") => Ok(HostChoice::Node),
            None | Some("") | Some("auto") | Some("sandbox") => {
                if self.elevated == Some(true) {
                    Ok(HostChoice::Host)
                } else {
                    Ok(HostChoice::Sandbox)
                }
            }
            Some(_) => Err(RequestError::UnknownHost(shown(
                self.host.as_deref().unwrap_or_default(),
            ))),
        }
    }

    /// Whether the call goes to a paired node (`host: "node"`): nothing of it runs here, and
    /// its approvals and processes are the node's.
    pub fn for_node(&self) -> bool {
        self.host().ok() == Some(HostChoice::Node)
    }

    /// Where a node call runs there: `sandbox` unless `nodeHost` (or `elevated`) says `host`.
    pub fn node_host(&self) -> Result<NodeHost, RequestError> {
        let h = self
            .node_host
            .as_deref()
            .map(|h| h.trim().to_ascii_lowercase());
        match h.as_deref() {
            None | Some("") | Some("auto") => Ok(if self.elevated == Some(true) {
                NodeHost::Host
            } else {
                NodeHost::Sandbox
            }),
            Some("sandbox") => Ok(NodeHost::Sandbox),
            Some("host") | Some("gateway") => Ok(NodeHost::Host),
            Some(_) => Err(RequestError::UnknownNodeHost(shown(
                self.node_host.as_deref().unwrap_or_default(),
            ))),
        }
    }

    /// The yield window in ms, clamped to [10, 120000].
    pub fn yield_window_ms(&self, configured: u64) -> u64 {
        let raw = self
            .yield_ms
            .filter(|v| v.is_finite())
            .map(|v| v.max(0.0) as u64)
            .unwrap_or(configured);
        raw.clamp(10, 120_000)
    }

    /// Effective timeout in seconds (`None` = no timeout): the call's own, else the configured
    /// default, whatever the mode (foreground, yielded or background), counted from the start
    /// of the command; `0` means none (docs/mcp.md, "Timeouts").
    pub fn timeout_secs(&self, configured: u64) -> Option<u64> {
        match self.timeout.filter(|t| t.is_finite()) {
            Some(t) if t <= 0.0 => None,
            Some(t) => Some(t.ceil() as u64),
            None => (configured > 0).then_some(configured),
        }
    }
}

/// A value of the request quoted in an error: 64 characters at most, escaped.
fn shown(value: &str) -> String {
    value
        .chars()
        .take(64)
        .flat_map(char::escape_debug)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(json: &str) -> ExecRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn parses_the_contract_names() {
        let r = req(
            r#"{"command":"ls","workdir":"src","env":{"A":"1"},"yieldMs":50,"background":false,"timeout":5,"pty":true,"elevated":false,"host":"Sandbox","security":"allowlist","ask":"on-miss"}"#,
        );
        assert_eq!(r.command, "ls");
        assert_eq!(r.yield_ms, Some(50.0));
        assert_eq!(r.pty, Some(true));
        assert!(serde_json::from_str::<ExecRequest>(r#"{"command":"ls","bogus":1}"#).is_err());
    }

    #[test]
    fn validation() {
        assert_eq!(
            req(r#"{"command":"  "}"#).validate(),
            Err(RequestError::EmptyCommand)
        );
        assert_eq!(
            req(r#"{"command":"a\u0000b"}"#).validate(),
            Err(RequestError::NulInCommand)
        );
        req(r#"{"command":"ls","host":"node","node":"n1","nodeHost":"host"}"#)
            .validate()
            .unwrap();
        // A node named without host=node would run here: refused, naming it.
        assert_eq!(
            req(r#"{"command":"ls","node":"n1"}"#).validate(),
            Err(RequestError::NodeWithoutHost("n1".into()))
        );
        assert_eq!(
            req(r#"{"command":"ls","host":"sandbox","nodeHost":"host"}"#).validate(),
            Err(RequestError::NodeWithoutHost("host".into()))
        );
        assert_eq!(
            req(r#"{"command":"ls","host":"node","nodeHost":"mars"}"#).validate(),
            Err(RequestError::UnknownNodeHost("mars".into()))
        );
        // A hostname-like value is refused by name, never run in the sandbox.
        for (json, shown) in [
            (r#"{"command":"ls","host":"example.com"}"#, "example.com"),
            (r#"{"command":"ls","host":"mars"}"#, "mars"),
            (r#"{"command":"ls","host":"a\nb"}"#, "a\\nb"),
        ] {
            let err = req(json).validate().unwrap_err();
            assert_eq!(err, RequestError::UnknownHost(shown.to_string()));
            let text = err.to_string();
            assert!(text.contains(&format!("`{}`", shown)), "{text}");
            assert!(
                text.contains("auto, sandbox, gateway, host or node"),
                "{text}"
            );
        }
    }

    #[test]
    fn hosts() {
        let rows = [
            (r#"{"command":"x"}"#, HostChoice::Sandbox),
            (r#"{"command":"x","host":"auto"}"#, HostChoice::Sandbox),
            (r#"{"command":"x","host":" SANDBOX "}"#, HostChoice::Sandbox),
            (r#"{"command":"x","host":"gateway"}"#, HostChoice::Host),
            (r#"{"command":"x","host":"host"}"#, HostChoice::Host),
            (r#"{"command":"x","elevated":true}"#, HostChoice::Host),
            (r#"{"command":"x","host":""}"#, HostChoice::Sandbox),
            (r#"{"command":"x","host":" Node "}"#, HostChoice::Node),
            (
                r#"{"command":"x","host":"sandbox","elevated":true}"#,
                HostChoice::Host,
            ),
        ];
        for (json, want) in rows {
            assert_eq!(req(json).host().unwrap(), want, "{json}");
        }
    }

    #[test]
    fn yield_and_timeout_rules() {
        assert_eq!(req(r#"{"command":"x"}"#).yield_window_ms(10_000), 10_000);
        assert_eq!(
            req(r#"{"command":"x","yieldMs":1}"#).yield_window_ms(10_000),
            10
        );
        assert_eq!(
            req(r#"{"command":"x","yieldMs":999999}"#).yield_window_ms(10_000),
            120_000
        );
        assert_eq!(req(r#"{"command":"x"}"#).timeout_secs(1800), Some(1800));
        assert_eq!(
            req(r#"{"command":"x","timeout":0}"#).timeout_secs(1800),
            None
        );
        assert_eq!(
            req(r#"{"command":"x","timeout":2.5}"#).timeout_secs(1800),
            Some(3)
        );
        // Backgrounded and yielded calls get the default too (docs/mcp.md, "Timeouts").
        assert_eq!(
            req(r#"{"command":"x","background":true}"#).timeout_secs(1800),
            Some(1800)
        );
        assert_eq!(
            req(r#"{"command":"x","yieldMs":100}"#).timeout_secs(1800),
            Some(1800)
        );
        assert_eq!(
            req(r#"{"command":"x","background":true,"timeout":0}"#).timeout_secs(1800),
            None
        );
        assert_eq!(req(r#"{"command":"x"}"#).timeout_secs(0), None);
        assert_eq!(
            req(r#"{"command":"x","background":true,"timeout":7}"#).timeout_secs(1800),
            Some(7)
        );
    }
}
