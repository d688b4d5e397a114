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
use crate::host::Refusal;

/// The peer's credentials as the kernel gave them at `connect` (`SO_PEERCRED`), and what the
/// check found then.
#[derive(Debug, Clone)]
pub struct UnixPeer {
    /// The connecting process; `None` when the kernel gave none (then it is refused).
    pub pid: Option<u32>,
    /// Its user, for the audit log.
    pub uid: Option<u32>,
    /// When that process started: a later request on the connection is checked against the
    /// same process, not whatever reuses its pid after it exited.
    pub start: Option<u64>,
    /// The check at `connect`: a connection refused then stays refused, whatever happens to
    /// the process (it may hand the descriptor to a child that escaped, and exit).
    pub at_connect: Result<(), Refusal>,
}

impl Connected<IncomingStream<'_, UnixListener>> for UnixPeer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        UnixPeer::of(stream.io())
    }
}

impl UnixPeer {
    /// The peer of an accepted connection, checked now. Whatever accepts connections on the
    /// socket puts this in each request's extensions (as `ConnectInfo<UnixPeer>` or as a
    /// plain `UnixPeer`); [`guard`] refuses requests that carry neither.
    pub fn of(stream: &tokio::net::UnixStream) -> Self {
        let cred = stream.peer_cred().ok();
        let pid = cred
            .and_then(|c| c.pid())
            .and_then(|p| u32::try_from(p).ok());
        let at_connect = match pid {
            Some(pid) => crate::host::check_pid(Path::new(PROC), pid, &|_| None),
            None => Err(Refusal {
                pid: 0,
                origin: None,
                reason: "the kernel gave no pid for the caller".into(),
            }),
        };
        UnixPeer {
            pid,
            uid: cred.map(|c| c.uid()),
            start: pid.and_then(|p| crate::host::start_time(Path::new(PROC), p)),
            at_connect,
        }
    }
}

const PROC: &str = "/proc";

/// The check for one request: the verdict at `connect`, the same process still there, and
/// the check again (now also against the daemon's live host commands).
fn check(peer: &UnixPeer, known: &dyn Fn(u32) -> Option<String>) -> Result<(), Refusal> {
    peer.at_connect.clone()?;
    let pid = peer.pid.unwrap_or(0);
    let now = crate::host::start_time(Path::new(PROC), pid);
    if now.is_none() || now != peer.start {
        return Err(Refusal {
            pid,
            origin: None,
            reason: format!(
                "the process that connected (pid {pid}) is gone, so the caller cannot be checked"
            ),
        });
    }
    crate::host::check_pid(Path::new(PROC), pid, known)
}

/// The approval a path names (`/v1/approvals/{id}…`), for the audit record.
fn approval_in(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/approvals/")?.split('/').next()
}

/// Refuses, with 403 and an audit record, any request whose peer runs inside a host command:
/// checked at `connect` and again per request.
pub async fn guard(State(state): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<UnixPeer>>()
        .map(|c| c.0.clone())
        .or_else(|| req.extensions().get::<UnixPeer>().cloned());
    let registry = state.app.registry.clone();
    let checked = match &peer {
        Some(peer) => check(peer, &|p| registry.host_leader(p)),
        // Fail closed: a connection whose peer was never recorded is nobody's.
        None => Err(Refusal {
            pid: 0,
            origin: None,
            reason: "the connection carries no peer credentials".into(),
        }),
    };
    let Err(refusal) = checked else {
        return next.run(req).await;
    };
    let uid = peer.and_then(|p| p.uid);
    let channel = format!(
        "unix socket uid {}",
        uid.map_or("?".into(), |u| u.to_string())
    );
    refuse(&state, &req, &refusal, &channel, "socket")
}

