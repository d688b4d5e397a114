//! One file per endpoint group.

pub mod approvals;
pub mod daemon;
pub mod events;
pub mod exec;
mod exec_wait;
pub mod process;
pub mod sessions;

mod body;
mod caller;

pub use body::json_body;
pub use caller::{caller, exec_caller};

use axum::http::StatusCode;

use super::error::ApiError;

pub async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such endpoint (see docs/http-api.md)",
    )
}
