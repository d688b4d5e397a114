//! JSON bodies parsed by hand instead of axum's `Json` extractor, so every rejection (bad
//! JSON, unknown field, oversize) becomes our JSON error with a message naming the problem.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::de::DeserializeOwned;

use crate::server::error::ApiError;

pub fn json_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(|r| {
        ApiError::new(
            r.status(),
            format!("failed to read the request body: {}", r.body_text()),
        )
    })?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request(
            "failed to read the request body: it is empty (send a JSON object)",
        ));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("failed to parse the request body: {e}")))
}
