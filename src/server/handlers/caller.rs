use axum::http::HeaderMap;

use crate::daemon::CALLER_HEADER;
use crate::exec::Caller;
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

/// The identity the elevated gates see for an exec by `who`. On the socket, `moat mcp` (stdio)
/// says with `X-Moat-Caller: mcp` that it speaks for an agent client of `session`: that only
/// narrows the operator's identity, and is refused anywhere else.
pub fn exec_caller(
    who: &Identity,
    transport: Transport,
    headers: &HeaderMap,
    session: &str,
) -> Result<Caller, ApiError> {
    let Some(value) = headers.get(CALLER_HEADER) else {
        return Ok(who.exec_caller(transport));
    };
    if transport != Transport::Unix {
        return Err(ApiError::bad_request(format!(
            "{CALLER_HEADER} is accepted on the unix socket only"
        )));
    }
    match value.to_str() {
        Ok("mcp") => Ok(Caller::mcp_stdio(session)),
        _ => Err(ApiError::bad_request(format!(
            "{CALLER_HEADER} must be mcp"
        ))),
    }
}
