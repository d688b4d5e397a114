//! Pause, resume and connect of E2B's sandboxes (docs/e2b.md, "Pause and resume"): a pause
//! freezes the container's processes where they are (the engine's pause, the cgroup freezer),
//! memory and all, and `connect` or `resume` thaws it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::control::{body, lifetime_ms, owned, owner, sandbox_json, ApiError};
use super::sandboxes::Sandbox;
use super::state::E2bState;
use super::wire::TimeoutRequest;
use crate::store::now_ms;

/// The body of `pause`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PauseRequest {
    /// False asks for a filesystem-only pause, which E2B resumes with a fresh boot.
    pub memory: Option<bool>,
}

/// `POST /sandboxes/{id}/pause`: 204, or 409 when it is paused already.
pub async fn pause(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<StatusCode, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    let req: PauseRequest = body(&bytes)?;
    if req.memory == Some(false) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "failed to pause the sandbox: a filesystem-only pause (memory=false) resumes with a new kernel boot, and a container shares this machine's kernel; pause with memory kept (docs/e2b.md, \"Pause and resume\")",
        ));
    }
    let _turning = sandbox.turning.lock().await;
    if sandbox.is_paused() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("sandbox \"{id}\" is already paused"),
        ));
    }
    let container = state.app.sessions.names(&sandbox.session).1.name;
    state
        .app
        .engine
        .pause_container(&container)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed to pause the sandbox: {e}"),
            )
        })?;
    sandbox.set_paused(true);
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /sandboxes/{id}/resume` (the older SDKs' call): 201 with the sandbox, or 409 when it
/// is running.
pub async fn resume(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    let req: TimeoutRequest = body(&bytes)?;
    if !thaw(&state, &sandbox).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("sandbox \"{id}\" is already running"),
        ));
    }
    sandbox.set_end_at_ms(now_ms() + lifetime_ms(&state, req.timeout));
    Ok((StatusCode::CREATED, Json(sandbox_json(&sandbox))).into_response())
}

/// `POST /sandboxes/{id}/connect` (and `/v2/…`): a running sandbox's lifetime only grows.
pub async fn connect(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    let req: TimeoutRequest = body(&bytes)?;
    // A paused sandbox is resumed (201), its lifetime counted afresh; a running one's only
    // grows (200).
    if thaw(&state, &sandbox).await? {
        sandbox.set_end_at_ms(now_ms() + lifetime_ms(&state, req.timeout));
        return Ok((StatusCode::CREATED, Json(sandbox_json(&sandbox))).into_response());
    }
    sandbox.extend_to(now_ms() + lifetime_ms(&state, req.timeout));
    Ok((StatusCode::OK, Json(sandbox_json(&sandbox))).into_response())
}

/// Thaws `sandbox` if it is paused; whether it was.
pub async fn thaw(state: &E2bState, sandbox: &Sandbox) -> Result<bool, ApiError> {
    let _turning = sandbox.turning.lock().await;
    if !sandbox.is_paused() {
        return Ok(false);
    }
    let container = state.app.sessions.names(&sandbox.session).1.name;
    state
        .app
        .engine
        .unpause_container(&container)
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed to resume the sandbox: {e}"),
            )
        })?;
    sandbox.set_paused(false);
    Ok(true)
}
