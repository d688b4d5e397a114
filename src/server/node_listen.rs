//! The node's TLS listener (docs/nodes.md, "What crosses"): `[node] listen`, a router of its
//! own with the four routes of `handlers::node` and nothing else, behind TLS with the node's
//! self-signed certificate (`node::NodeIdentity`).
//!
//! Bounded before anything is read (docs/nodes.md, "Bounds"): the listener's connections
//! are counted by a `limits::Tracker` of its own. A connection must show a live pairing token
//! within ten seconds of its accept (the TLS handshake included) or it is closed; when the
//! listener is full the oldest connection that has not shown one is closed to make room; and
//! one address holds at most [`SILENT_PER_ADDRESS`] such connections, so a peer without a
//! token cannot hold the places gateways need. Past that: request bodies of at most
//! `node::MAX_REQUEST_BYTES` (413 past it), and at most `node.max_calls_per_gateway` calls
//! of one gateway in flight (429 past it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::serve::Listener;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::handlers::node as routes;
use super::limits::{Budget, LimitNames, Limited, Tracker};
use super::{Channel, NoDelay, ServeError};
use crate::app::App;
use crate::node::{
    NodeIdentity, EVENTS_PATH, EXEC_PATH, INFO_PATH, MAX_REQUEST_BYTES, PROCESS_PATH,
};

/// How long a connection may take to finish its TLS handshake, and a request to send its head.
const HANDSHAKE_SECS: u64 = 10;

/// Connections one address may hold before they show a token. A gateway's call opens a
/// connection that shows its token one round trip after the handshake, so sixteen at once
/// from one address is more than a gateway's agents start together, and a peer without a
/// token needs four addresses to fill the default 64.
pub const SILENT_PER_ADDRESS: usize = 16;

/// The keys a refusal on the node's listener names.
const NODE_LIMITS: LimitNames = LimitNames {
    hard: "node.max_connections",
    connections: "node.max_connections",
    per_token: "node.max_connections",
};

/// The node listener's caps: `node.max_connections` in all. A gateway's connections have no
/// cap of their own: its calls in flight do (`node.max_calls_per_gateway`, in the extractor),
/// and a connection of a call that just ended may still be counted when the next opens, so a
/// connection cap that tight would refuse a gateway's honest calls.
pub fn node_budget(c: &crate::config::NodeConfig) -> Budget {
    Budget::fixed(
        c.connection_cap(),
        c.connection_cap(),
        SILENT_PER_ADDRESS,
        NODE_LIMITS,
    )
}

/// The node's routes, and only those; `tracker` counts the listener's connections, which
/// the gateway's extractor binds to the gateway.
pub fn node_router(app: Arc<App>, tracker: Arc<Tracker>) -> Router {
    let state = Arc::new(routes::NodeState {
        app,
        in_flight: Default::default(),
        streams: Default::default(),
        tracker,
    });
    Router::new()
        .route(INFO_PATH, get(routes::info))
        .route(EXEC_PATH, post(routes::exec))
        .route(PROCESS_PATH, post(routes::process))
        .route(EVENTS_PATH, post(routes::events))
        .fallback(super::handlers::not_found)
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(state)
}

/// Serves gateways on `listen` until `shutdown`; `ready` is told the bound address and the
/// certificate's fingerprint.
pub async fn serve_node(
    app: Arc<App>,
    listen: SocketAddr,
    shutdown: CancellationToken,
    ready: impl FnOnce(&str, &str),
) -> Result<(), ServeError> {
    let identity = NodeIdentity::load_or_make(&app.home)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(identity.server_config()?));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            what: format!("node.listen {listen}"),
            source,
        })?;
    let bound = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    ready(&bound, &identity.fingerprint());
    let tracker = Tracker::new(node_budget(&app.config.node));
    let router = node_router(app, tracker.clone());
    let mut listener = Limited::new(NoDelay(listener), tracker, Channel::Tcp).closing_refused();
    loop {
        // The limited listener waits out accept errors (descriptors run out) itself, and
        // closes what it refuses.
        let (io, _) = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            accepted = listener.accept() => accepted,
        };
        let slot = io.slot().clone();
        let (acceptor, router, sd) = (acceptor.clone(), router.clone(), shutdown.clone());
        tokio::spawn(async move {
            let handshake =
                tokio::time::timeout(Duration::from_secs(HANDSHAKE_SECS), acceptor.accept(io));
            let Ok(Ok(tls)) = handshake.await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let mut req = req.map(axum::body::Body::new);
                    // The gateway's extractor binds the connection to the gateway it names.
                    req.extensions_mut().insert(slot.clone());
                    router.clone().oneshot(req)
                });
            // One request a connection: a gateway opens a connection per call, so a
            // connection is held only while its call (counted per gateway) or event stream
            // (counted too) is; an idle kept-alive one would be held by nothing.
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(HANDSHAKE_SECS))
                .serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                _ = conn => {}
                _ = sd.cancelled() => {}
            }
        });
    }
}
