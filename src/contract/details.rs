//! A tool result's `details` (docs/mcp.md, "Results"), one type per shape the exec tool (and
//! `process poll`) sends; the other tools' fields ride in [`Other`] beside a typed status.
//!
//! The wire form is fixed: every shape writes its keys sorted (the order `json!` gave them,
//! which the fields below follow) and writes absent values as `null` where it always has
//! (`"exitCode": null`). Reading back is in `read.rs`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::status::{Limit, Status};

/// See the module docs. Serialized as the object of the shape it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Details {
    /// A command that ended within the call.
    Finished(Finished),
    /// A command that moved to the background.
    Running(Running),
    /// A command (or a file write) the policy refused; nothing ran.
    Denied(Denied),
    /// A command that waits for an operator's decision.
    Pending(Pending),
    /// A command the engine could not start in a container at a limit.
    NotStarted(NotStarted),
    /// `process poll`: the output since the last poll and how the process stands.
    Poll(Poll),
    /// Any other shape: the other `process` actions' and the file tools' fields, and what a
    /// different build of moat sent that this one does not know, kept as it came.
    Other(Other),
}

/// [`Details::Finished`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Finished {
    /// The whole output, stdout and stderr interleaved, sanitized and redacted: the CLI
    /// prints it as the command's own output.
    pub aggregated: String,
    /// Where it ran, as the sandbox (or host) sees it.
    pub cwd: String,
    /// From start to exit.
    pub duration_ms: i64,
    /// The exit status; `null` when a signal or a lost wrapper left none.
    pub exit_code: Option<i64>,
    /// The signal moat sent that ended it (`SIGTERM`, `SIGKILL`), if any.
    pub exit_signal: Option<String>,
    /// The sandbox limit that cut it short; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// The process whose record keeps the output the cap cut (`process log` pages it);
    /// absent when the result holds it all.
    #[serde(default, rename = "sessionId", skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// `completed` for exit 0 without a signal, timeout or limit; `failed` otherwise.
    pub status: Status,
    /// Whether moat ended it at its timeout.
    pub timed_out: bool,
    /// Whether the output cap cut `aggregated`.
    pub truncated: bool,
}

/// [`Details::Running`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Running {
    /// Where it runs.
    pub cwd: String,
    /// Its process group id, once the wrapper wrote it.
    pub pid: Option<u32>,
    /// The process the `process` tool follows it by (the wire's name is `sessionId`).
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// Milliseconds since the epoch.
    pub started_at: i64,
    /// Always `running`.
    pub status: Status,
    /// The last of its output so far.
    pub tail: String,
}

/// [`Details::Denied`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Denied {
    /// Always true: what tells a refusal from a command that ran and failed.
    pub denied: bool,
    /// Why, secrets redacted.
    pub reason: String,
    /// Always `failed`.
    pub status: Status,
}

impl Denied {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            denied: true,
            reason: reason.into(),
            status: Status::Failed,
        }
    }
}

/// [`Details::Pending`] (docs/approvals.md, "Approvals").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pending {
    /// The decisions an operator may give (`allow-once`, `allow-always`, `deny`).
    pub allowed_decisions: Vec<String>,
    /// The approval the CLI waits on and an operator decides.
    pub approval_id: String,
    /// Its first 8 characters, as `moat approvals approve` accepts them.
    pub approval_slug: String,
    /// The command as shown (escaped, secrets replaced).
    pub command: String,
    /// Where it would run.
    pub cwd: String,
    /// When an undecided approval expires, in milliseconds since the epoch.
    pub expires_at_ms: i64,
    /// `sandbox` or `host`: the machine it would run on.
    pub host: String,
    /// Why the policy asks.
    pub reason: String,
    /// Always `approval-pending`.
    pub status: Status,
}

/// [`Details::NotStarted`] (docs/mcp.md, "Limits in results").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotStarted {
    /// Where it would have run.
    pub cwd: String,
    /// The limit the container is stuck at.
    pub limit: Limit,
    /// Always `failed`.
    pub status: Status,
}

/// [`Details::Poll`] (docs/mcp.md, `process poll`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Poll {
    /// The whole output kept in memory so far.
    pub aggregated: String,
    /// The exit status once it ended with one.
    pub exit_code: Option<i64>,
    /// The signal moat sent that ended it, if any.
    pub exit_signal: Option<String>,
    /// The sandbox limit that cut it short; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// While it runs: when to poll again (the back-off); absent once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
    /// The process polled.
    #[serde(rename = "sessionId")]
    pub process_id: String,
    /// The process's own status: `running`, `completed` or `failed`.
    pub status: Status,
    /// Whether moat ended it at its timeout.
    pub timed_out: bool,
}

