//! The two words of a tool result every edge reads: `details.status` (docs/mcp.md, "Results")
//! and `details.limit` (docs/mcp.md, "Limits in results").

use serde::{Deserialize, Serialize};

use super::exit::LimitKind;

/// How a tool call ended, as `details.status` spells it. The edges map it: `failed` is MCP
/// `isError` and a non-zero CLI exit (docs/mcp.md, "Results").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The call did what it was asked: a command that exited 0, a process action done.
    Completed,
    /// It did not: a non-zero exit, a signal, a timeout, a limit, a refusal, a bad request.
    Failed,
    /// The command runs on in the background; `sessionId` names the process.
    Running,
    /// The command waits for an operator; `approvalId` names the approval.
    ApprovalPending,
}

impl Status {
    /// The word as the wire writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Running => "running",
            Status::ApprovalPending => "approval-pending",
        }
    }
}

/// Padded like a `str`: `process list` aligns the word (`{:<9}`).
impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The sandbox limit, or the end of the container, that cut a command short: `details.limit`
/// (docs/mcp.md, "Limits in results").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// `sandbox.memory`.
    Memory,
    /// `sandbox.pids_limit`.
    Pids,
    /// The container was removed while the command ran.
    ContainerRemoved,
    /// The container stopped while the command ran.
    ContainerStopped,
    /// The container was restarted while the command ran.
    ContainerRestarted,
}

impl From<LimitKind> for Limit {
    fn from(kind: LimitKind) -> Self {
        match kind {
            LimitKind::Memory => Limit::Memory,
            LimitKind::Pids => Limit::Pids,
            LimitKind::ContainerRemoved => Limit::ContainerRemoved,
            LimitKind::ContainerStopped => Limit::ContainerStopped,
            LimitKind::ContainerRestarted => Limit::ContainerRestarted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are the wire's, as `LimitKind::as_str` and the docs spell them.
    #[test]
    fn words_are_the_wires() {
        for s in [
            Status::Completed,
            Status::Failed,
            Status::Running,
            Status::ApprovalPending,
        ] {
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::json!(s.as_str())
            );
            assert_eq!(format!("{s:<17}|"), format!("{:<17}|", s.as_str()));
        }
        for (k, wire) in [
            (LimitKind::Memory, "memory"),
            (LimitKind::Pids, "pids"),
            (LimitKind::ContainerRemoved, "container-removed"),
            (LimitKind::ContainerStopped, "container-stopped"),
            (LimitKind::ContainerRestarted, "container-restarted"),
        ] {
            assert_eq!(
                serde_json::to_value(Limit::from(k)).unwrap(),
                serde_json::json!(wire)
            );
        }
    }
}
