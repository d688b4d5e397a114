//! Why a call to a node failed ([`NodeError`]): each message completes "failed to …" and names
//! the node, so an agent and its operator know which machine went away or refused.

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The name is not a pairing name (docs/nodes.md, "Pairing").
    #[error("use node name `{0}`: a node name is 1 to 32 of A-Z a-z 0-9 _ -")]
    BadName(String),
    /// No `moat nodes add` for this name on this gateway.
    #[error("reach node `{0}`: no such node is paired here (`moat nodes list` shows them; `moat nodes add` pairs one)")]
    Unknown(String),
    /// `host: "node"` without `node`, and no `exec.node`.
    #[error("run on a node: name it with `node` (or set exec.node, or the session's with `moat sessions set KEY --node NAME`); `moat nodes list` shows the paired ones")]
    NoNode,
    #[error("use node URL `{0}`: it must be https://HOST:PORT, with no path")]
    BadUrl(String),
    #[error("use fingerprint `{0}`: it must be SHA256: followed by 64 hex digits (as `moat node info` prints it on the node)")]
    BadFingerprint(String),
    /// TCP did not connect, or the connection broke: the node is down or went away.
    #[error("reach node `{node}` at {url}: {why}")]
    Unreachable {
        node: String,
        url: String,
        why: String,
    },
    /// The TLS handshake failed; with a pinned fingerprint that did not match it says so.
    #[error("reach node `{node}` at {url}: its TLS certificate is not the one paired ({why}); if the node's operator made a new one, pair again with the fingerprint `moat node info` prints there")]
    Certificate {
        node: String,
        url: String,
        why: String,
    },
    /// The node answered 401: the token is unknown there (never issued, or revoked).
    #[error("use node `{0}`: it refused this gateway's pairing token (revoked or never issued there); its operator issues a new one with `moat node tokens add`")]
    TokenRefused(String),
    /// The node took longer than the call allows.
    #[error("reach node `{node}`: no answer within {secs} s")]
    TimedOut { node: String, secs: u64 },
    /// The node's answer was larger than a gateway reads.
    #[error("read the answer of node `{node}`: it is over {max} bytes")]
    TooLarge { node: String, max: usize },
    /// The node answered with an error of its own (its JSON `error`, a "failed to …" text).
    #[error("run on node `{node}`: {message}")]
    Refused {
        node: String,
        status: u16,
        message: String,
        /// The failure kind the node named, when it named one.
        kind: Option<crate::contract::FailureKind>,
    },
    /// The node answered something that is not a tool result.
    #[error("read the answer of node `{node}`: {why}")]
    BadAnswer { node: String, why: String },
    #[error("make the TLS client for nodes: {0}")]
    Tls(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{what} {path}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("make the node's certificate: {0}")]
    MakeCert(String),
}

impl NodeError {
    /// The failure kind the edges answer with (docs/http-api.md, "Errors"): a node that is
    /// away or refuses is unavailable, a bad name the caller's, a node's own refusal its own.
    pub fn kind(&self) -> crate::contract::FailureKind {
        use crate::contract::FailureKind;
        match self {
            Self::BadName(_) | Self::Unknown(_) | Self::NoNode | Self::BadUrl(_) => {
                FailureKind::Invalid
            }
            Self::BadFingerprint(_) => FailureKind::Invalid,
            Self::Refused { kind: Some(k), .. } => *k,
            Self::Refused { status, .. } if *status < 500 => FailureKind::Refused,
            Self::Store(_) | Self::Io { .. } | Self::MakeCert(_) | Self::Tls(_) => {
                FailureKind::Internal
            }
            _ => FailureKind::Unavailable,
        }
    }
}
