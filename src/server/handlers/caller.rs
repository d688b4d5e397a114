//! Who is calling, as axum extractors: a handler that takes [`Who`] or [`InSession`] runs only
//! for an identified caller, and for [`InSession`] only in a session that caller may use
//! (docs/http-api.md, "Who is calling").

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};

use super::PathParam;
use crate::daemon::CALLER_HEADER;
use crate::server::auth::{identify, Channel, Identity};
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::Caller;

/// The identified caller: the operator (the socket, or the operator token) or one agent.
/// Refused with 401 for a missing (over TCP) or unknown bearer token.
pub struct Who(pub Identity);

impl FromRequestParts<Arc<ServerState>> for Who {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ServerState>,
    ) -> Result<Self, Self::Rejection> {
        // The router adds the listener's channel to every request; without it nobody can
        // say how the caller is identified.
        let channel = parts.extensions.get::<Channel>().copied().ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed to identify the caller: the request carries no transport",
            )
        })?;
        identify(channel, &parts.headers, &state.app.config.serve).map(Self)
    }
}

/// The caller and the `{session}` of the route's path, which it may use. Refused, in this
/// order: a path that does not decode (its status), an unidentified caller (401), a name that
/// is not a session key (400), a session an agent's token does not reach (403).
pub struct InSession {
    /// Who is calling.
    pub who: Identity,
    /// The session named in the path: checked, so handlers use it as is.
    pub session: String,
}

impl FromRequestParts<Arc<ServerState>> for InSession {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<ServerState>,
    ) -> Result<Self, Self::Rejection> {
        let PathParam(session) = PathParam::from_request_parts(parts, state).await?;
        let Who(who) = Who::from_request_parts(parts, state).await?;
        crate::session::validate_key(&session)
            .map_err(|e| ApiError::bad_request(format!("failed to {e}")))?;
        who.check_session(&session)?;
        Ok(Self { who, session })
    }
}

/// The identity the elevated gates see for an exec by `who`. On the socket, `moat mcp` (stdio)
/// says with `X-Moat-Caller: mcp` that it speaks for an agent client of `session`: that only
/// narrows the operator's identity, and is refused anywhere else.
pub fn exec_caller(
    who: &Identity,
    channel: Channel,
    headers: &HeaderMap,
    session: &str,
) -> Result<Caller, ApiError> {
    let Some(value) = headers.get(CALLER_HEADER) else {
        return Ok(who.exec_caller(channel));
    };
    if channel != Channel::Unix {
        return Err(ApiError::bad_request(format!(
            "failed to identify the caller: {CALLER_HEADER} is accepted on the unix socket only"
        )));
    }
    match value.to_str() {
        Ok("mcp") => Ok(Caller::mcp_stdio(session)),
        _ => Err(ApiError::bad_request(format!(
            "failed to identify the caller: {CALLER_HEADER} must be `mcp`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use axum::routing::get;
    use axum::{Extension, Router};
    use tokio_util::sync::CancellationToken;
    use tower::ServiceExt;

    use super::*;
    use crate::app::App;
    use crate::config::AgentToken;

    const OPERATOR: &str = "operator-token-0123456789";
    const AGENT: &str = "agent-token-0123456789";

    /// Two probe routes over the extractors, on a listener of `channel` (none: no channel).
    fn router(dir: &std::path::Path, channel: Option<Channel>) -> Router {
        let mut app = App::on_fake_engine(dir);
        let mut config = (*app.config).clone();
        config.serve.operator_token = OPERATOR.into();
        config.serve.agents = vec![AgentToken {
            token: AGENT.into(),
            session: "agent1".into(),
            ..Default::default()
        }];
        app.config = Arc::new(config);
        let state = ServerState::new(app, CancellationToken::new());
        let r = Router::new()
            .route(
                "/who",
                get(|Who(who): Who| async move { format!("{who:?}") }),
            )
            .route(
                "/s/{session}",
                get(|InSession { session, .. }: InSession| async move { session }),
            );
        match channel {
            Some(t) => r.layer(Extension(t)).with_state(state),
            None => r.with_state(state),
        }
    }

    async fn status(r: &Router, path: &str, token: Option<&str>) -> u16 {
        let mut req = Request::get(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let resp = r
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        resp.status().as_u16()
    }

    /// The refusals and their order: path, then identity, then the key, then the session.
    #[tokio::test]
    async fn refusals_keep_their_statuses_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let tcp = router(dir.path(), Some(Channel::Tcp));
        let unix = router(dir.path(), Some(Channel::Unix));
        let rows: &[(&Router, &str, Option<&str>, u16)] = &[
            (&tcp, "/who", None, 401),
            (&tcp, "/who", Some("nobody-0123456789"), 401),
            (&tcp, "/who", Some(OPERATOR), 200),
            (&tcp, "/who", Some(AGENT), 200),
            (&unix, "/who", None, 200),
            (&unix, "/who", Some("nobody-0123456789"), 401),
            (&tcp, "/s/agent1", Some(AGENT), 200),
            (&tcp, "/s/other", Some(AGENT), 403),
            (&tcp, "/s/other", Some(OPERATOR), 200),
            (&tcp, "/s/other", None, 401),
            (&tcp, "/s/a%20b", Some(OPERATOR), 400),
            (&tcp, "/s/a%20b", Some(AGENT), 400),
            (&tcp, "/s/a%20b", None, 401),
            (&tcp, "/s/%FF", None, 400),
            (&unix, "/s/any", None, 200),
        ];
        for (r, path, token, want) in rows {
            assert_eq!(status(r, path, *token).await, *want, "{path} {token:?}");
        }
        let bare = router(dir.path(), None);
        assert_eq!(status(&bare, "/who", Some(OPERATOR)).await, 500);
    }
}
