//! The daemon itself: `GET /v1/health` and `POST /v1/daemon/stop` (docs/http-api.md).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{json_body, Who};
use crate::server::auth::Channel;
use crate::server::error::ApiError;
use crate::server::ServerState;

/// Anyone may ask whether moat is up; only the socket's clients (the operator's own moat
/// commands) learn which daemon it is, to decide whether it may act for them.
pub async fn health(
    State(state): State<Arc<ServerState>>,
    Extension(channel): Extension<Channel>,
) -> Json<Value> {
    let mut v = json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") });
    if channel == Channel::Unix {
        let d = &state.daemon;
        v["pid"] = json!(std::process::id());
        v["fingerprint"] = json!(d.fingerprint);
        v["autoStarted"] = json!(d.auto_started);
        v["startedAtMs"] = json!(d.started_at_ms);
        v["home"] = json!(state.app.home.root().display().to_string());
        v["running"] = json!(state.app.registry.running());
        v["build"] = json!(crate::daemon::build_id());
        v["owns"] = owns(&state);
    }
    Json(v)
}

/// At most this many processes and approvals are named (the counts are always whole).
const NAMED: usize = 20;

/// What keeps this daemon: the processes it runs and the approvals it waits on, each with
/// its session, so a client it refuses (another build or configuration) and `moat daemon
/// status` can say what to end first (docs/ARCHITECTURE.md, "Daemon").
fn owns(state: &ServerState) -> Value {
    let store = &state.app.store;
    let running: Vec<_> = store
        .all_processes()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.status == crate::store::ProcessStatus::Running)
        .collect();
    let pending = store
        .approvals(Some(crate::store::ApprovalStatus::Pending), 500)
        .unwrap_or_default();
    let sessions: Vec<String> = store
        .sessions()
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.key)
        .collect();
    json!({
        "sessions": sessions,
        "processCount": running.len(),
        "processes": running.iter().take(NAMED).map(|p| json!({
            "id": p.id, "session": p.session, "background": p.background,
        })).collect::<Vec<_>>(),
        "approvalCount": pending.len(),
        "approvals": pending.iter().take(NAMED).map(|a| json!({
            "id": a.id, "session": a.session, "target": a.target,
        })).collect::<Vec<_>>(),
    })
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StopRequest {
    /// Stop only when no process runs and no approval waits (a client replacing a daemon of
    /// another build or configuration must not take anything down with it).
    #[serde(default)]
    if_idle: bool,
}

/// `POST /v1/daemon/stop`: the operator on the socket stops the daemon (gracefully, as on
/// SIGTERM).
pub async fn stop(
    State(state): State<Arc<ServerState>>,
    Extension(channel): Extension<Channel>,
    Who(who): Who,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    if channel != Channel::Unix {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "stop the daemon from its unix socket, not over TCP",
        ));
    }
    let req: StopRequest = match body {
        Ok(b) if b.is_empty() => StopRequest::default(),
        other => json_body(other)?,
    };
    let owns = owns(&state);
    // The registry's count covers processes re-attached in memory but not yet in the listing.
    if req.if_idle && (crate::daemon::busy(&owns) || state.app.registry.running() > 0) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "the daemon (pid {}) still owns {}; stop it when they are done (`moat process kill --session S --id ID`, `moat approvals deny ID`), or with `moat daemon stop --force`",
                std::process::id(),
                crate::daemon::describe_owned(&owns)
            ),
        ));
    }
    tracing::info!("stopping on request");
    state.shutdown.cancel();
    Ok(Json(json!({ "stopping": true, "pid": std::process::id() })))
}
