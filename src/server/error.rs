//! Every failure is a JSON body `{"error": "…"}` with a 4xx/5xx status, so clients never have
//! to parse text; an exec failure also names its `kind` (docs/http-api.md, "Errors"). The
//! server keeps serving after any of them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::contract::FailureKind;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// Set for exec failures, so a client tells a refusal from a failure by this field
    /// rather than by the message's words.
    pub kind: Option<FailureKind>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind: None,
        }
    }

    /// A classified failure: its status comes from the kind's row of the edge table.
    pub fn of_kind(kind: FailureKind, message: impl Into<String>) -> Self {
        let status =
            StatusCode::from_u16(kind.edges().http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self {
            status,
            message: message.into(),
            kind: Some(kind),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

/// An error's text as the API says it: a "failed to …" fragment gets its "failed to ", a
/// contract sentence (`Security Violation: …`, which clients match on) stays whole, so no
/// text reads "failed to Security …" (docs/http-api.md, "Errors").
pub fn failed_to(text: &str) -> String {
    if text.starts_with(|c: char| c.is_uppercase()) {
        text.to_string()
    } else {
        format!("failed to {text}")
    }
}

impl IntoResponse for ApiError {
    /// Messages may quote what a request sent (a key, a path, a field name): control, bidi and
    /// invisible characters in them are shown escaped (`\u{202e}`, `\n`), never passed on raw
    /// to whoever prints the error (docs/http-api.md, "Errors").
    fn into_response(self) -> Response {
        let message = crate::output::escape_display(&self.message);
        let body = match self.kind {
            Some(kind) => json!({ "error": message, "kind": kind }),
            None => json!({ "error": message }),
        };
        (self.status, Json(body)).into_response()
    }
}
