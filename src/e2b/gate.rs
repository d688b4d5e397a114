//! The gate in front of every E2B route: the caller identifies itself before any body is read
//! — an API key for the control plane, a live sandbox's access token (or, for `/files`, a
//! signed URL) for the sandbox's API —
//! and its connection is then counted against that key (`server::limits`). `/health` alone
//! needs no identity (docs/e2b.md, "Health"); a connection that never identifies is closed at
//! the listener's deadline.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::sandboxes::Sandbox;
use super::state::E2bState;
use crate::server::limits::Slot;

/// Whether `path` is the sandbox's own API (identified by a sandbox's token) rather than the
/// control plane (identified by an API key).
fn is_sandbox_api(path: &str) -> bool {
    path.starts_with("/process.Process/") || path.starts_with("/filesystem.Filesystem/")
}

pub async fn gate(State(state): State<Arc<E2bState>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/health" {
        return next.run(req).await;
    }
    // The sandbox API's handlers find the identified sandbox in the request's extensions.
    let owner = if path == "/files" {
        // A token, or a signed URL, which names no sandbox (docs/e2b.md, "Signed URLs").
        match super::files::caller(&state, &mut req) {
            Ok(owner) => owner,
            Err(denied) => return denied.into_response(),
        }
    } else if is_sandbox_api(path) {
        let id = super::auth::sandbox_id(req.headers()).unwrap_or_default();
        match state.sandboxes.get(id) {
            None => return super::process::sandbox_not_found(id),
            Some(s) if !super::auth::token_matches(req.headers(), &s.access_token) => {
                return super::process::no_token()
            }
            Some(s) => {
                let owner = s.owner.clone();
                req.extensions_mut().insert(s);
                owner
            }
        }
    } else {
        match state.keys.owner(req.headers()) {
            Ok(owner) => owner,
            Err(m) => return (
                StatusCode::UNAUTHORIZED,
                Json(
                    json!({"code": 401, "message": format!("failed to identify the caller: {m}")}),
                ),
            )
                .into_response(),
        }
    };
    if let Some(slot) = req.extensions().get::<Arc<Slot>>().cloned() {
        if let Err(refusal) = state.tracker.bind_agent(&slot, &format!("e2b:{owner}")) {
            return refusal.into_response();
        }
    }
    let Some(sandbox) = req.extensions().get::<Arc<Sandbox>>().cloned() else {
        return next.run(req).await;
    };
    // While a snapshot copies the disk, calls into the sandbox wait for it: they may write
    // into the home (docs/e2b.md, "Snapshots and forks").
    let _writes = sandbox.writes.read().await;
    // A paused sandbox's processes are frozen: its own API answers as E2B's proxy does for
    // one, before anything waits on them (docs/e2b.md, "Pause and resume").
    if sandbox.is_paused() {
        return super::process::sandbox_paused(&sandbox.id);
    }
    next.run(req).await
}
