//! The HTTP routes of `moat serve`, and what every handler shares ([`ServerState`]).

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::{Extension, Router};

use axum::response::IntoResponse;
use tokio_util::sync::CancellationToken;

use super::auth::{identify, Channel, Identity};
use super::error::ApiError;
use super::handlers;
use crate::app::App;
use crate::mcp::{
    http_config, http_service, live_sessions, McpContext, McpHttpService, McpSessions,
};
use crate::tools::Caller;

/// Request bodies above this are refused with 413 (a command is at most a few KiB; env is
/// capped at 256 KiB by the exec rules).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// What every handler shares.
pub struct ServerState {
    pub app: Arc<App>,
    /// MCP over streamable HTTP at `/mcp`; its sessions end when `shutdown` is cancelled.
    pub mcp: McpHttpService,
    /// rmcp's live MCP sessions, to bound `mcp_owners` by them.
    pub mcp_sessions: McpSessions,
    /// Who opened each MCP session (`Mcp-Session-Id` → identity). rmcp serves `GET` and
    /// `DELETE /mcp` without calling moat, so without this any valid token holding another
    /// caller's session id could read that session's notifications. A std mutex: never held
    /// across `.await`.
    pub mcp_owners: std::sync::Mutex<std::collections::HashMap<String, Identity>>,
    /// Cancelled on SIGTERM/SIGINT; long-lived responses (event streams) end with it so the
    /// graceful shutdown does not wait on them forever.
    pub shutdown: CancellationToken,
    /// What clients check before they let this daemon act for them.
    pub daemon: DaemonInfo,
    /// The operator console's signed-in sessions (docs/console.md).
    pub console: crate::console::ConsoleSessions,
}

/// This daemon as `/v1/health` describes it to clients on the socket.
pub struct DaemonInfo {
    /// The build and configuration it runs with (`daemon::fingerprint`); a client with another
    /// one is refused, so no command runs under rules its caller did not ask for.
    pub fingerprint: String,
    /// Started on demand by a client (`--idle-exit`): such a daemon may be replaced by a
    /// client with another fingerprint when it is idle; one started by hand never is.
    pub auto_started: bool,
    /// When it started, for `moat doctor`.
    pub started_at_ms: i64,
}

impl ServerState {
    /// A daemon started by hand (`moat serve`).
    pub fn new(app: App, shutdown: CancellationToken) -> Arc<Self> {
        Self::with_origin(app, shutdown, false)
    }

    /// `auto_started`: started on demand by a client (see [`DaemonInfo`]).
    pub fn with_origin(app: App, shutdown: CancellationToken, auto_started: bool) -> Arc<Self> {
        let app = Arc::new(app);
        let (mcp, mcp_sessions) = http_service(
            McpContext::new(app.clone()),
            Arc::new(mcp_identity),
            http_config(shutdown.clone(), &[]),
        );
        let daemon = DaemonInfo {
            fingerprint: crate::daemon::fingerprint(&app.config),
            auto_started,
            started_at_ms: crate::store::now_ms(),
        };
        Arc::new(Self {
            app,
            mcp,
            mcp_sessions,
            mcp_owners: Default::default(),
            shutdown,
            daemon,
            console: Default::default(),
        })
    }
}

/// The moat session and gate identity of an MCP request, from the identity the `/mcp` layer
/// attached. An agent acts in its token's session; the operator names one with
/// `X-Moat-Session`.
fn mcp_identity(parts: &axum::http::request::Parts) -> Result<(String, Caller), String> {
    let who = parts
        .extensions
        .get::<Identity>()
        .ok_or("This request carries no identity, so it names no session.")?;
    let channel = parts
        .extensions
        .get::<Channel>()
        .copied()
        .unwrap_or(Channel::Tcp);
    let session = match who {
        Identity::Agent(a) => a.session.clone(),
        Identity::Operator => parts
            .headers
            .get("x-moat-session")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or("Name the session with an X-Moat-Session header: the operator's token reaches every session.")?,
    };
    Ok((session, who.exec_caller(channel)))
}

