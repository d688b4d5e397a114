//! The seam between moat and the container engine.
//!
//! Everything above this module speaks [`Runtime`]; [`docker::DockerRuntime`] is the real
//! implementation over the Engine API (tested against a real engine in `tests/`), and
//! [`fake::FakeRuntime`] records calls for unit tests of the logic above it.

pub mod docker;
mod error;
pub mod fake;
mod types;

pub use error::RuntimeError;
pub use types::{
    ContainerInfo, ContainerSpec, EngineInfo, ExecSpec, ExecStarted, ExecTty, Mount, Progress,
};

use async_trait::async_trait;

/// What moat needs from a container engine, and nothing more.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    /// Checks the engine answers and reports its version.
    async fn ping(&self) -> Result<EngineInfo, RuntimeError>;
    /// Whether `image` exists locally.
    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError>;
    /// A container by name or id; `None` when it does not exist.
    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError>;
    /// Containers (running or not) carrying `label` (`key` or `key=value`).
    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerInfo>, RuntimeError>;
    /// Creates a container; returns its id.
    async fn create_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError>;
    async fn start_container(&self, id: &str) -> Result<(), RuntimeError>;
    /// Force-removes a container (and its anonymous volumes); a missing one is not an error.
    async fn remove_container(&self, id: &str) -> Result<(), RuntimeError>;
    /// Changes a running container's pids limit (`docker update --pids-limit`): room for
    /// moat's kill helper when a fork bomb holds every slot (docs/security.md, "Sandbox
    /// limits").
    async fn set_pids_limit(&self, name: &str, limit: i64) -> Result<(), RuntimeError>;
    /// Starts a command; returns once it runs. `ExecStarted::finished` resolves when it ends.
    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecStarted, RuntimeError>;
    /// The exit code of an exec that ended (`None` while it runs).
    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>, RuntimeError>;
    /// Resizes a PTY exec's terminal.
    async fn resize_exec(&self, exec_id: &str, rows: u16, cols: u16) -> Result<(), RuntimeError>;
    /// Runs a short helper command to completion and returns (exit code, stdout+stderr).
    async fn exec_capture(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
    ) -> Result<(i64, Vec<u8>), RuntimeError>;
    /// Builds `tag` from an in-memory tar build context; `progress` gets each output line.
    async fn build_image(
        &self,
        context: Vec<u8>,
        tag: &str,
        build_args: Vec<(String, String)>,
        progress: Progress,
    ) -> Result<(), RuntimeError>;
}
