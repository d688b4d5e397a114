use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::{Extension, Router};

use super::auth::Transport;
use super::handlers;
use crate::app::App;
use crate::tools::ProcessTool;

/// Request bodies above this are refused with 413 (a command is at most a few KiB; env is
/// capped at 256 KiB by the exec rules).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// What every handler shares.
pub struct ServerState {
    pub app: App,
    pub process: ProcessTool,
}

impl ServerState {
    pub fn new(app: App) -> Arc<Self> {
        let process = ProcessTool {
            registry: app.registry.clone(),
        };
        Arc::new(Self { app, process })
    }
}

/// The API for one listener; `transport` decides how callers are identified.
pub fn router(state: Arc<ServerState>, transport: Transport) -> Router {
    Router::new()
        .route("/v1/health", get(handlers::health))
        .route("/v1/sessions", get(handlers::sessions::list))
        .route("/v1/sessions/{session}", delete(handlers::sessions::remove))
        .route("/v1/sessions/{session}/exec", post(handlers::exec::exec))
        .route(
            "/v1/sessions/{session}/process",
            post(handlers::process::process),
        )
        .route(
            "/v1/sessions/{session}/events",
            get(handlers::events::events),
        )
        .route("/v1/approvals", get(handlers::approvals::list))
        .route("/v1/approvals/{id}", get(handlers::approvals::show))
        .route(
            "/v1/approvals/{id}/decision",
            post(handlers::approvals::decide),
        )
        .fallback(handlers::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(Extension(transport))
        .with_state(state)
}
