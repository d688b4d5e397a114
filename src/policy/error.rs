//! Errors of the policy module.
//!
//! Evaluation itself never fails: anything it cannot model is a miss. Errors only come from
//! parsing level names and from validating an operator's policy at configuration load.

use thiserror::Error;

/// Why a level name or an operator policy was rejected.
///
/// Messages are lowercase fragments that complete "failed to …".
#[derive(Debug, Error)]
pub enum PolicyError {
    /// A `security` value that is not one of the three levels.
    #[error("parse security level {0:?} (expected deny, allowlist or full)")]
    UnknownSecurity(String),

    /// An `ask` value that is not one of the three levels.
    #[error("parse ask level {0:?} (expected off, on-miss or always)")]
    UnknownAsk(String),

    /// An allowlist entry that is neither an absolute path glob nor a bare command name.
    #[error("accept allowlist entry {entry:?}: {reason}")]
    InvalidAllowlistEntry {
        /// The entry as configured.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },

    /// An allowlist entry whose glob syntax is broken.
    #[error("compile allowlist glob {entry:?}")]
    InvalidGlob {
        /// The entry as configured.
        entry: String,
        /// The glob compiler's complaint.
        #[source]
        source: globset::Error,
    },

    /// An ask or deny pattern that cannot be used.
    #[error("accept argv pattern {pattern:?}: {reason}")]
    InvalidPattern {
        /// The pattern as configured.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A safe bin for which no argv profile exists, so it could never pass.
    #[error("enable safe bin {0:?} (no argv profile exists for it; give one under safe_bin_profiles.{0})")]
    UnknownSafeBin(String),

    /// An operator profile (`safe_bin_profiles`, `argv_profiles`) that cannot be used; the
    /// text names the key.
    #[error("accept {0}")]
    InvalidProfile(String),

    /// A trusted directory or allowed workdir that is not an absolute, normalized path.
    #[error("accept directory {dir:?} for {key}: {reason}")]
    InvalidDir {
        /// The configuration key the directory came from.
        key: &'static str,
        /// The directory as configured.
        dir: String,
        /// What is wrong with it.
        reason: String,
    },

    /// An `env_allow` name that is not a variable name, or one that would let a request steer
    /// what an allowlisted program runs.
    #[error("allow request env {name:?} under allowlist: {reason}")]
    InvalidEnvAllow {
        /// The name as configured.
        name: String,
        /// Why it cannot be allowed.
        reason: String,
    },
}
