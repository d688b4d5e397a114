//! What goes wrong in the console, as a page: the status, and a sentence that completes
//! "failed to …" (docs/console.md).

use askama::Template;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::approvals::ApprovalError;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// No live console session: pages send the browser to the sign-in form.
    #[error("use the console: sign in first")]
    SignIn,
    /// A sign-in with a token no identity has.
    #[error("sign in: {0}")]
    BadToken(String),
    /// An agent's token, or another caller the console never serves.
    #[error("{0}")]
    Forbidden(String),
    /// A state-changing form without this session's CSRF token.
    #[error("accept the form: its CSRF token is missing or wrong (reload the page and try again)")]
    Csrf,
    /// A session, process or page that does not exist.
    #[error("find {0}")]
    NotFound(String),
    /// A malformed path, query or form (what was wrong is named).
    #[error("{0}")]
    BadRequest(String),
    /// The approvals library refused (not pending, not offered, expired): its own status.
    #[error("{0}")]
    Approval(#[from] ApprovalError),
    /// The store or the engine failed.
    #[error("{0}")]
    Internal(String),
}

impl ConsoleError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::SignIn => StatusCode::SEE_OTHER,
            Self::BadToken(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::Csrf => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Approval(e) => {
                StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Wraps a lower layer's failure (a store or engine error) as a 500.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::Internal(e.to_string())
    }
}

/// The page every failure shows: what failed, and a way back.
#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage {
    status: u16,
    message: String,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        if matches!(self, Self::SignIn) {
            return (
                StatusCode::SEE_OTHER,
                [(header::LOCATION, "/ui/sign-in")],
                "",
            )
                .into_response();
        }
        let status = self.status();
        // Messages may quote what a request or an agent sent: escaped for display as the API
        // does, and HTML-escaped by the template.
        let message = format!(
            "failed to {}",
            crate::output::escape_display(&self.to_string())
        );
        let page = ErrorPage {
            status: status.as_u16(),
            message,
        };
        super::html::html(status, page.render())
    }
}
