//! Why the helper could not be used. None of these reaches a caller: the command goes through
//! the engine's exec instead, and the reason is logged (docs/helper.md, "Fallback").

use super::frame::FrameError;

#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("{action}")]
    Io {
        /// What moat was doing, e.g. "open the helper's socket".
        action: String,
        #[source]
        source: std::io::Error,
    },
    #[error("read the helper's answer")]
    Frame(#[from] FrameError),
    #[error("trust the helper's socket: {0}")]
    Untrusted(String),
    #[error("talk to the helper: {0}")]
    Protocol(String),
    #[error("start the helper: {0}")]
    Start(String),
    #[error("reach the helper: the connection is gone")]
    Lost,
}

impl HelperError {
    pub(super) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let action = action.into();
        move |source| HelperError::Io { action, source }
    }
}