/// The 403 and the audit record of a refused request; `door` names the listener in the error.
pub(super) fn refuse(
    state: &ServerState,
    req: &Request,
    refusal: &Refusal,
    channel: &str,
    door: &str,
) -> Response {
    let what = format!("{} {}", req.method(), req.uri().path());
    let approval = approval_in(req.uri().path())
        .and_then(|id| state.app.approvals.get(id).ok())
        .map(|r| r.id);
    if let Err(e) = crate::host::audit_refusal(
        &state.app.store,
        refusal,
        channel,
        &what,
        approval.as_deref(),
    ) {
        tracing::warn!(error = %e, "failed to audit a refused caller");
    }
    tracing::warn!(%what, %refusal, "refused a host command on moat's {door}");
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!("failed to admit the caller: refused {what} on moat's {door}: {refusal}"),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> UnixPeer {
        let pid = std::process::id();
        UnixPeer {
            pid: Some(pid),
            uid: None,
            start: crate::host::start_time(Path::new(PROC), pid),
            at_connect: Ok(()),
        }
    }

    #[test]
    fn a_peer_is_the_process_that_connected() {
        let none = |_| None;
        assert_eq!(check(&me(), &none), Ok(()));
        // A refusal at connect holds for the whole connection.
        let refused = Refusal {
            pid: 1,
            origin: None,
            reason: "x".into(),
        };
        let mut p = me();
        p.at_connect = Err(refused.clone());
        assert_eq!(check(&p, &none), Err(refused));
        // The same pid with another start time is another process (a reused pid).
        let mut p = me();
        p.start = p.start.map(|s| s + 1);
        assert!(check(&p, &none).unwrap_err().reason.contains("is gone"));
        // A live host command this daemon started, known by its pid.
        let mine = std::process::id();
        let known = move |p: u32| (p == mine).then(|| "warm-river".to_string());
        let r = check(&me(), &known).unwrap_err();
        assert_eq!(r.origin.unwrap().process_id, "warm-river");
    }

    /// The guard on a real socket: this process passes; a client carrying a host command's
    /// marker is refused with the reason, and the attempt is audited.
    #[tokio::test]
    async fn the_guard_on_a_real_socket() {
        use crate::app::App;

        let dir = tempfile::tempdir().unwrap();
        let app = App::on_fake_engine(dir.path());
        let shutdown = tokio_util::sync::CancellationToken::new();
        let state = ServerState::new(app, shutdown.clone());
        let sock = dir.path().join("t.sock");
        let listener = UnixListener::bind(&sock).unwrap();
        let app = super::super::router(state.clone(), super::super::Channel::Unix)
            .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
            .into_make_service_with_connect_info::<UnixPeer>();
        let sd = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(sd.cancelled_owned())
                .await
        });
        let curl = |marker: Option<&str>| {
            let mut c = std::process::Command::new("curl");
            c.args(["-s", "-w", "\n%{http_code}", "--unix-socket"])
                .arg(&sock)
                .arg("http://moat/v1/health")
                .env_remove(crate::host::HOST_MARKER);
            if let Some(m) = marker {
                c.env(crate::host::HOST_MARKER, m);
            }
            c
        };
        let ok = tokio::process::Command::from(curl(None))
            .output()
            .await
            .unwrap();
        let ok = String::from_utf8_lossy(&ok.stdout).into_owned();
        assert!(ok.ends_with("\n200"), "{ok}");
        let no = tokio::process::Command::from(curl(Some("cold-lake")))
            .output()
            .await
            .unwrap();
        let no = String::from_utf8_lossy(&no.stdout).into_owned();
        assert!(no.ends_with("\n403"), "{no}");
        assert!(
            no.contains("refused GET /v1/health on moat's socket"),
            "{no}"
        );
        assert!(no.contains("runs inside host command `cold-lake`"), "{no}");
        let audit = state.app.store.audit_log(None, 10).unwrap();
        let refused: Vec<_> = audit
            .iter()
            .filter(|e| e.kind == crate::host::REFUSED_KIND)
            .collect();
        assert_eq!(refused.len(), 1, "{audit:?}");
        assert!(refused[0].actor.starts_with("unix socket uid "));
        assert!(refused[0]
            .detail
            .starts_with("GET /v1/health host-process=cold-lake: pid "));
        shutdown.cancel();
    }

    #[test]
    fn approval_ids_in_paths() {
        assert_eq!(approval_in("/v1/approvals/1a2b/decision"), Some("1a2b"));
        assert_eq!(approval_in("/v1/approvals/1a2b"), Some("1a2b"));
        assert_eq!(approval_in("/v1/sessions/main/exec"), None);
    }
}
