//! [`ExecError`]: every way one `exec` call fails, and the [`FailureKind`] each is, so the
//! HTTP, MCP and CLI edges answer from one table (`crate::contract::FailureKind`).

use super::elevated::ElevatedError;
use super::request::RequestError;
use super::workdir::WorkdirError;
use crate::approvals::ApprovalError;
use crate::contract::{EnvError, FailureKind};
use crate::host::HostEnvError;
use crate::process::ProcessError;
use crate::session::SessionError;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Workdir(#[from] WorkdirError),
    /// The command or an env string would not fit in one exec (docs/security.md).
    #[error(transparent)]
    ArgLimit(#[from] crate::contract::ArgLimitError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error(transparent)]
    Elevated(#[from] ElevatedError),
    /// `Security Violation: …`, naming every refused key.
    #[error(transparent)]
    HostEnv(#[from] HostEnvError),
    #[error("use host workdir {dir}: {reason}")]
    HostWorkdir { dir: String, reason: String },
    /// A host workdir outside the ones the operator allows (docs/security.md, "Host
    /// commands").
    #[error("run a host command in {dir}: it is outside the host workdir ({base}) and elevated.allowed_workdirs; an operator may add it (or a parent) to elevated.allowed_workdirs")]
    HostWorkdirRefused { dir: String, base: String },
    #[error("prepare the host run directory {dir}")]
    HostRunDir {
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// A file the plan runs cannot be bound to the approval.
    #[error(transparent)]
    HostFile(#[from] crate::host::BindError),
    #[error(transparent)]
    Secrets(#[from] crate::secrets::SecretsError),
    /// `policy explain` was asked about a policy that is not valid (a bad allowlist entry).
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// `sandbox.shell` / `elevated.shell` names a shell that is not there.
    /// A call for a paired node that could not be forwarded, or that the node refused
    /// (docs/nodes.md, "When a node goes away").
    #[error(transparent)]
    Node(#[from] crate::node::NodeError),
    #[error("run with {key} = \"{shell}\": {place} has no `{shell}` on its PATH (install it, or set {key} = \"sh\")")]
    NoShell {
        key: &'static str,
        shell: &'static str,
        place: String,
    },
}

impl ExecError {
    /// The failure class the edges map (docs/http-api.md, "Errors"; README, "Exit codes").
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Request(_)
            | Self::Policy(_)
            | Self::Env(_)
            | Self::ArgLimit(_)
            | Self::Workdir(_)
            | Self::HostWorkdir { .. } => FailureKind::Invalid,
            Self::HostEnv(_) => FailureKind::Violation,
            // A file the plan runs that moat cannot bind is the caller's; copying it is ours.
            Self::HostFile(
                crate::host::BindError::Copy { .. } | crate::host::BindError::Fetch { .. },
            ) => FailureKind::Internal,
            Self::HostFile(_) => FailureKind::Invalid,
            Self::Elevated(_) | Self::HostWorkdirRefused { .. } => FailureKind::Refused,
            Self::Secrets(_) => FailureKind::Withheld,
            Self::Node(n) => n.kind(),
            Self::Approval(a) => a.kind(),
            Self::Session(SessionError::Key(_)) => FailureKind::Invalid,
            Self::Session(SessionError::Choice(c)) if c.is_callers() => FailureKind::Invalid,
            // The image (or host) lacks what the config needs: the operator's to fix.
            Self::Session(SessionError::NoImage(_)) | Self::NoShell { .. } => {
                FailureKind::Unavailable
            }
            Self::Session(_) | Self::Process(_) | Self::HostRunDir { .. } => FailureKind::Internal,
        }
    }
}
