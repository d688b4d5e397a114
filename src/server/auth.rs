//! Who is calling. The unix socket is 0600 inside the operator's 0700 `$MOAT_HOME`, so a
//! connection there is the operator. Over TCP a bearer token names the operator or one agent.

use axum::http::HeaderMap;
use axum::http::StatusCode;

use super::error::ApiError;
use crate::approvals::Decider;
use crate::config::{AgentToken, ServeConfig};
use crate::tools::Caller;

#[derive(Debug, Clone, PartialEq)]
pub enum Identity {
    Operator,
    Agent(AgentToken),
}

impl Identity {
    /// Whether this identity may act in `session`.
    pub fn may_use(&self, session: &str) -> bool {
        match self {
            Identity::Operator => true,
            Identity::Agent(a) => a.session == session,
        }
    }

    pub fn check_session(&self, session: &str) -> Result<(), ApiError> {
        if self.may_use(session) {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "failed to use session {session}: this token is not allowed to (it names another session)"
                ),
            ))
        }
    }

    /// The identity the elevated gates see. The socket's operator is the local user, as for
    /// the CLI; a TCP operator token speaks for `http`/`operator`; an agent for its token's
    /// provider and sender.
    pub fn exec_caller(&self, channel: Channel) -> Caller {
        match (self, channel) {
            (Identity::Operator, Channel::Unix) => Caller::cli(),
            (Identity::Operator, Channel::Tcp) => Caller {
                provider: Some("http".into()),
                sender: Some("operator".into()),
                agent: None,
            },
            (Identity::Agent(a), _) => Caller {
                provider: (!a.provider.is_empty()).then(|| a.provider.clone()),
                sender: (!a.sender.is_empty()).then(|| a.sender.clone()),
                agent: (!a.agent.is_empty()).then(|| a.agent.clone()),
            },
        }
    }

    /// Who decides approvals: the operator may; an agent's identity is refused (and audited)
    /// by the approvals service itself.
    pub fn decider(&self) -> Decider {
        match self {
            Identity::Operator => Decider::operator("operator", "http"),
            Identity::Agent(a) => Decider::agent(format!("agent:{}", a.agent), "http"),
        }
    }

    pub fn require_operator(&self) -> Result<(), ApiError> {
        match self {
            Identity::Operator => Ok(()),
            Identity::Agent(_) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "failed to act as the operator: only the operator may do this; agent tokens cannot",
            )),
        }
    }
}

/// Which listener the request came in on: the unix socket or TCP (docs/http-api.md). Not
/// `config::Transport`, which is how moat reaches a sandbox's commands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Channel {
    Unix,
    Tcp,
}

/// Resolves the caller. Tokens are compared in constant time.
pub fn identify(
    channel: Channel,
    headers: &HeaderMap,
    config: &ServeConfig,
) -> Result<Identity, ApiError> {
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match (channel, token) {
        (_, Some(t)) if !config.operator_token.is_empty() && secret_eq(t, &config.operator_token) => {
            Ok(Identity::Operator)
        }
        (_, Some(t)) => config
            .agents
            .iter()
            .find(|a| secret_eq(t, &a.token))
            .map(|a| Identity::Agent(a.clone()))
            .ok_or_else(|| ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "failed to identify the caller: unknown bearer token",
                )),
        (Channel::Unix, None) => Ok(Identity::Operator),
        (Channel::Tcp, None) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "failed to identify the caller: a bearer token is required (Authorization: Bearer <token>)",
        )),
    }
}

/// Whether two secrets are equal, compared in constant time (as long as their lengths are
/// equal: a length is no secret worth hiding).
pub fn secret_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ServeConfig {
        ServeConfig {
            tcp: String::new(),
            operator_token: "operator-token-0123456789".into(),
            agents: vec![AgentToken {
                token: "agent-token-0123456789".into(),
                session: "s1".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn headers(token: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(t) = token {
            h.insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        h
    }

    #[test]
    fn identities() {
        let c = config();
        assert_eq!(
            identify(Channel::Unix, &headers(None), &c).unwrap(),
            Identity::Operator
        );
        assert_eq!(
            identify(Channel::Tcp, &headers(None), &c)
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            identify(
                Channel::Tcp,
                &headers(Some("operator-token-0123456789")),
                &c
            )
            .unwrap(),
            Identity::Operator
        );
        let agent = identify(Channel::Tcp, &headers(Some("agent-token-0123456789")), &c).unwrap();
        assert!(agent.may_use("s1") && !agent.may_use("s2"));
        assert!(agent.require_operator().is_err());
        assert_eq!(
            identify(Channel::Tcp, &headers(Some("nope")), &c)
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        // An empty operator token never matches an empty bearer.
        let mut c = config();
        c.operator_token.clear();
        assert!(identify(Channel::Tcp, &headers(Some("")), &c).is_err());
    }
}
