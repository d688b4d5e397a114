//! The exec tool's shapes (docs/mcp.md, "Results"; docs/approvals.md, "Approvals"): a
//! command that finished, runs on, was refused, waits for an operator or could not start.

use serde::{Deserialize, Serialize};

use crate::contract::status::{Limit, Status};
use crate::contract::target::Machine;

/// [`Details::Finished`](super::Details::Finished).
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

/// [`Details::Running`](super::Details::Running).
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

/// [`Details::Denied`](super::Details::Denied).
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

/// [`Details::Pending`](super::Details::Pending) (docs/approvals.md, "Approvals").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pending {
    /// The decisions an operator may give: what the CLI and console offer.
    pub allowed_decisions: Vec<Decision>,
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
    /// The machine it would run on.
    pub host: Machine,
    /// Why the policy asks.
    pub reason: String,
    /// Always `approval-pending`.
    pub status: Status,
}

/// [`Details::NotStarted`](super::Details::NotStarted) (docs/mcp.md, "Limits in results").
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

/// A decision an operator may give on a pending approval, as `details.allowedDecisions`
/// spells it (docs/approvals.md). `approvals::ApprovalDecision` has the same words; this one
/// lives here because the contract sits below the approvals service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Run this command once.
    AllowOnce,
    /// Run it, and allow what it runs from now on.
    AllowAlways,
    /// Refuse it.
    Deny,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are the approvals service's, as the wire pins them.
    #[test]
    fn words_are_the_wires() {
        for (d, word) in [
            (Decision::AllowOnce, "allow-once"),
            (Decision::AllowAlways, "allow-always"),
            (Decision::Deny, "deny"),
        ] {
            assert_eq!(serde_json::to_value(d).unwrap(), word);
            assert_eq!(serde_json::from_value::<Decision>(word.into()).unwrap(), d);
        }
    }
}
