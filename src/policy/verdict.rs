//! What an evaluation returns.

use serde::{Deserialize, Serialize};

use super::plan::Plan;

/// One command to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The shell command line as the agent sent it.
    pub command: &'a str,
    /// The working directory it would run in (checked against `allowed_workdirs`).
    pub cwd: &'a str,
}

/// The verdict on a whole command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// Run the plan.
    Allow,
    /// An operator must approve first.
    Ask {
        /// Why, for the operator and the agent.
        reason: String,
    },
    /// Refused.
    Deny {
        /// Why, for the operator and the agent.
        reason: String,
    },
}

impl Decision {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask { .. } => "ask",
            Self::Deny { .. } => "deny",
        }
    }

    /// The reason, if the decision is not an allow.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Allow => None,
            Self::Ask { reason } | Self::Deny { reason } => Some(reason),
        }
    }
}

/// How one segment fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentOutcome {
    /// Covered by the allowlist, a safe-bin profile, or full mode.
    Allowed,
    /// Covered, but a rule (inline eval, ask pattern) wants an operator anyway.
    Ask,
    /// Not covered: the allowlist does not vouch for it.
    Missed,
    /// Refused outright (deny pattern, privilege wrapper).
    Denied,
}

/// The per-segment part of an evaluation, for `moat policy explain` and approvals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentReport {
    /// 1-based position in the command, as shown to people.
    pub index: usize,
    /// The segment's text as parsed.
    pub raw: String,
    /// Its words after quote removal (raw text for words without a literal value).
    pub argv: Vec<String>,
    /// The executable that would run (after unwrapping wrappers), if it resolved.
    pub resolved: Option<String>,
    /// The verdict on this segment.
    pub outcome: SegmentOutcome,
    /// The rule that decided, e.g. `allowlist: /usr/bin/ls`, `safe-bin: wc`,
    /// `miss: command substitution`, `deny-pattern: sudo *`.
    pub rule: String,
}

/// The full result of [`evaluate`](super::evaluate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// The verdict.
    pub decision: Decision,
    /// Per-segment details; empty when a whole-command gate decided first.
    pub segments: Vec<SegmentReport>,
    /// What runs on allow (or on approval); `None` on deny.
    pub plan: Option<Plan>,
}

impl Evaluation {
    /// A refusal decided before any segment was looked at.
    pub(crate) fn refused(reason: impl Into<String>) -> Self {
        Self {
            decision: Decision::Deny {
                reason: reason.into(),
            },
            segments: Vec::new(),
            plan: None,
        }
    }
}
