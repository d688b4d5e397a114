//! `POST /v1/sessions/{session}/explain`: the verdict `exec` would give (docs/policy.md,
//! "Explain").

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::{json_body, InSession};
use crate::policy::{explain_json, explain_text};
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::ExplainRequest;

/// `POST /v1/sessions/{session}/explain` (operator only): the verdict `exec` would give, with
/// names resolved in the session's sandbox (its container is created if it does not run), as
/// JSON and as the text `moat policy explain` prints (docs/policy.md, "Explain").
pub async fn explain(
    State(state): State<Arc<ServerState>>,
    InSession { who, session }: InSession,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    let req: ExplainRequest = json_body(body)?;
    match state.app.exec.explain(&session, &req).await {
        Ok(e) => Ok(Json(json!({
            "explain": explain_json(&e.eval),
            "text": explain_text(&e.eval),
            "resolvedIn": e.resolved_in,
        }))),
        Err(e) => Err(super::exec_failure::exec_failure(&e)),
    }
}
