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
use crate::files::{FileCall, FilesError, ListRequest, PatchRequest, ReadRequest, WriteRequest};
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

/// One file call: the caller may use `session`, the body is that tool's request.
async fn serve_call<R: serde::de::DeserializeOwned>(
    state: Arc<ServerState>,
    transport: Transport,
    session: String,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    call: fn(R) -> FileCall,
) -> Result<Json<ToolResult>, ApiError> {
    caller(&state, transport, &headers, Some(&session))?;
    let req: R = json_body(body)?;
    answer(state.app.files.call(&session, &call(req)).await)
}

/// The four endpoints, each the same call with its own request type.
macro_rules! file_endpoint {
    ($name:ident, $request:ty, $variant:path) => {
        pub async fn $name(
            State(state): State<Arc<ServerState>>,
            Extension(transport): Extension<Transport>,
            PathParam(session): PathParam,
            headers: HeaderMap,
            body: Result<Bytes, BytesRejection>,
        ) -> Result<Json<ToolResult>, ApiError> {
            serve_call::<$request>(state, transport, session, headers, body, $variant).await
        }
    };
}

file_endpoint!(read, ReadRequest, FileCall::Read);
file_endpoint!(write, WriteRequest, FileCall::Write);
file_endpoint!(list, ListRequest, FileCall::List);
file_endpoint!(patch, PatchRequest, FileCall::Patch);
