//! `moat serve`: the HTTP API (axum) on the unix socket and, with tokens, on TCP.
//!
//! `auth` turns a request into an identity, `error` is the JSON error shape, `routes` maps
//! paths to handlers, `handlers` holds one function per endpoint, `listen` owns the sockets,
//! `limits` bounds the connections and event streams one client may hold, `peer` and
//! `tcp_peer` refuse callers that run inside a host command (`host::local_addrs` says which TCP
//! clients are on this machine), `fit` refuses socket clients of another build or
//! configuration, `idle` stops a daemon that has nothing left to own, `node_listen` serves
//! paired gateways on the node's TLS listener (docs/nodes.md), `node_calls` counts each
//! gateway's calls in flight there.

mod auth;
mod error;
mod fit;
mod handlers;
mod idle;
pub mod limits;
mod listen;
mod no_delay;
mod node_calls;
mod node_listen;

mod peer;
mod peer_share;
mod routes;
mod tcp_peer;

pub use auth::{identify, secret_eq, Channel, Identity};
pub use listen::{serve, ServeError};
pub use no_delay::NoDelay;
pub use node_calls::InFlight;
pub use node_listen::{node_router, serve_node};
pub use routes::{router, DaemonInfo, ServerState};
