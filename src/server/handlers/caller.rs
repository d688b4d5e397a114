use axum::http::HeaderMap;

use crate::server::auth::{identify, Identity, Transport};
use crate::server::error::ApiError;
use crate::server::ServerState;

/// Identifies the caller and checks it may use `session` (when given).
pub fn caller(
    state: &ServerState,
    transport: Transport,
    headers: &HeaderMap,
    session: Option<&str>,
) -> Result<Identity, ApiError> {
    let who = identify(transport, headers, &state.app.config.serve)?;
    if let Some(s) = session {
        crate::session::validate_key(s)
            .map_err(|e| ApiError::bad_request(format!("failed to {e}")))?;
        who.check_session(s)?;
    }
    Ok(who)
}