/// [`Details::Other`]: the object as it is sent, `status` among its keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Other(Value);

impl Other {
    /// `fields` (an object, without `status`) with `status` added.
    pub fn new(status: Status, fields: Value) -> Self {
        let mut map = match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        map.insert("status".into(), Value::String(status.as_str().into()));
        Self(Value::Object(map))
    }

    /// What was read, kept whatever it is.
    pub(super) fn read(value: Value) -> Self {
        Self(value)
    }

    /// Its status; `None` for one this build does not know (or none at all).
    pub fn status(&self) -> Option<Status> {
        Status::deserialize(self.0.get("status")?).ok()
    }

    /// One field, for shapes that are not typed (tests, the file tools' callers).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    fn str_field(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

impl Details {
    /// The shape of the tools' plain answers: `{"status": …}` and nothing else.
    pub fn bare(status: Status) -> Self {
        Details::Other(Other::new(status, Value::Object(Map::new())))
    }

    /// Fields of their own (an object) and a status.
    pub fn other(status: Status, fields: Value) -> Self {
        Details::Other(Other::new(status, fields))
    }

    /// `details.status`; `None` only for a shape from a build with statuses this one does
    /// not know.
    pub fn status(&self) -> Option<Status> {
        match self {
            Details::Finished(d) => Some(d.status),
            Details::Running(d) => Some(d.status),
            Details::Denied(d) => Some(d.status),
            Details::Pending(d) => Some(d.status),
            Details::NotStarted(d) => Some(d.status),
            Details::Poll(d) => Some(d.status),
            Details::Other(d) => d.status(),
        }
    }

    /// Whether the policy refused it (`details.denied`).
    pub fn is_denied(&self) -> bool {
        match self {
            Details::Denied(d) => d.denied,
            Details::Other(d) => d.get("denied") == Some(&Value::Bool(true)),
            _ => false,
        }
    }

    /// The approval a pending command waits on.
    pub fn approval_id(&self) -> Option<&str> {
        match self {
            Details::Pending(d) => Some(&d.approval_id),
            Details::Other(d) => d.str_field("approvalId"),
            _ => None,
        }
    }

    /// The process the result is about (`details.sessionId` on the wire), if it names one.
    pub fn process_id(&self) -> Option<&str> {
        match self {
            Details::Finished(d) => d.process_id.as_deref(),
            Details::Running(d) => Some(&d.process_id),
            Details::Poll(d) => Some(&d.process_id),
            Details::Other(d) => d.str_field("sessionId"),
            _ => None,
        }
    }

    /// The output a finished command (or a poll) holds.
    pub fn aggregated(&self) -> Option<&str> {
        match self {
            Details::Finished(d) => Some(&d.aggregated),
            Details::Poll(d) => Some(&d.aggregated),
            Details::Other(d) => d.str_field("aggregated"),
            _ => None,
        }
    }

    /// The exit code of a command that ended with one.
    pub fn exit_code(&self) -> Option<i64> {
        match self {
            Details::Finished(d) => d.exit_code,
            Details::Poll(d) => d.exit_code,
            Details::Other(d) => d.get("exitCode").and_then(Value::as_i64),
            _ => None,
        }
    }

    /// The signal moat sent that ended the command.
    pub fn exit_signal(&self) -> Option<&str> {
        match self {
            Details::Finished(d) => d.exit_signal.as_deref(),
            Details::Poll(d) => d.exit_signal.as_deref(),
            Details::Other(d) => d.str_field("exitSignal"),
            _ => None,
        }
    }

    /// Whether moat ended the command at its timeout.
    pub fn timed_out(&self) -> bool {
        match self {
            Details::Finished(d) => d.timed_out,
            Details::Poll(d) => d.timed_out,
            Details::Other(d) => d.get("timedOut") == Some(&Value::Bool(true)),
            _ => false,
        }
    }

    /// Whether a sandbox limit cut the command short (or keeps it from starting).
    pub fn has_limit(&self) -> bool {
        match self {
            Details::Finished(d) => d.limit.is_some(),
            Details::Poll(d) => d.limit.is_some(),
            Details::NotStarted(_) => true,
            Details::Other(d) => d.get("limit").is_some_and(|l| !l.is_null()),
            _ => false,
        }
    }

    /// The wire object, for MCP's `structuredContent` and for tests that read fields by
    /// their wire names.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The wire JSON text.
impl std::fmt::Display for Details {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&text)
    }
}