/// Identifies every `/mcp` request before rmcp sees it (rmcp serves GET and DELETE itself),
/// so an unknown token is a 401 and the identity travels in the request's extensions.
async fn identify_mcp(
    axum::extract::State(state): axum::extract::State<Arc<ServerState>>,
    Extension(channel): Extension<Channel>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let who = match identify(channel, req.headers(), &state.app.config.serve) {
        Ok(who) => who,
        Err(e) => return e.into_response(),
    };
    const SESSION_HEADER: &str = "mcp-session-id";
    let sid = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(sid) = &sid {
        let owner = state.mcp_owners.lock().unwrap().get(sid).cloned();
        if owner.is_some_and(|o| o != who) {
            return ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "failed to use this MCP session: it was opened with other credentials",
            )
            .into_response();
        }
    }
    let deleting = req.method() == axum::http::Method::DELETE;
    req.extensions_mut().insert(who.clone());
    req.extensions_mut().insert(channel);
    let response = next.run(req).await;
    let opened = sid.is_none() && response.headers().contains_key(SESSION_HEADER);
    // A new session is the moment to forget the owners of sessions rmcp dropped since (on
    // idle, or with their client): the table never outgrows rmcp's own.
    let live = if opened {
        Some(live_sessions(&state.mcp_sessions).await)
    } else {
        None
    };
    let mut owners = state.mcp_owners.lock().unwrap();
    if let Some(live) = &live {
        owners.retain(|id, _| live.contains(id));
    }
    match (
        &sid,
        response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok()),
    ) {
        // `initialize` created a session: it belongs to whoever opened it.
        (None, Some(new)) => {
            owners.insert(new.to_string(), who);
        }
        (Some(sid), _) if deleting && response.status().is_success() => {
            owners.remove(sid);
        }
        _ => {}
    }
    drop(owners);
    response
}

/// The API for one listener; `channel` decides how callers are identified.
pub fn router(state: Arc<ServerState>, channel: Channel) -> Router {
    let mcp = Router::new().nest_service("/mcp", state.mcp.clone()).layer(
        axum::middleware::from_fn_with_state(state.clone(), identify_mcp),
    );
    Router::new()
        .merge(mcp)
        // The operator console (docs/console.md).
        .merge(crate::console::router(state.clone()))
        .route("/v1/health", get(handlers::daemon::health))
        .route("/v1/daemon/stop", post(handlers::daemon::stop))
        .route("/metrics", get(handlers::metrics::metrics_text))
        .route("/v1/pool", get(handlers::pool::status))
        .route(
            "/v1/sessions",
            get(handlers::sessions::list).post(handlers::sessions::create),
        )
        .route("/v1/sessions/{session}", delete(handlers::sessions::remove))
        .route("/v1/sessions/{session}/exec", post(handlers::exec::exec))
        .route("/v1/sessions/{session}/run", post(handlers::run::run))
        .route(
            "/v1/sessions/{session}/reset-state",
            post(handlers::sessions::reset_state),
        )
        .route(
            "/v1/sessions/{session}/explain",
            post(handlers::explain::explain),
        )
        .route(
            "/v1/sessions/{session}/process",
            post(handlers::process::process),
        )
        .route(
            "/v1/sessions/{session}/files/read",
            post(handlers::files::read),
        )
        .route(
            "/v1/sessions/{session}/files/write",
            post(handlers::files::write),
        )
        .route(
            "/v1/sessions/{session}/files/list",
            post(handlers::files::list),
        )
        .route(
            "/v1/sessions/{session}/files/patch",
            post(handlers::files::patch),
        )
        .route(
            "/v1/sessions/{session}/events",
            get(handlers::events::events),
        )
        .route("/v1/approvals", get(handlers::approvals::list))
        .route("/v1/approvals/{id}", get(handlers::approvals::show))
        .route(
            "/v1/approvals/{id}/decision",
            post(handlers::approvals::decide),
        )
        .route("/v1/approvals/{id}/wake", post(handlers::approvals::wake))
        .fallback(handlers::not_found)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(Extension(channel))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// The owner table used to keep every MCP session rmcp had dropped: a new session now
    /// clears the ones rmcp no longer holds.
    #[tokio::test]
    async fn mcp_owners_are_bounded_by_rmcps_live_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let app = App::on_fake_engine(dir.path());
        let state = ServerState::new(app, CancellationToken::new());
        for i in 0..100 {
            state
                .mcp_owners
                .lock()
                .unwrap()
                .insert(format!("dropped-{i}"), Identity::Operator);
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}});
        let req = axum::http::Request::post("/mcp")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("x-moat-session", "s")
            .body(axum::body::Body::from(body.to_string()))
            .unwrap();
        let resp = router(state.clone(), Channel::Unix)
            .oneshot(req)
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let sid = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let owners = state.mcp_owners.lock().unwrap();
        assert_eq!(owners.len(), 1, "{:?}", owners.keys().collect::<Vec<_>>());
        assert!(owners.contains_key(&sid));
    }
}
