//! Who is at the other end of the unix socket, and the guard that refuses every request from
//! a process that runs inside a host command moat started (docs/security.md, "The operator
//! channel"). The socket has no credentials of its own: without this, a host command that can
//! open it would act as the operator.

use std::path::Path;
use std::sync::Arc;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use tokio::net::UnixListener;

use super::error::ApiError;
use super::routes::ServerState;

/// The peer's credentials as the kernel gave them at `connect` (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy)]
pub struct UnixPeer {
    /// The connecting process; `None` when the kernel gave none (then it is refused).
    pub pid: Option<u32>,
    /// Its user, for the audit log.
    pub uid: Option<u32>,
}

impl Connected<IncomingStream<'_, UnixListener>> for UnixPeer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        let cred = stream.io().peer_cred().ok();
        UnixPeer {
            pid: cred
                .and_then(|c| c.pid())
                .and_then(|p| u32::try_from(p).ok()),
            uid: cred.map(|c| c.uid()),
        }
    }
}

/// The approval a path names (`/v1/approvals/{id}…`), for the audit record.
fn approval_in(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/approvals/")?.split('/').next()
}

/// Refuses, with 403 and an audit record, any request whose peer runs inside a host command;
/// checked per request, since the peer's lineage is read while it waits for the answer.
pub async fn guard(
    State(state): State<Arc<ServerState>>,
    ConnectInfo(peer): ConnectInfo<UnixPeer>,
    req: Request,
    next: Next,
) -> Response {
    let registry = state.app.registry.clone();
    let checked = match peer.pid {
        Some(pid) => crate::host::check_pid(Path::new("/proc"), pid, &|p| registry.host_leader(p)),
        None => Err(crate::host::Refusal {
            pid: 0,
            origin: None,
            reason: "the kernel gave no pid for the caller".into(),
        }),
    };
    let Err(refusal) = checked else {
        return next.run(req).await;
    };
    let what = format!("{} {}", req.method(), req.uri().path());
    let approval = approval_in(req.uri().path())
        .and_then(|id| state.app.approvals.get(id).ok())
        .map(|r| r.id);
    let channel = format!(
        "unix socket uid {}",
        peer.uid.map_or("?".into(), |u| u.to_string())
    );
    if let Err(e) = crate::host::audit_refusal(
        &state.app.store,
        &refusal,
        &channel,
        &what,
        approval.as_deref(),
    ) {
        tracing::warn!(error = %e, "failed to audit a refused socket caller");
    }
    tracing::warn!(%what, %refusal, "refused a host command on the operator socket");
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!("refused {what} on moat's socket: {refusal}"),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::approval_in;

    #[test]
    fn approval_ids_in_paths() {
        assert_eq!(approval_in("/v1/approvals/1a2b/decision"), Some("1a2b"));
        assert_eq!(approval_in("/v1/approvals/1a2b"), Some("1a2b"));
        assert_eq!(approval_in("/v1/sessions/main/exec"), None);
    }
}
