//! `/v1/sessions`: list, create, inspect and remove sessions over HTTP.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::Query;
use serde::Deserialize;

use super::{json_body, InSession, Who};
use crate::config::WorkspaceAccess;
use crate::error_chain::error_chain;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::session::setup::{inspect, WorkspaceMode};
use crate::session::SessionError;
use crate::session::MOAT_LABEL;
use crate::store::SessionSetup;

/// `GET /v1/sessions`: the containers this moat manages (operator), or the caller's own.
pub async fn list(
    State(state): State<Arc<ServerState>>,
    Who(who): Who,
) -> Result<Json<Value>, ApiError> {
    let rows = state.app.store.sessions().map_err(internal)?;
    let containers = state
        .app
        .engine
        .list_containers(MOAT_LABEL)
        .await
        .map_err(internal)?;
    let sessions: Vec<Value> = rows
        .into_iter()
        .filter(|r| who.may_use(&r.key))
        .map(|r| {
            let c = containers.iter().find(|c| c.name == r.container);
            let ws = workspace_of(&state, &r.key);
            json!({
                "session": r.key,
                "container": r.container,
                "id": c.map(|c| c.id.chars().take(12).collect::<String>()),
                "state": c.map(|c| c.state.clone()),
                "createdAtMs": r.created_at_ms,
                "lastUsedAtMs": r.last_used_ms,
                "workspace": ws.path,
                "workspaceReadOnly": ws.read_only,
                "hostWorkspace": ws.host,
                "gitWritable": ws.git_writable,
            })
        })
        .collect();
    Ok(Json(json!({ "sessions": sessions })))
}

/// The query of `DELETE /v1/sessions/{session}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveQuery {
    /// Also delete the directories moat made for the session (its default workspace and its
    /// run directory; never a host workspace). Operators only: `moat run` leaves nothing.
    #[serde(default)]
    pub purge: bool,
}

/// `DELETE /v1/sessions/{session}[?purge=true]`: removes the container (the workspace stays
/// unless purged).
pub async fn remove(
    State(state): State<Arc<ServerState>>,
    InSession { who, session }: InSession,
    query: Result<Query<RemoveQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|e| {
        ApiError::bad_request(format!("failed to read the query: {}", e.body_text()))
    })?;
    if query.purge {
        who.require_operator()?;
    }
    let removed = state
        .app
        .remove_session(&session, query.purge, &who.decider().label())
        .await
        .map_err(internal)?;
    Ok(Json(json!({
        "session": session,
        "removed": removed.existed,
        "endedApprovals": removed.ended_approvals,
        "endedProcesses": removed.ended_processes,
    })))
}

/// `POST /v1/sessions/{session}/reset-state`: forgets the directory and variables a sticky
/// session carries (docs/mcp.md, "Sticky cwd and env"); the next command starts afresh.
/// An agent may reset its own session.
pub async fn reset_state(
    State(state): State<Arc<ServerState>>,
    InSession { session, .. }: InSession,
) -> Result<Json<Value>, ApiError> {
    state
        .app
        .store
        .reset_sticky_state(&session, false)
        .map_err(internal)?;
    Ok(Json(json!({ "session": session, "reset": true })))
}

/// A session's workspace as the listing shows it.
struct WorkspaceView {
    /// The host directory: the session's own checkout, or the default moat made for it.
    path: String,
    /// Mounted read-only into the sandbox.
    read_only: bool,
    /// An operator's directory (`--workspace`), not one moat made.
    host: bool,
    /// The sandbox may write the checkout's git metadata: `--git-writable` or
    /// `sandbox.git_writable` (docs/security.md, "Host workspaces"). Always false for a default
    /// workspace, where nothing is guarded.
    git_writable: bool,
}

/// A session's host workspace, or the default directory moat made for it.
fn workspace_of(state: &ServerState, session: &str) -> WorkspaceView {
    let sessions = &state.app.sessions;
    match sessions.host_workspace(session).ok().flatten() {
        Some(row) => WorkspaceView {
            git_writable: !row.read_only
                && (row.git_writable || state.app.config.sandbox.git_writable),
            path: row.path,
            read_only: row.read_only,
            host: true,
        },
        None => {
            let (_, names) = sessions.names(session);
            WorkspaceView {
                path: sessions.workspace_dir(&names.slug).display().to_string(),
                read_only: state.app.config.sandbox.workspace_access == WorkspaceAccess::Ro,
                host: false,
                git_writable: false,
            }
        }
    }
}

/// The body of `POST /v1/sessions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateRequest {
    pub session: String,
    /// An absolute host directory to be the session's `/workspace`.
    pub workspace: Option<String>,
    /// Mount it read-only (only with `workspace`).
    #[serde(default)]
    pub read_only: bool,
    /// Let the sandbox write its git metadata (only with `workspace`; docs/security.md,
    /// "Host workspaces"). Off, `.git` is mounted read-only.
    #[serde(default)]
    pub git_writable: bool,
    /// The image instead of `sandbox.image`.
    pub image: Option<String>,
    /// `none` or `bridge` instead of `sandbox.network`.
    pub network: Option<String>,
}

/// `POST /v1/sessions`: creates a session's container, with a host directory as its
/// workspace when asked. Operators only: an agent never chooses a host path
/// (docs/security.md, "Host workspaces").
pub async fn create(
    State(state): State<Arc<ServerState>>,
    Who(who): Who,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    who.require_operator()?;
    let req: CreateRequest = json_body(body)?;
    crate::session::validate_key(&req.session)
        .map_err(|e| ApiError::bad_request(format!("failed to {e}")))?;
    if req.read_only && req.workspace.is_none() {
        return Err(ApiError::bad_request(
            "failed to create the session: readOnly needs a workspace",
        ));
    }
    if req.git_writable && req.workspace.is_none() {
        return Err(ApiError::bad_request(
            "failed to create the session: gitWritable needs a workspace",
        ));
    }
    let sessions = &state.app.sessions;
    let workspace = match &req.workspace {
        Some(dir) => {
            let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let mode = WorkspaceMode {
                read_only: req.read_only,
                git_writable: req.git_writable,
            };
            let row = inspect(
                std::path::Path::new(dir),
                mode,
                &state.app.config.sandbox,
                home.as_deref(),
            )
            .map_err(|e| session_error(SessionError::Choice(e)))?;
            Some(row)
        }
        None => None,
    };
    let setup = SessionSetup {
        workspace,
        image: req.image,
        network: req.network,
        // The operator's runtime for every session made here (`sandbox.runtime`); a session's
        // own runtime is E2B's setting only (docs/e2b.md).
        runtime: None,
        root: false,
        home: None,
    };
    let c = sessions
        .create(&req.session, &setup)
        .await
        .map_err(session_error)?;
    let ws = workspace_of(&state, &req.session);
    let image = match state.app.engine.inspect_container(&c.name).await {
        Ok(Some(info)) => Some(info.image),
        _ => None,
    };
    Ok(Json(json!({
        "image": image,
        "session": req.session,
        "container": c.name,
        "workspace": ws.path,
        "workspaceReadOnly": ws.read_only,
        "hostWorkspace": ws.host,
        "gitWritable": ws.git_writable,
        "user": format!("{}:{}", c.owner.0, c.owner.1),
        "warning": c.warning,
    })))
}

/// A conflict with the session's workspace is a 409, a refused directory a 400 (the kind's
/// row of the edge table, `crate::contract::FailureKind`).
fn session_error(e: SessionError) -> ApiError {
    ApiError::of_kind(e.kind(), format!("failed to {}", error_chain(&e)))
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("failed to {e}"))
}
