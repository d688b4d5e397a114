use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;

use super::{json_body, InSession};
use crate::exec::ToolResult;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::{ProcessRequest, ACTIONS};

/// `POST /v1/sessions/{session}/process` with a `process` request; answers the tool result.
/// Malformed calls (unknown action, missing `sessionId`) are 400s; a well-formed call about
/// a process that does not exist is a 200 with a failed result, as the tool says.
pub async fn process(
    State(state): State<Arc<ServerState>>,
    InSession { session, .. }: InSession,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    let req: ProcessRequest = json_body(body)?;
    let action = req.action.trim().to_ascii_lowercase();
    if !ACTIONS.contains(&action.as_str()) {
        return Err(ApiError::bad_request(format!(
            "Unknown action {} (one of: {})",
            req.action,
            ACTIONS.join(", ")
        )));
    }
    if action != "list"
        && req
            .process_id
            .as_deref()
            .is_none_or(|s| s.trim().is_empty())
    {
        return Err(ApiError::bad_request(
            "sessionId is required for this action.",
        ));
    }
    Ok(Json(state.app.process.run(&session, &req).await))
}
