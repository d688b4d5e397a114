//! The small helpers every console page shares: a posted form into a value, a redirect, a
//! session key checked, hostile text into marked pieces. The frame around a signed-in page
//! is `chrome`, a rendered template as a response is `html`.

use axum::extract::rejection::FormRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;

use super::error::ConsoleError;
use super::text::{pieces, Lines, Piece};

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
