//! `POST /v1/sessions/{session}/files/{read|write|list|patch}`: the file tools
//! (docs/http-api.md, "Endpoints"). An agent's token reaches only its own session, as for exec.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;

use super::{json_body, InSession};
use crate::contract::ToolResult;
use crate::error_chain::error_chain;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::{FileCall, FilesError, ListRequest, PatchRequest, ReadRequest, WriteRequest};

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

/// One file call in `session` (which the caller may use), the body that tool's request.
async fn serve_call<R: serde::de::DeserializeOwned>(
    state: Arc<ServerState>,
    session: String,
    body: Result<Bytes, BytesRejection>,
    call: fn(R) -> FileCall,
) -> Result<Json<ToolResult>, ApiError> {
    let req: R = json_body(body)?;
    answer(state.app.files.call(&session, &call(req)).await)
}

/// The four endpoints, each the same call with its own request type.
macro_rules! file_endpoint {
    ($name:ident, $request:ty, $variant:path) => {
        pub async fn $name(
            State(state): State<Arc<ServerState>>,
            InSession { session, .. }: InSession,
            body: Result<Bytes, BytesRejection>,
        ) -> Result<Json<ToolResult>, ApiError> {
            serve_call::<$request>(state, session, body, $variant).await
        }
    };
}

file_endpoint!(read, ReadRequest, FileCall::Read);
file_endpoint!(write, WriteRequest, FileCall::Write);
file_endpoint!(list, ListRequest, FileCall::List);
file_endpoint!(patch, PatchRequest, FileCall::Patch);
