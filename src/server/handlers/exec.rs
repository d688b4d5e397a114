use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};

use axum::response::{IntoResponse, Response};

use super::{caller, exec_caller, json_body, PathParam};
use crate::exec::{ExecRequest, ToolResult};
use crate::server::auth::Transport;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::session::SessionError;
use crate::tools::ExecError;

/// `POST /v1/sessions/{session}/exec` with an `exec` request; answers the tool result. On the
/// socket, `X-Moat-Wait: end` (the CLI) waits for the command to end and answers lines of
/// JSON instead (see `exec_wait`).
pub async fn exec(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
    PathParam(session): PathParam,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = caller(&state, transport, &headers, Some(&session))?;
    let req: ExecRequest = json_body(body)?;
    let exec_caller = exec_caller(&who, transport, &headers, &session)?;
    if super::exec_wait::wanted(transport, &headers)? {
        return Ok(super::exec_wait::answer(state, exec_caller, session, req));
    }
    match state
        .app
        .exec
        .run_for(&exec_caller, &session, &req, false)
        .await
    {
        Ok(result) => Ok(Json::<ToolResult>(result).into_response()),
        Err(e) => Err(ApiError::new(status_of(&e), format!("failed to {e}"))),
    }
}

/// Bad input is the caller's (4xx); the engine or the disk failing is ours (5xx).
pub(super) fn status_of(e: &ExecError) -> StatusCode {
    match e {
        ExecError::Request(_)
        | ExecError::Policy(_)
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
