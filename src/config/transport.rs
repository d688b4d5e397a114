//! Which way commands reach a session container (`sandbox.transport`, docs/helper.md).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Through `moat-helper` in the container: no engine round trip per command. Falls back
    /// to `Exec` for a container whose helper cannot be started or trusted.
    #[default]
    Helper,
    /// One engine exec per command (`docker exec`).
    Exec,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Helper => "helper",
            Transport::Exec => "exec",
        }
    }
}
