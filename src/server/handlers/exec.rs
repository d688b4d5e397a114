//! `POST /v1/sessions/{session}/exec`: the exec tool over HTTP (docs/http-api.md).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};

use axum::response::{IntoResponse, Response};

use super::exec_failure::exec_failure;
use super::{exec_caller, json_body, InSession};
use crate::contract::ToolResult;
use crate::server::auth::Channel;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::ExecRequest;

/// `POST /v1/sessions/{session}/exec` with an `exec` request; answers the tool result. On the
/// socket, `X-Moat-Wait: end` (the CLI) waits for the command to end and answers lines of
/// JSON instead (see `exec_wait`).
pub async fn exec(
    State(state): State<Arc<ServerState>>,
    Extension(channel): Extension<Channel>,
    InSession { who, session }: InSession,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: ExecRequest = json_body(body)?;
    let exec_caller = exec_caller(&who, channel, &headers, &session)?;
    if super::exec_wait::wanted(channel, &headers)? {
        return Ok(super::exec_wait::answer(state, exec_caller, session, req));
    }
    match state
        .app
        .exec
        .run_for(&exec_caller, &session, &req, false)
        .await
    {
        Ok(result) => Ok(Json::<ToolResult>(result).into_response()),
        Err(e) => Err(exec_failure(&e)),
    }
}
