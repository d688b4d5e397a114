//! Owns the listeners: the operator's unix socket (always) and TCP (when configured).

use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::auth::Channel;
use super::limits;
use super::routes::{router, ServerState};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("listen on {what}")]
    Bind {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("listen on {0}: another moat is already serving there")]
    InUse(String),
    #[error("serve on TCP: set serve.operator_token or serve.agents, since TCP callers must present a token")]
    NoTokens,
    #[error(transparent)]
    Lock(#[from] crate::daemon::LockError),
    /// The node's certificate or TLS set-up (docs/nodes.md).
    #[error(transparent)]
    Node(#[from] crate::node::NodeError),
}

/// Serves until `shutdown` is cancelled. `tcp` overrides `serve.tcp`; `idle_exit` stops the
/// daemon after that long with nothing to own (a daemon started on demand). `tracker` holds
/// the connection caps every listener of this daemon counts against (`limits::start`).
pub async fn serve(
    state: Arc<ServerState>,
    tcp: Option<SocketAddr>,
    idle_exit: Option<std::time::Duration>,
    shutdown: CancellationToken,
    tracker: Arc<limits::Tracker>,
    ready: impl FnOnce(&str),
) -> Result<(), ServeError> {
    let config = &state.app.config.serve;
    let tcp = tcp.or_else(|| config.tcp.parse().ok());
    if tcp.is_some() && config.operator_token.is_empty() && config.agents.is_empty() {
        return Err(ServeError::NoTokens);
    }
    let home = &state.app.home;
    // One daemon per home, for the whole of its life (released when this process ends).
    let _lock = crate::daemon::serve_lock(&home.daemon_lock(), home.root())?;
    let path = home.socket();
    if path.exists() {
        // A socket that still answers belongs to a running moat; a dead one is stale.
        if tokio::net::UnixStream::connect(&path).await.is_ok() {
            return Err(ServeError::InUse(path.display().to_string()));
        }
        let _ = std::fs::remove_file(&path);
    }
    let unix = tokio::net::UnixListener::bind(&path).map_err(|source| ServeError::Bind {
        what: path.display().to_string(),
        source,
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        ServeError::Bind {
            what: path.display().to_string(),
            source,
        }
    })?;
    let bound_id = std::fs::symlink_metadata(&path)
        .map(|m| (m.dev(), m.ino()))
        .ok();
    let recovered = state.app.registry.recover_all();
    let approvals = state.app.exec.recover_approvals();
    tracing::info!(
        recovered,
        approvals,
        "re-attached processes and approval waiters"
    );
    super::idle::spawn(
        state.clone(),
        tracker.clone(),
        path.clone(),
        idle_exit,
        shutdown.clone(),
    );
    let mut tasks = Vec::new();
    tokio::spawn(prune_loop(state.clone(), shutdown.clone()));
    // Egress proxies of running sessions get their control socket back at once, not only
    // when a command next touches the session (docs/security.md, "Network egress").
    let adopt = state.clone();
    tokio::spawn(async move { adopt.app.sessions.adopt_egress().await });
    // Every request on the socket first proves it does not come from a host command (the
    // peer is recorded at accept by `limits::Limited`).
    let unix_router = router(state.clone(), Channel::Unix)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            super::fit::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            super::peer::guard,
        ));
    let unix_app =
        limits::PerConnection::new(unix_router, state.clone(), tracker.clone(), Channel::Unix);
    let unix = limits::Limited::new(unix, tracker.clone(), Channel::Unix);
    let sd = shutdown.clone();
    tasks.push(tokio::spawn(async move {
        axum::serve(unix, unix_app)
            .with_graceful_shutdown(sd.cancelled_owned())
            .await
    }));
    let mut where_ = format!("unix:{}", path.display());
    if let Some(addr) = tcp {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind {
                what: addr.to_string(),
                source,
            })?;
        let bound = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        where_.push_str(&format!(" tcp:{bound}"));
        // A local client inside a host command is refused whatever token it holds.
        let tcp_router = router(state.clone(), Channel::Tcp).layer(
            axum::middleware::from_fn_with_state(state.clone(), super::tcp_peer::guard),
        );
        let tcp_app =
            limits::PerConnection::new(tcp_router, state.clone(), tracker.clone(), Channel::Tcp);
        let listener = limits::Limited::new(listener, tracker.clone(), Channel::Tcp);
        let sd = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            axum::serve(listener, tcp_app)
                .with_graceful_shutdown(sd.cancelled_owned())
                .await
        }));
    }
    ready(&where_);
    for t in tasks {
        let _ = t.await;
    }
    // Only our own socket: a replaced one belongs to whoever replaced it.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| Some((m.dev(), m.ino())) == bound_id) {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// The pruner's owner task: one pass at start, then every ten minutes, until shutdown.
async fn prune_loop(state: Arc<ServerState>, shutdown: CancellationToken) {
    let sandbox = &state.app.config.sandbox;
    loop {
        let removed = crate::session::prune_once(
            state.app.engine.as_ref(),
            &state.app.store,
            sandbox.prune_idle_hours,
            sandbox.prune_max_age_days,
        )
        .await;
        for name in removed {
            state.app.sessions.forget_container(&name);
            // Its egress proxy and network go with it (docs/security.md, "Network egress").
            let _ = state.app.sessions.remove_egress(&name).await;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_secs(600)) => {}
        }
    }
}
