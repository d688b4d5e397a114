//! One path parameter (`{session}`, `{id}`), percent-decoded, whose every rejection is moat's
//! JSON error: axum's own `Path` answers a bad escape (`%FF`, not UTF-8) with a plain-text body.
//!
//! The value is decoded exactly once, as axum decodes it: `%2E%2E` arrives here as `..` and is
//! judged as that (a session key made only of dots is refused by `session::validate_key`), and
//! `%252E` arrives as `%2E`, which no key may contain.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use crate::server::error::ApiError;

/// The decoded value of the route's single parameter.
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Self(value)),
            Err(r) => Err(ApiError::new(
                r.status(),
                format!("failed to read the request path: {}", r.body_text()),
            )),
        }
    }
}
