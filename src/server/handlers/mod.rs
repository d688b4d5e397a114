//! One file per endpoint group.

pub mod approvals;
pub mod events;
pub mod exec;
pub mod process;
pub mod sessions;

mod body;
mod caller;

pub use body::json_body;
pub use caller::caller;

use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;

pub async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

pub async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such endpoint (see docs/http-api.md)",
    )
}
