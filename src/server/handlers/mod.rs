//! One file per endpoint group.

pub mod approvals;
pub mod daemon;
pub mod events;
pub mod exec;
mod exec_failure;
mod exec_wait;
pub mod explain;
pub mod metrics;
pub mod node;
pub mod pool;
pub mod process;
pub mod run;
pub mod sessions;

// The file tools (docs/http-api.md, "Endpoints").
pub mod files;

mod body;
mod caller;
mod path_param;

pub use body::json_body;
pub use caller::{exec_caller, InSession, Who};
pub use path_param::PathParam;

use axum::http::StatusCode;

use super::error::ApiError;

pub async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "failed to find the endpoint: there is none at this path (see docs/http-api.md)",
    )
}

/// A known path with a method it does not serve; axum adds the `Allow` header.
pub async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "failed to call this endpoint with {m}: it does not serve {m} (the Allow header lists the methods it serves; see docs/http-api.md)",
            m = crate::output::escape_display(method.as_str())
        ),
    )
}
