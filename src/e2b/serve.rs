//! The E2B listener: one TCP address for the control plane and the in-sandbox API
//! (docs/e2b.md, "One address"), and the task that ends sandboxes whose lifetime is over.

use std::sync::Arc;

use axum::routing::{delete, get, post};
use axum::Router;
use tokio_util::sync::CancellationToken;

use super::state::E2bState;
use super::{control, process};
use crate::app::App;

/// The most a request body may hold (a Connect message and its envelope).
const MAX_BODY: usize = super::connect::MAX_MESSAGE + 64 * 1024;

/// Every route E2B's SDK calls that moat serves, on `state`.
pub fn router(state: Arc<E2bState>) -> Router {
    let p = |m: &str| format!("/process.Process/{m}");
    Router::new()
        .route("/sandboxes", post(control::create).get(control::list))
        .route("/v2/sandboxes", post(control::create).get(control::list))
        .route("/sandboxes/{id}", get(control::info).delete(control::kill))
        .route("/sandboxes/{id}/connect", post(control::connect))
        .route("/v2/sandboxes/{id}/connect", post(control::connect))
        .route("/sandboxes/{id}/timeout", post(control::set_timeout))
        .route("/sandboxes/{id}/pause", post(control::not_served))
        .route("/sandboxes/{id}/resume", post(control::not_served))
        .route("/sandboxes/{id}/metrics", get(control::not_served))
        .route("/sandboxes/{id}/snapshots", post(control::not_served))
        .route("/sandboxes/{id}/fork", post(control::not_served))
        .route("/templates/{id}", delete(control::not_served))
        .route("/health", get(process::health))
        .route(&p("Start"), post(process::start))
        .route(&p("Connect"), post(process::connect_to))
        .route(&p("List"), post(process::list))
        .route(&p("SendSignal"), post(process::send_signal))
        .route(&p("SendInput"), post(process::send_input))
        .route(&p("CloseStdin"), post(process::close_stdin))
        .route(&p("Update"), post(process::update))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// Serves E2B's API on `e2b.listen` until `shutdown`, then ends the sandboxes it served.
/// `bound` is told the address once the socket listens.
pub async fn serve(
    app: Arc<App>,
    shutdown: CancellationToken,
    bound: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    let addr = app.config.e2b.listen.trim().to_string();
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    bound(listener.local_addr()?);
    let state = E2bState::new(app);
    let reaper = tokio::spawn(state.clone().reap(shutdown.clone()));
    let stop = shutdown.clone();
    let served = axum::serve(listener, router(state))
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    shutdown.cancel();
    let _ = reaper.await;
    served
}
