//! `POST /v1/sessions/{session}/files/{read|write|list|patch}`: the file tools
//! (docs/http-api.md, "Endpoints"). An agent's token reaches only its own session, as for exec.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};

use super::{caller, json_body, PathParam};
use crate::error_chain::error_chain;
use crate::exec::ToolResult;
use crate::files::{FilesError, ListRequest, PatchRequest, ReadRequest, WriteRequest};
use crate::server::auth::Transport;
use crate::server::error::ApiError;
use crate::server::ServerState;

/// The answer for a file tool's outcome: its result, or the error with the status that says
/// whose fault it is.
fn answer(outcome: Result<ToolResult, FilesError>) -> Result<Json<ToolResult>, ApiError> {
    outcome.map(Json).map_err(|e| {
        let status = if e.is_callers() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        ApiError::new(status, format!("failed to {}", error_chain(&e)))
    })
}

pub async fn read(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    PathParam(session): PathParam,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    caller(&state, transport, &headers, Some(&session))?;
    let req: ReadRequest = json_body(body)?;
    answer(state.app.files.read(&session, &req).await)
}

pub async fn write(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    PathParam(session): PathParam,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    caller(&state, transport, &headers, Some(&session))?;
    let req: WriteRequest = json_body(body)?;
    answer(state.app.files.write(&session, &req).await)
}

pub async fn list(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    PathParam(session): PathParam,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    caller(&state, transport, &headers, Some(&session))?;
    let req: ListRequest = json_body(body)?;
    answer(state.app.files.list(&session, &req).await)
}

pub async fn patch(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    PathParam(session): PathParam,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    caller(&state, transport, &headers, Some(&session))?;
    let req: PatchRequest = json_body(body)?;
    answer(state.app.files.patch(&session, &req).await)
}
