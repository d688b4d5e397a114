//! Why a configuration could not be loaded ([`ConfigError`]).

use std::path::PathBuf;

/// Why a configuration could not be loaded. Messages complete "failed to …".
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The TOML did not parse or named an unknown key; toml's message names the key and line.
    #[error("parse {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("apply environment override {var}: {message}")]
    Env { var: String, message: String },
    /// A value parsed but is not allowed; `key` is the dotted config key to change.
    #[error("accept `{key}`: {message}")]
    Invalid { key: String, message: String },
}
