//! Refuses a socket client whose moat build or configuration differs from the daemon's
//! (docs/ARCHITECTURE.md, "Daemon"): its commands would otherwise run under rules it did not
//! ask for. Clients that send no fingerprint (curl, other programs) are served as they are.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::routes::ServerState;
use crate::daemon::FINGERPRINT_HEADER;

/// Paths a client of any fingerprint may use: to learn which daemon this is and what its
/// warm pool holds (`moat doctor` reports on the daemon that runs, whatever its
/// configuration), and to replace it when it is idle. None of them runs a command.
const ANY_CLIENT: [&str; 3] = ["/v1/health", "/v1/pool", "/v1/daemon/stop"];

/// `POST /v1/approvals/{id}/wake`: a CLI of another configuration that decided on the database
/// may still wake the waiter; the wake only makes it read the stored decision.
fn is_wake(path: &str) -> bool {
    path.strip_prefix("/v1/approvals/")
        .and_then(|rest| rest.strip_suffix("/wake"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

pub async fn guard(State(state): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    let theirs = req.headers().get(FINGERPRINT_HEADER).map(|v| v.as_bytes());
    let fits = match theirs {
        None => true,
        Some(f) => f == state.daemon.fingerprint.as_bytes(),
    };
    if fits || ANY_CLIENT.contains(&req.uri().path()) || is_wake(req.uri().path()) {
        return next.run(req).await;
    }
    ApiError::new(
        StatusCode::CONFLICT,
        format!(
            "use this moat serve (pid {}): it runs another moat build or configuration than the client (moat.toml, MOAT_* variables or the binary changed since it started); restart it",
            std::process::id()
        ),
    )
    .into_response()
}
