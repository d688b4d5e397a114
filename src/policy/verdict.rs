//! What an evaluation returns.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::plan::Plan;

/// One command to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The shell command line as the agent sent it.
    pub command: &'a str,
    /// The working directory it would run in (checked against `allowed_workdirs`).
    pub cwd: &'a str,
    /// The variables the request sets on top of the configured environment: in allowlist mode
    /// they could steer an allowlisted program, so they are judged too.
    pub env: &'a BTreeMap<String, String>,
}

/// The environment of a request that sets no variables.
pub static NO_ENV: BTreeMap<String, String> = BTreeMap::new();

impl<'a> Request<'a> {
    /// A request that sets no environment variables.
    pub fn new(command: &'a str, cwd: &'a str) -> Self {
        Self {
            command,
            cwd,
            env: &NO_ENV,
        }
    }
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
    /// The inline-eval label when the segment runs code that no file vouches for
    /// (`python3 -c`, a program read from stdin), also when it missed for another reason;
    /// only set in allowlist mode with `strict_inline_eval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_eval: Option<String>,
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
    /// Labels of the inline-eval constructs found in allowlist mode with `strict_inline_eval`
    /// (also in segments that missed): such a command asks every time, so an approval of it
    /// must never be remembered as an exact-command entry.
    pub inline_eval: Vec<String>,
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
            inline_eval: Vec::new(),
        }
    }
}
