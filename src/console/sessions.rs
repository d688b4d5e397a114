//! The sessions page: every session this moat knows, its container, workspace and running
//! processes; and removing one, after a confirmation (docs/console.md, "Pages").

use std::sync::Arc;

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;

use super::chrome::Chrome;
use super::error::ConsoleError;
use super::html::html;
use super::page::{form, see_other, session_key};
use super::sign_in::{CsrfForm, Operator};
use super::time::When;
use crate::runtime::ContainerInfo;
use crate::server::ServerState;
use crate::session::MOAT_LABEL;
use crate::store::{now_ms, SessionRow};

/// One session's row.
pub struct SessionView {
    /// The session key (checked by `session::validate_key` when it was made).
    pub key: String,
    /// The container's state (`running`, `exited`), or `gone` when it was removed.
    pub state: String,
    /// The host directory mounted as `/workspace` (it outlives the container): the one the
    /// session was created with, or its default under the home.
    pub workspace: String,
    /// How the sandbox sees a host checkout's git metadata (docs/security.md, "Host
    /// workspaces"): `git writable` when the operator allowed it, `git read-only` for a
    /// guarded checkout, empty for a default or read-only workspace.
    pub git: &'static str,
    /// The image the session chose, or `sandbox.image`.
    pub image: String,
    /// When moat first made it.
    pub created: When,
    /// Its last command: what idle pruning goes by.
    pub last_used: When,
    /// Background processes still running; what removing the session would end.
    pub running: usize,
    /// Background processes moat still lists for it (running or finished).
    pub processes: usize,
}

#[derive(Template)]
#[template(path = "console/sessions.html")]
struct SessionsPage {
    chrome: Chrome,
    sessions: Vec<SessionView>,
}

/// The row of `r`, given the engine's containers.
pub fn view(
    state: &ServerState,
    r: &SessionRow,
    containers: &[ContainerInfo],
    now: i64,
) -> SessionView {
    let procs = state.app.registry.list(&r.key);
    let sessions = &state.app.sessions;
    let (_, names) = sessions.names(&r.key);
    // What the session was created with (a host workspace, an image), when it chose any.
    let setup = state
        .app
        .store
        .session_setup(&r.key)
        .ok()
        .flatten()
        .unwrap_or_default();
    SessionView {
        key: r.key.clone(),
        state: containers
            .iter()
            .find(|c| c.name == r.container)
            .map(|c| c.state.clone())
            .unwrap_or_else(|| "gone".into()),
        workspace: match &setup.workspace {
            Some(host) => host.path.clone(),
            None => sessions.workspace_dir(&names.slug).display().to_string(),
        },
        git: match &setup.workspace {
            Some(host) if host.read_only => "",
            Some(host) if host.git_writable || state.app.config.sandbox.git_writable => {
                "git writable"
            }
            Some(_) => "git read-only",
            None => "",
        },
        image: setup
            .image
            .unwrap_or_else(|| state.app.config.sandbox.image.clone()),
        created: When::at(r.created_at_ms, now),
        last_used: When::at(r.last_used_ms, now),
        running: procs.iter().filter(|p| p.is_running()).count(),
        processes: procs.len(),
    }
}

/// `GET /ui/sessions`, most recently used first.
pub async fn list(
    State(state): State<Arc<ServerState>>,
    op: Operator,
) -> Result<Response, ConsoleError> {
    let mut rows = state.app.store.sessions().map_err(ConsoleError::internal)?;
    rows.sort_by_key(|r| std::cmp::Reverse(r.last_used_ms));
    let containers = state
        .app
        .engine
        .list_containers(MOAT_LABEL)
        .await
        .map_err(ConsoleError::internal)?;
    let now = now_ms();
    let page = SessionsPage {
        chrome: Chrome::new(&state, &op, "Sessions", "sessions"),
        sessions: rows
            .iter()
            .map(|r| view(&state, r, &containers, now))
            .collect(),
    };
    Ok(html(StatusCode::OK, page.render()))
}

#[derive(Template)]
#[template(path = "console/remove.html")]
struct RemovePage {
    chrome: Chrome,
    session: SessionView,
}

/// A session this moat knows (a checked key, its row) and the engine's moat containers.
pub async fn known(
    state: &ServerState,
    key: &str,
) -> Result<(SessionRow, Vec<ContainerInfo>), ConsoleError> {
    session_key(key)?;
    let row = state
        .app
        .store
        .session(key)
        .map_err(ConsoleError::internal)?
        .ok_or_else(|| ConsoleError::NotFound(format!("session {key}")))?;
    let containers = state
        .app
        .engine
        .list_containers(MOAT_LABEL)
        .await
        .map_err(ConsoleError::internal)?;
    Ok((row, containers))
}

/// `GET /ui/sessions/{session}/remove`: what removing it ends, and the button that does.
pub async fn confirm_remove(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Path(key): Path<String>,
) -> Result<Response, ConsoleError> {
    let (row, containers) = known(&state, &key).await?;
    let page = RemovePage {
        chrome: Chrome::new(&state, &op, format!("Remove session {key}?"), "sessions"),
        session: view(&state, &row, &containers, now_ms()),
    };
    Ok(html(StatusCode::OK, page.render()))
}

/// `POST /ui/sessions/{session}/remove`: removes the container (the workspace stays), as
/// `DELETE /v1/sessions/{session}` does.
pub async fn remove(
    State(state): State<Arc<ServerState>>,
    op: Operator,
    Path(key): Path<String>,
    body: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    op.check_csrf(&form(body)?.csrf)?;
    session_key(&key)?;
    state
        .app
        .sessions
        .remove(&key)
        .await
        .map_err(ConsoleError::internal)?;
    Ok(see_other("/ui/sessions"))
}
