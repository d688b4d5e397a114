//! `GET /metrics`: the daemon's own figures in the Prometheus text format, for the operator
//! only (docs/http-api.md, "Metrics").

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::Who;
use crate::metrics::{metrics, Scrape, CONTENT_TYPE};
use crate::server::error::ApiError;
use crate::server::ServerState;

/// Every series, with what is held now read from the app first. An agent's token gets `403`:
/// the figures span every session.
pub async fn metrics_text(
    State(state): State<Arc<ServerState>>,
    Who(who): Who,
) -> Result<Response, ApiError> {
    who.require_operator()?;
    let app = &state.app;
    let now = Scrape {
        pending_approvals: app
            .store
            .pending_approval_ids()
            .map(|ids| ids.len() as u64)
            .unwrap_or(0),
        running_processes: app.registry.running() as u64,
    };
    let text = metrics().encode(now).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to encode the metrics: {e}"),
        )
    })?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}
