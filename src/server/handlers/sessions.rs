use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::{caller, PathParam};
use crate::server::auth::Transport;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::session::MOAT_LABEL;

/// `GET /v1/sessions`: the containers this moat manages (operator), or the caller's own.
pub async fn list(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let who = caller(&state, transport, &headers, None)?;
    let rows = state.app.store.sessions().map_err(internal)?;
    let containers = state
        .app
        .runtime
        .list_containers(MOAT_LABEL)
        .await
        .map_err(internal)?;
    let sessions: Vec<Value> = rows
        .into_iter()
        .filter(|r| who.may_use(&r.key))
        .map(|r| {
            let c = containers.iter().find(|c| c.name == r.container);
            json!({
                "session": r.key,
                "container": r.container,
                "id": c.map(|c| c.id.chars().take(12).collect::<String>()),
                "state": c.map(|c| c.state.clone()),
                "createdAtMs": r.created_at_ms,
                "lastUsedAtMs": r.last_used_ms,
            })
        })
        .collect();
    Ok(Json(json!({ "sessions": sessions })))
}

/// `DELETE /v1/sessions/{session}`: removes the container (the workspace stays).
pub async fn remove(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    PathParam(session): PathParam,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    caller(&state, transport, &headers, Some(&session))?;
    let existed = state
        .app
        .sessions
        .remove(&session)
        .await
        .map_err(internal)?;
    Ok(Json(json!({ "session": session, "removed": existed })))
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("failed to {e}"))
}
