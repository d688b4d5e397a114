//! What wraps every console response: agent tokens are refused (and audited) before any page
//! runs, and every answer carries the strict headers of docs/console.md ("Security headers").

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Extension;

use super::error::ConsoleError;
use crate::server::{identify, Channel, Identity, ServerState};

/// The policy: scripts and styles from the console's own compiled-in assets only (no inline
/// script or style, so injected markup can neither run nor restyle the page), no plugins, no
/// frames around it, forms and connections back to moat only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Every console response's headers (docs/console.md, "Security headers").
pub const HEADERS: &[(&str, &str)] = &[
    ("content-security-policy", CSP),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("x-content-type-options", "nosniff"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    (
        "permissions-policy",
        "camera=(), microphone=(), geolocation=()",
    ),
];

/// See the module docs.
pub async fn guard(
    State(state): State<Arc<ServerState>>,
    Extension(channel): Extension<Channel>,
    req: Request,
    next: Next,
) -> Response {
    let mut response = match refuse_agent(&state, channel, &req) {
        Some(refusal) => refusal.into_response(),
        None => next.run(req).await,
    };
    let headers = response.headers_mut();
    for (name, value) in HEADERS {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    // Pages show live state and hold CSRF tokens: never kept by a cache (assets set their own).
    if !headers.contains_key(axum::http::header::CACHE_CONTROL) {
        headers.insert(
            axum::http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
    }
    response
}

/// A request whose bearer token is an agent's: 403, and the attempt is in the audit log.
fn refuse_agent(state: &ServerState, channel: Channel, req: &Request) -> Option<ConsoleError> {
    req.headers().get(axum::http::header::AUTHORIZATION)?;
    match identify(channel, req.headers(), &state.app.config.serve) {
        Ok(Identity::Agent(a)) => Some(refused(state, &a, req.uri().path())),
        _ => None,
    }
}

/// Audits an agent's attempt on `path` and answers the refusal.
pub fn refused(state: &ServerState, agent: &crate::config::AgentToken, path: &str) -> ConsoleError {
    let _ = state.app.store.audit(
        "console-refused",
        None,
        Some(&agent.session),
        &format!("agent:{}", agent.agent),
        &format!(
            "an agent token tried {}: the console is the operator's",
            crate::output::escape_display(path)
        ),
    );
    ConsoleError::Forbidden("open the console: only the operator may; agent tokens cannot".into())
}
