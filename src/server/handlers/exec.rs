use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};

use super::{caller, json_body, PathParam};
use crate::exec::{ExecRequest, ToolResult};
use crate::server::auth::Transport;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::session::SessionError;
use crate::tools::ExecError;

/// `POST /v1/sessions/{session}/exec` with an `exec` request; answers the tool result.
pub async fn exec(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    PathParam(session): PathParam,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    let who = caller(&state, transport, &headers, Some(&session))?;
    let req: ExecRequest = json_body(body)?;
    match state
        .app
        .exec
        .run_for(&who.exec_caller(transport), &session, &req, false)
        .await
    {
        Ok(result) => Ok(Json(result)),
        Err(e) => Err(ApiError::new(status_of(&e), format!("failed to {e}"))),
    }
}

/// Bad input is the caller's (4xx); the engine or the disk failing is ours (5xx).
fn status_of(e: &ExecError) -> StatusCode {
    match e {
        ExecError::Request(_)
        | ExecError::Env(_)
        | ExecError::ArgLimit(_)
        | ExecError::Workdir(_)
        | ExecError::HostEnv(_)
        | ExecError::HostWorkdir { .. } => StatusCode::BAD_REQUEST,
        // A file the plan runs that moat cannot bind is the caller's; copying it is ours.
        ExecError::HostFile(crate::host::BindError::Copy { .. }) => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        ExecError::HostFile(_) => StatusCode::BAD_REQUEST,
        ExecError::Elevated(_) | ExecError::Secrets(_) => StatusCode::FORBIDDEN,
        ExecError::Approval(a) => {
            StatusCode::from_u16(a.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        }
        ExecError::Session(SessionError::Key(_)) => StatusCode::BAD_REQUEST,
        // The image (or host) lacks what the config needs: the operator's to fix.
        ExecError::Session(SessionError::NoImage(_)) | ExecError::NoShell { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
