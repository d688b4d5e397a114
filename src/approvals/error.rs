//! Why an approval operation failed ([`ApprovalError`]).

/// Why an approval operation failed. Messages complete "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("decide approval {0}: only an operator may decide approvals")]
    Forbidden(String),
    #[error("find approval {0}: no such approval")]
    NotFound(String),
    #[error("find approval {0}: the prefix matches several approvals; use more of the id")]
    Ambiguous(String),
    #[error("decide approval {id}: it is {status} already{detail}")]
    NotPending {
        id: String,
        status: crate::store::ApprovalStatus,
        detail: String,
    },
    #[error("decide approval {id}: `{decision}` is not offered (allowed: {allowed})")]
    DecisionUnavailable {
        id: String,
        decision: String,
        allowed: String,
    },
    #[error("parse decision `{0}`: use allow-once, allow-always or deny")]
    UnknownDecision(String),
    #[error("run approval {id}: it was {status}, not approved and unused")]
    NotUsable {
        id: String,
        status: crate::store::ApprovalStatus,
    },
    #[error("run approval {id}: the {what} changed since it was approved")]
    PlanChanged { id: String, what: String },
    #[error("add allowlist entry `{0}`: a shell or interpreter runs any program; allow the exact command instead")]
    Interpreter(String),
    #[error("add allowlist entry `{entry}`: {reason}")]
    BadEntry { entry: String, reason: String },
    #[error("read approval {0}: the stored record is damaged")]
    Corrupt(String),
    #[error("request approval in session {session}: it already has {max} pending approvals, the most allowed (approvals.max_pending_per_session = {max}); decide some first")]
    TooManyPending { session: String, max: u32 },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl ApprovalError {
    /// The failure class the edges map (`crate::contract::FailureKind`).
    pub fn kind(&self) -> crate::contract::FailureKind {
        use crate::contract::FailureKind;
        match self {
            Self::Forbidden(_) => FailureKind::Withheld,
            Self::NotFound(_) => FailureKind::NotFound,
            Self::Ambiguous(_)
            | Self::NotPending { .. }
            | Self::NotUsable { .. }
            | Self::PlanChanged { .. } => FailureKind::Conflict,
            Self::DecisionUnavailable { .. }
            | Self::UnknownDecision(_)
            | Self::Interpreter(_)
            | Self::BadEntry { .. } => FailureKind::Invalid,
            Self::TooManyPending { .. } => FailureKind::TooMany,
            Self::Corrupt(_) | Self::Store(_) => FailureKind::Internal,
        }
    }

    /// The HTTP status an API handler should answer with.
    pub fn http_status(&self) -> u16 {
        self.kind().edges().http
    }
}
