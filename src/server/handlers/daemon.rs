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
use crate::server::auth::Transport;
use crate::server::error::ApiError;
use crate::server::ServerState;

/// Anyone may ask whether moat is up; only the socket's clients (the operator's own moat
/// commands) learn which daemon it is, to decide whether it may act for them.
pub async fn health(
    State(state): State<Arc<ServerState>>,
    Extension(transport): Extension<Transport>,
) -> Json<Value> {
    let mut v = json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") });
    if transport == Transport::Unix {
        let d = &state.daemon;
        v["pid"] = json!(std::process::id());
        v["fingerprint"] = json!(d.fingerprint);
        v["autoStarted"] = json!(d.auto_started);
        v["startedAtMs"] = json!(d.started_at_ms);
        v["home"] = json!(state.app.home.root().display().to_string());
        v["running"] = json!(state.app.registry.running());
    }
    Json(v)
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
    Extension(transport): Extension<Transport>,
    Who(who): Who,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    if transport != Transport::Unix {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "stop the daemon from its unix socket, not over TCP",
        ));
    }
    let req: StopRequest = match body {
        Ok(b) if b.is_empty() => StopRequest::default(),
        other => json_body(other)?,
    };
    let running = state.app.registry.running();
    let pending = state
        .app
        .store
        .pending_approval_ids()
        .map(|s| s.len())
        .unwrap_or(0);
    if req.if_idle && (running > 0 || pending > 0) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "the daemon (pid {}) still owns {running} running processes and {pending} pending approvals; stop it when they are done",
                std::process::id()
            ),
        ));
    }
    tracing::info!("stopping on request");
    state.shutdown.cancel();
    Ok(Json(json!({ "stopping": true, "pid": std::process::id() })))
}
