//! What every console page shares: the frame around it (navigation, the pending count, the
//! sign-out form) and the small helpers that turn a rendered template or a posted form into
//! a response or a value.

use axum::extract::rejection::FormRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;

use super::error::ConsoleError;
use super::sign_in::Operator;
use super::text::{pieces, Lines, Piece};
use super::time::When;
use crate::server::ServerState;
use crate::store::now_ms;

/// The frame of a signed-in page.
pub struct Chrome {
    /// The page's `<title>` and heading.
    pub title: String,
    /// Which navigation entry is the current page (`sessions`, `approvals`, `audit`).
    pub active: &'static str,
    /// The session's CSRF token, for the forms on the page (sign out included).
    pub csrf: String,
    /// Pending approvals: shown in the navigation on every page, so a waiting decision is
    /// never more than a glance away.
    pub pending: usize,
    /// When this console session ends.
    pub expires: When,
    /// When the page was rendered, so its script can keep relative times current.
    pub now_ms: i64,
}

impl Chrome {
    pub fn new(
        state: &ServerState,
        op: &Operator,
        title: impl Into<String>,
        active: &'static str,
    ) -> Self {
        let now = now_ms();
        let pending = state
            .app
            .approvals
            .list(Some(crate::store::ApprovalStatus::Pending))
            .map(|r| r.len())
            .unwrap_or(0);
        Self {
            title: title.into(),
            active,
            csrf: op.signed.csrf.clone(),
            pending,
            expires: When::at(op.signed.expires_at_ms, now),
            now_ms: now,
        }
    }
}

/// A rendered template as an HTML response.
pub fn html(status: StatusCode, rendered: askama::Result<String>) -> Response {
    match rendered {
        Ok(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to render the page: {e}"),
        )
            .into_response(),
    }
}

/// A posted form, or a 400 that names what was wrong with it.
pub fn form<T>(body: Result<Form<T>, FormRejection>) -> Result<T, ConsoleError> {
    body.map(|Form(f)| f)
        .map_err(|r| ConsoleError::BadRequest(format!("read the form: {}", r.body_text())))
}

/// A 303 to `to` (after a form did its work, so a reload does not post it again).
pub fn see_other(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(v) => (StatusCode::SEE_OTHER, [(header::LOCATION, v)]).into_response(),
        Err(_) => (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui")]).into_response(),
    }
}

/// A session key from a path, checked as the API checks it (docs/http-api.md, "Errors").
pub fn session_key(key: &str) -> Result<(), ConsoleError> {
    crate::session::validate_key(key)
        .map_err(|e| ConsoleError::BadRequest(format!("read the session key: {e}")))
}

/// A command or plan, with line feeds marked.
pub fn command(text: &str) -> Vec<Piece> {
    pieces(text, Lines::Mark)
}

/// Output or a one-line text, line feeds kept.
pub fn plain(text: &str) -> Vec<Piece> {
    pieces(text, Lines::Keep)
}
