//! Remote nodes (docs/nodes.md): another moat daemon that runs the calls a gateway forwards
//! with `host: "node"`, once both operators paired them.
//!
//! `cert` is the node's TLS identity (self-signed, made at first start), `pin` the gateway's
//! verifier that accepts exactly the certificate it paired with, `token` the pairing tokens a
//! node's operator issues, `names` the pairing names and the node's session keys for them,
//! `wire` what crosses, `client` the gateway's one call to a node, `nodes` the gateway's
//! paired nodes and the forwarding of one call, `error` why a node could not be reached.

mod cert;
mod client;
mod error;
mod names;
mod nodes;
mod pin;
mod relay;
mod resanitize;
mod token;
mod wire;

pub use cert::{fingerprint_of, NodeIdentity};
pub use client::{call, open_stream, Answer};
pub use error::NodeError;
pub use names::{check_name, node_session, MAX_NAME};
pub use nodes::{Nodes, Reach};
pub use pin::{parse_fingerprint, pinned_client_config};
pub use relay::{Awaited, Relays};
pub use resanitize::{resanitized, resanitized_text};
pub use token::{hash_token, new_token};
pub use wire::{
    ForwardedEvents, ForwardedExec, ForwardedProcess, NodeEvent, NodeInfo, EVENTS_PATH, EXEC_PATH,
    INFO_PATH, KEEPALIVE_SECS, MAX_ANSWER_BYTES, MAX_EVENT_LINE, MAX_REQUEST_BYTES, PROCESS_PATH,
    STREAMS_PER_GATEWAY,
};
