//! `sandbox.scope`: which sessions share a container. Its own file, since both the file's
//! sections (`file.rs`) and the rules on them (`sections.rs`) read it.

use serde::{Deserialize, Serialize};

/// Which sessions share a container.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One container per session key: the strongest isolation, the default.
    #[default]
    Session,
    /// One container per agent (the part of the session key before the first `:`).
    Agent,
    /// One container for every session.
    Shared,
}
