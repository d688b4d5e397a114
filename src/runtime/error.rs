//! Why the engine refused or failed ([`RuntimeError`]).

/// Why the engine refused or failed. Messages complete "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("connect to the Docker engine (is it running, and may this user use its socket?)")]
    Connect(#[source] bollard::errors::Error),
    #[error("{action}")]
    Engine {
        /// What moat was doing, e.g. "create container moat-main-1a2b3c4d".
        action: String,
        #[source]
        source: bollard::errors::Error,
    },
    #[error("{action}: {message}")]
    Other { action: String, message: String },
}

impl RuntimeError {
    pub(crate) fn engine(action: impl Into<String>, source: bollard::errors::Error) -> Self {
        RuntimeError::Engine {
            action: action.into(),
            source,
        }
    }

    /// True when the engine said the object does not exist (HTTP 404) or is not running (409).
    pub fn is_gone(&self) -> bool {
        matches!(
            self,
            RuntimeError::Engine {
                source: bollard::errors::Error::DockerResponseServerError {
                    status_code: 404 | 409,
                    ..
                },
                ..
            }
        )
    }
}
