//! How a command ended, as its result reports it: the exit ([`ExitInfo`]) and the sandbox
//! limit that cut it short ([`LimitHit`]; docs/mcp.md, "Limits in results"). Which limit did
//! is the process registry's finding (`process::limit`); what it is called is the wire's.

use crate::output::human_bytes;

/// How a process ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitInfo {
    pub code: Option<i64>,
    /// `SIGTERM`, `SIGKILL`, … when moat's signal ended it.
    pub signal: Option<String>,
    pub timed_out: bool,
    pub finished_at_ms: i64,
}

impl ExitInfo {
    pub fn success(&self) -> bool {
        self.code == Some(0) && self.signal.is_none() && !self.timed_out
    }
}

/// The limit that cut a command short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// `sandbox.memory`: the OOM killer ended a process.
    Memory,
    /// `sandbox.pids_limit`: forks were refused.
    Pids,
    /// The container was removed (`docker rm -f`, `moat sessions rm`) while it ran.
    ContainerRemoved,
    /// The container stopped while it ran.
    ContainerStopped,
    /// The container was restarted while it ran (`docker restart`): it runs again, with none
    /// of the processes it had.
    ContainerRestarted,
}

impl LimitKind {
    /// The value of `details.limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Memory => "memory",
            LimitKind::Pids => "pids",
            LimitKind::ContainerRemoved => "container-removed",
            LimitKind::ContainerStopped => "container-stopped",
            LimitKind::ContainerRestarted => "container-restarted",
        }
    }

    /// The container itself ended under the command (removed, stopped, restarted), and with
    /// it every process in it.
    pub fn ends_the_container(self) -> bool {
        matches!(
            self,
            LimitKind::ContainerRemoved
                | LimitKind::ContainerStopped
                | LimitKind::ContainerRestarted
        )
    }
}

/// A limit hit, with the value in force when moat could read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitHit {
    /// Which limit.
    pub kind: LimitKind,
    /// Bytes for memory, processes for pids; `None` when unknown or not applicable.
    pub value: Option<u64>,
}

impl LimitHit {
    /// The sentence a result carries: what happened, in the terms of the config.
    pub fn sentence(&self) -> String {
        match (self.kind, self.value) {
            (LimitKind::Memory, v) => format!(
                "The sandbox's memory limit{} was reached: the kernel killed a process of this command to stay under it (sandbox.memory).",
                v.map(|b| format!(" ({})", human_bytes(b))).unwrap_or_default()
            ),
            (LimitKind::Pids, v) => format!(
                "The process limit{} was reached: the sandbox refused to start more processes while this command ran (sandbox.pids_limit).",
                v.map(|n| format!(" ({n})")).unwrap_or_default()
            ),
            (LimitKind::ContainerRemoved, _) => {
                "The session's container was removed while the command ran; the next command starts a new one (the workspace stays).".into()
            }
            (LimitKind::ContainerStopped, _) => {
                "The session's container stopped while the command ran.".into()
            }
            (LimitKind::ContainerRestarted, _) => {
                "The session's container was restarted while the command ran (docker restart), which ended every process in it, background ones included; the next command runs in the restarted container.".into()
            }
        }
    }
}
