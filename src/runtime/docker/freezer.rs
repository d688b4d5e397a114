//! Freezing and thawing a container's processes: the engine's pause (the cgroup freezer), for
//! E2B's pause (docs/e2b.md, "Pause and resume").

use super::DockerRuntime;
use crate::runtime::RuntimeError;

impl DockerRuntime {
    pub(super) async fn pause(&self, name: &str) -> Result<(), RuntimeError> {
        self.docker
            .pause_container(name)
            .await
            .map_err(|e| RuntimeError::engine(format!("pause {name}"), e))
    }

    pub(super) async fn unpause(&self, name: &str) -> Result<(), RuntimeError> {
        self.docker
            .unpause_container(name)
            .await
            .map_err(|e| RuntimeError::engine(format!("unpause {name}"), e))
    }
}
