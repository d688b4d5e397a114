//! The node's TLS listener (docs/nodes.md, "What crosses"): `[node] listen`, a router of its
//! own with the three routes of `handlers::node` and nothing else, behind TLS with the node's
//! self-signed certificate (`node::NodeIdentity`).
//!
//! Bounded before anything is read: at most `node.max_connections` connections at once (one
//! past it is closed at accept), ten seconds for the TLS handshake and for each request's
//! head, request bodies of at most `node::MAX_REQUEST_BYTES` (413 past it), and at most
//! `node.max_calls_per_gateway` calls of one gateway in flight (429 past it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::handlers::node as routes;
use super::ServeError;
use crate::app::App;
use crate::node::{NodeIdentity, EXEC_PATH, INFO_PATH, MAX_REQUEST_BYTES, PROCESS_PATH};

/// How long a connection may take to finish its TLS handshake, and a request to send its head.
const HANDSHAKE_SECS: u64 = 10;

/// The node's routes, and only those.
pub fn node_router(app: Arc<App>) -> Router {
    let state = Arc::new(routes::NodeState {
        app,
        in_flight: Default::default(),
    });
    Router::new()
        .route(INFO_PATH, get(routes::info))
        .route(EXEC_PATH, post(routes::exec))
        .route(PROCESS_PATH, post(routes::process))
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
    let slots = Arc::new(tokio::sync::Semaphore::new(
        app.config.node.connection_cap(),
    ));
    let router = node_router(app);
    loop {
        let (tcp, _) = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait rather than spin.
                    tracing::warn!("node listener: failed to accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Full: this connection is closed unread.
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, router, sd) = (acceptor.clone(), router.clone(), shutdown.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let handshake =
                tokio::time::timeout(Duration::from_secs(HANDSHAKE_SECS), acceptor.accept(tcp));
            let Ok(Ok(tls)) = handshake.await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    router.clone().oneshot(req.map(axum::body::Body::new))
                });
            let conn = hyper::server::conn::http1::Builder::new()
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
