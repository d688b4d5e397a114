//! What kind of failure an exec error is, decided once where the error is classified and
//! mapped to each edge's answer from one table: the HTTP status (docs/http-api.md, "Errors"),
//! the CLI's exit code (README, "Exit codes of `moat exec`") and the `kind` the daemon's error
//! body carries so its clients never read the English text to tell a refusal from a failure.

use serde::{Deserialize, Serialize};

/// One failure class. The variants are the rows of the edge table in [`FailureKind::edges`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The request itself is wrong (a bad field, env, workdir, an argument too long).
    Invalid,
    /// A host env name off the allowlist (`Security Violation: …`): shaped like bad input on
    /// the wire, but moat refused to run what was asked.
    Violation,
    /// moat refused to run it: the elevated gates failed.
    Refused,
    /// The operator's configuration withholds the run (a secret that cannot be given out).
    Withheld,
    /// The thing named does not exist (an approval id).
    NotFound,
    /// The state changed under the request (an approval decided, used, or its plan changed).
    Conflict,
    /// A per-identity bound was reached (pending approvals of a session).
    TooMany,
    /// The image or host lacks what the configuration needs; the operator's to fix.
    Unavailable,
    /// The engine, the disk or the store failed; moat's own failure.
    Internal,
}

/// How one failure kind answers at each edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edges {
    /// The HTTP status of the error body.
    pub http: u16,
    /// Whether the CLI exits with the refusal code (77) rather than moat's failure code (2).
    pub refusal: bool,
}

impl FailureKind {
    /// The one table the HTTP, MCP and CLI edges read.
    pub const fn edges(self) -> Edges {
        let (http, refusal) = match self {
            Self::Invalid => (400, false),
            Self::Violation => (400, true),
            Self::Refused => (403, true),
            Self::Withheld => (403, false),
            Self::NotFound => (404, false),
            Self::Conflict => (409, false),
            Self::TooMany => (429, false),
            Self::Unavailable => (503, false),
            Self::Internal => (500, false),
        };
        Edges { http, refusal }
    }

    /// The kind of an HTTP status when a body carries none (an older daemon, or an error
    /// raised before any exec classification, such as a bad token).
    pub fn from_http(status: u16) -> Self {
        match status {
            400 => Self::Invalid,
            403 => Self::Withheld,
            404 => Self::NotFound,
            409 => Self::Conflict,
            429 => Self::TooMany,
            503 => Self::Unavailable,
            _ => Self::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_table() {
        let rows = [
            (FailureKind::Invalid, 400, false, "invalid"),
            (FailureKind::Violation, 400, true, "violation"),
            (FailureKind::Refused, 403, true, "refused"),
            (FailureKind::Withheld, 403, false, "withheld"),
            (FailureKind::NotFound, 404, false, "not-found"),
            (FailureKind::Conflict, 409, false, "conflict"),
            (FailureKind::TooMany, 429, false, "too-many"),
            (FailureKind::Unavailable, 503, false, "unavailable"),
            (FailureKind::Internal, 500, false, "internal"),
        ];
        for (kind, http, refusal, wire) in rows {
            assert_eq!(kind.edges(), Edges { http, refusal }, "{kind:?}");
            assert_eq!(serde_json::to_value(kind).unwrap(), wire);
            let back: FailureKind = serde_json::from_value(wire.into()).unwrap();
            assert_eq!(back, kind);
        }
    }

    #[test]
    fn statuses_without_a_kind_are_never_refusals() {
        for status in [400, 403, 404, 409, 429, 500, 502, 503] {
            assert!(!FailureKind::from_http(status).edges().refusal, "{status}");
            if status != 502 {
                assert_eq!(FailureKind::from_http(status).edges().http, status);
            }
        }
    }
}
