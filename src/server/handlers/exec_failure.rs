//! A failed exec call in the API's words, for every endpoint that runs one (`exec`, its
//! waiting form `exec_wait`, `run`, `explain`; docs/http-api.md, "Errors").

use crate::server::error::ApiError;
use crate::tools::{ExecError, RequestError};

/// The error body of a failed exec call: its status and `kind` from the edge table.
pub(super) fn exec_failure(e: &ExecError) -> ApiError {
    ApiError::of_kind(e.kind(), exec_failure_text(e))
}

/// A failed exec call's text in the API's words: the tool's "Provide a command to start."
/// names the body's field here (docs/http-api.md, "Errors").
pub(super) fn exec_failure_text(e: &ExecError) -> String {
    match e {
        ExecError::Request(RequestError::EmptyCommand) => {
            "failed to start the command: `command` is empty (send the shell command to run)"
                .to_string()
        }
        e => crate::server::error::failed_to(&e.to_string()),
    }
}
