//! `POST /v1/sessions/{session}/process`: the `process` tool over HTTP.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;

use super::{json_body, InSession};
use crate::contract::ToolResult;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::{CallError, ProcessRequest, ACTIONS};

/// `POST /v1/sessions/{session}/process` with a `process` request; answers the tool result.
/// Malformed calls (unknown action, missing `sessionId`) are 400s; a well-formed call about
/// a process that does not exist is a 200 with a failed result, as the tool says.
pub async fn process(
    State(state): State<Arc<ServerState>>,
    InSession { session, .. }: InSession,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    let req: ProcessRequest = json_body(body)?;
    if req.node.is_some() {
        // The node parses it: its process tool is the one that knows the process.
        return Ok(Json(state.app.process.forward(&session, &req).await));
    }
    // The tool answers these as failed results in its own sentences; over HTTP a malformed
    // call is the client's error, said in the API's words (the body's fields) with the names
    // it could have used (docs/http-api.md, "Errors").
    let call = req.parse().map_err(|e| match e {
        CallError::UnknownAction(action) => ApiError::bad_request(format!(
            "failed to run the process action: `action` is {}, not one of {}",
            crate::output::escape_display(&action),
            ACTIONS.join(", ")
        )),
        CallError::MissingId => ApiError::bad_request(format!(
            "failed to run the process action {}: it needs `sessionId`, the process id that exec returned (action list shows them)",
            req.action.trim()
        )),
    })?;
    Ok(Json(state.app.process.call(&session, call).await))
}
