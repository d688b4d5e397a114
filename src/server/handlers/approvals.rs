//! Operator-only endpoints for approvals. An agent token reaching them gets 403: agents have
//! no way to decide their own requests.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{json_body, PathParam, Who};
use crate::approvals::{ApprovalDecision, ApprovalError};
use crate::server::error::ApiError;
use crate::server::ServerState;

#[derive(Deserialize)]
pub struct ListQuery {
    /// `pending` (default), `all`, or another status.
    status: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// `allow-once`, `allow-always` or `deny`.
    decision: String,
}

fn api(e: ApprovalError) -> ApiError {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    ApiError::new(status, format!("failed to {e}"))
}

/// `GET /v1/approvals[?status=pending|all|…]`.
pub async fn list(
    State(state): State<Arc<ServerState>>,
    Who(who): Who,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    // axum's own rejection is plain text; every error here is JSON.
    let Query(q) = query.map_err(|r| {
        ApiError::new(
            r.status(),
            format!("failed to read the query: {}", r.body_text()),
        )
    })?;
    let status = match q.status.as_deref() {
        None => Some("pending"),
        Some("all") => None,
        Some(s) => Some(s),
    };
    let approvals = &state.app.approvals;
    let rows = approvals.list_named(status).map_err(api)?;
    Ok(Json(
        json!({ "approvals": rows.iter().map(|r| approvals.to_json(r)).collect::<Vec<_>>() }),
    ))
}

/// `GET /v1/approvals/{id}` (an id or its 8-character slug).
pub async fn show(
    State(state): State<Arc<ServerState>>,
    PathParam(id): PathParam,
    Who(who): Who,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    let approvals = &state.app.approvals;
    let row = approvals.get(&id).map_err(api)?;
    Ok(Json(approvals.to_json(&row)))
}

/// `POST /v1/approvals/{id}/decision` with `{"decision": "allow-once|allow-always|deny"}`.
/// The service itself refuses non-operators, so the check holds whatever route reaches it.
pub async fn decide(
    State(state): State<Arc<ServerState>>,
    PathParam(id): PathParam,
    Who(who): Who,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body: DecisionBody = json_body(body)?;
    let decision = ApprovalDecision::parse(&body.decision).map_err(api)?;
    let approvals = &state.app.approvals;
    let row = approvals
        .decide(&id, decision, &who.decider())
        .map_err(api)?;
    Ok(Json(approvals.to_json(&row)))
}

/// `POST /v1/approvals/{id}/wake`: the CLI wrote a decision on `state.db` itself and tells
/// this daemon, so the approval's waiter reads its row now instead of at the shared 2 s check
/// (docs/approvals.md, "How waiters wake"). A wake only makes the waiter read the stored row
/// again, so it grants nothing; clients of any build or configuration may send it.
pub async fn wake(
    State(state): State<Arc<ServerState>>,
    PathParam(id): PathParam,
    Who(who): Who,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    let approvals = &state.app.approvals;
    let row = approvals.get(&id).map_err(api)?;
    approvals.wakeups().wake(&row.id);
    Ok(Json(json!({ "id": row.id, "status": row.status })))
}
