//! What crosses between a gateway and a node (docs/nodes.md, "What crosses"): four routes,
//! their bodies and their bounds. Everything else a node serves is on other listeners.

use serde::{Deserialize, Serialize};

/// `GET`: who the node is and what it offers (any paired gateway may ask).
pub const INFO_PATH: &str = "/node/v1/info";
/// `POST` [`ForwardedExec`]: the exec tool on the node; answers the tool result.
pub const EXEC_PATH: &str = "/node/v1/exec";
/// `POST` [`ForwardedProcess`]: the process tool on the node; answers the tool result.
pub const PROCESS_PATH: &str = "/node/v1/process";

/// `POST` [`ForwardedEvents`]: the events of the gateway's session on the node, as they
/// happen: one [`NodeEvent`] of JSON a line, an empty line every [`KEEPALIVE_SECS`].
pub const EVENTS_PATH: &str = "/node/v1/events";
/// How often a node's event stream sends an empty line, so a gateway tells a quiet node from
/// one that went away.
pub const KEEPALIVE_SECS: u64 = 15;
/// The longest event line a gateway reads; a longer one ends the stream (an event's text is a
/// sentence and a 400-character tail).
pub const MAX_EVENT_LINE: usize = 16 * 1024;
/// Event streams one gateway may hold open on a node at once (`429` past it): each is a
/// connection, counted apart from its calls so following never takes a call's place.
pub const STREAMS_PER_GATEWAY: usize = 16;

/// The most a forwarded request's body may hold: an exec's env is at most 256 KiB and its
/// command far less (docs/security.md, "Bounds on what one exec carries"); a node answers a
/// larger body with 413 before reading on.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// The most of a node's answer a gateway reads: a tool result carries at most 200k characters
/// of output (four bytes each) and its JSON escapes; past this the call fails by name.
pub const MAX_ANSWER_BYTES: usize = 4 << 20;

/// An exec call forwarded to a node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardedExec {
    /// The gateway's session the call came from; the node runs it in a session of its own
    /// for this pairing and session (`node::node_session`).
    pub session: String,
    /// The exec request as the node's exec tool reads it, less where it runs (`host`,
    /// `elevated`, `node`, `nodeHost`): that is `node_host` below, so no call names a third
    /// machine.
    pub request: serde_json::Value,
    /// `sandbox` (a sandbox of the node's) or `host` (the node's host, through the node's
    /// gates and approvals).
    pub node_host: String,
    /// Wait for the command to end instead of yielding (the gateway's CLI foreground).
    #[serde(default)]
    pub wait: bool,
}

/// A process call forwarded to a node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardedProcess {
    /// The gateway's session, mapped as for [`ForwardedExec`].
    pub session: String,
    /// The process request as the node's process tool reads it, less `node`.
    pub request: serde_json::Value,
}

/// A gateway asking for its session's events on the node.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardedEvents {
    /// The gateway's session, mapped as for [`ForwardedExec`].
    pub session: String,
}

/// One event of the gateway's session on the node, as a line of the event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeEvent {
    /// The node's sentence (`Exec completed (…) :: …`): another machine's text, sanitized
    /// again by the gateway before anyone sees it.
    pub text: String,
    /// What it says, as data.
    #[serde(default)]
    pub outcome: Option<crate::process::EventOutcome>,
}

/// `GET /node/v1/info`'s answer, shown by `moat nodes list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// The node's moat version.
    pub version: String,
    /// Its build (the same build on both sides is not needed: the wire above is small and
    /// versioned by its paths).
    pub build: String,
    /// What it serves to gateways: `exec`, `process`, `events`.
    pub offers: Vec<String>,
    /// Where its calls may run: `sandbox`, and `host` when its operator enabled elevated
    /// runs (its gates still decide each call).
    pub node_hosts: Vec<String>,
    /// The pairing name the node knows the asking gateway by.
    pub gateway: String,
}
