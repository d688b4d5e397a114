//! What can go wrong in the egress room ([`EgressError`]).

use std::path::PathBuf;

/// What can go wrong in the egress room. Messages complete "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("read host `{0}`: not a DNS name or an IP literal")]
    BadHost(String),
    #[error("read egress entry `{entry}`: {why}")]
    BadEntry { entry: String, why: String },
    #[error("listen on {addr}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reach the daemon's egress channel {path}")]
    Control {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("read the daemon's egress answer: {0}")]
    Protocol(String),
}
