//! Errors the daemon classified, carried to `main` as a type so the exit code comes from the
//! failure's kind (README, "Exit codes of `moat exec`"), never from the words of its message.

use moat::contract::FailureKind;
use moat::daemon::ClientError;

/// A failure the daemon named the kind of (or whose status tells it, from an older daemon).
#[derive(Debug)]
pub struct Classified {
    /// The daemon's text without its leading "failed to " (`main` adds it back).
    pub message: String,
    pub kind: FailureKind,
}

impl Classified {
    /// `kind` as the daemon sent it; an error without one is judged by nothing but "failed".
    pub fn new(message: &str, kind: Option<FailureKind>) -> Self {
        Self {
            message: message
                .strip_prefix("failed to ")
                .unwrap_or(message)
                .to_string(),
            kind: kind.unwrap_or(FailureKind::Internal),
        }
    }

    /// Whether `main` prints the message as it is: a contract sentence (docs/approvals.md),
    /// not a "failed to …" fragment.
    pub fn is_sentence(&self) -> bool {
        self.kind == FailureKind::Violation
    }
}

impl std::fmt::Display for Classified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classified {}

/// The error an answer's `{"error": …, "kind": …}` line carries, if it is one.
pub fn from_line(v: &serde_json::Value) -> Option<anyhow::Error> {
    let message = v["error"].as_str()?;
    let kind = serde_json::from_value(v["kind"].clone()).ok();
    Some(Classified::new(message, kind).into())
}

/// The daemon's refusal as a [`Classified`] error; other client errors pass through.
pub fn from_client(e: ClientError) -> anyhow::Error {
    match e {
        ClientError::Refused {
            status,
            message,
            kind,
        } => Classified::new(
            &message,
            Some(kind.unwrap_or(FailureKind::from_http(status))),
        )
        .into(),
        other => anyhow::Error::new(other).context("reach moat serve"),
    }
}
