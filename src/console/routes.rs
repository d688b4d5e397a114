//! The console's paths (docs/http-api.md, "The operator console"), all under `/ui`, all behind
//! [`guard`](super::guard::guard).

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use super::error::ConsoleError;
use super::page::see_other;
use super::{approvals, assets, audit, events, guard, session, sessions, sign_in};
use crate::server::ServerState;

/// The routes, to merge into the API's router (`server::router`).
pub fn router(state: Arc<ServerState>) -> Router<Arc<ServerState>> {
    Router::new()
        .route("/ui", get(|| async { see_other("/ui/sessions") }))
        .route("/ui/", get(|| async { see_other("/ui/sessions") }))
        .route("/ui/sign-in", get(sign_in::page).post(sign_in::submit))
        .route("/ui/sign-out", post(sign_in::sign_out))
        .route("/ui/sessions", get(sessions::list))
        .route("/ui/sessions/{session}", get(session::page))
        .route(
            "/ui/sessions/{session}/remove",
            get(sessions::confirm_remove).post(sessions::remove),
        )
        .route(
            "/ui/sessions/{session}/processes/{id}/kill",
            post(session::kill),
        )
        .route("/ui/approvals", get(approvals::list))
        .route("/ui/approvals/{id}/always", get(approvals::confirm_always))
        .route("/ui/approvals/{id}/decision", post(approvals::decide))
        .route("/ui/audit", get(audit::page))
        .route("/ui/events", get(events::events))
        .route("/ui/assets/console.css", get(assets::css))
        .route("/ui/assets/console.js", get(assets::js))
        .route("/ui/{*rest}", get(not_found).post(not_found))
        .route_layer(axum::middleware::from_fn_with_state(state, guard::guard))
}

async fn not_found() -> ConsoleError {
    ConsoleError::NotFound("that console page (start at /ui)".into())
}
