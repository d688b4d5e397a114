//! Every failure is a JSON body `{"error": "…"}` with a 4xx/5xx status, so clients never have
//! to parse text; the server keeps serving after any of them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for ApiError {
    /// Messages may quote what a request sent (a key, a path, a field name): control, bidi and
    /// invisible characters in them are shown escaped (`\u{202e}`, `\n`), never passed on raw
    /// to whoever prints the error (docs/http-api.md, "Errors").
    fn into_response(self) -> Response {
        let message = crate::policy::escape_display(&self.message);
        (self.status, Json(json!({ "error": message }))).into_response()
    }
}
