//! The seams between moat and what runs its commands.
//!
//! Two traits, split by what callers need (docs/ARCHITECTURE.md, "Seams"):
//! - [`Engine`]: container, image and network lifecycle — sessions, `moat image`, egress,
//!   the pruner, `moat doctor`.
//! - [`Executor`]: running commands — start, exit status, resize, short captured helper
//!   commands. The process registry and supervisor need nothing else.
//!
//! [`docker::DockerRuntime`] is both, over the Engine API (tested against a real engine in
//! `tests/`); [`helper::HelperExecutor`] runs commands through the in-container helper with
//! the engine as its fallback; `host::HostExecutor` runs elevated commands on this machine
//! and is an executor only. [`fake::FakeRuntime`] is both and records calls for unit tests of
//! the logic above (`fake_wrapper`, in unit tests, plays moat's wrapper over it).

pub mod docker;
mod error;
pub mod fake;
#[cfg(test)]
pub mod fake_wrapper;
pub mod helper;
mod types;

pub use error::RuntimeError;
pub use types::{
    ContainerInfo, ContainerSpec, ContainerStats, EngineInfo, ExecSpec, ExecStarted, ExecTty,
    HostMount, Launch, LeftBehind, Mount, Progress, WalledNetwork, Wrapped, Wrapping,
};

use async_trait::async_trait;

/// How long a short helper command may run once it started ([`Executor::exec_capture`]): a
/// group kill takes its grace (3 s) and a sweep of a full container a few seconds more.
pub const CAPTURE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Running commands in a container (for the host executor: on this machine). What the process
/// registry and supervisor need, and nothing more.
#[async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Starts a command; returns once it runs. `ExecStarted::finished` resolves when it ends.
    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecStarted, RuntimeError>;
    /// The exit code of an exec that ended (`None` while it runs).
    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>, RuntimeError>;
    /// Resizes a PTY exec's terminal.
    async fn resize_exec(&self, exec_id: &str, rows: u16, cols: u16) -> Result<(), RuntimeError>;
    /// Runs a short helper command to completion and returns (exit code, stdout+stderr),
    /// within [`CAPTURE_DEADLINE`].
    async fn exec_capture(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
    ) -> Result<(i64, Vec<u8>), RuntimeError> {
        self.exec_capture_within(container, argv, user, CAPTURE_DEADLINE)
            .await
    }
    /// [`Executor::exec_capture`] with its own deadline. Once the command runs it has
    /// `within` to finish: a helper command runs as the sandbox user, which can stop it
    /// (`SIGSTOP`) or keep it waiting, so past the deadline it is ended where the transport
    /// can end it, and the caller gets an error instead of waiting for ever (docs/helper.md,
    /// "Deadlines").
    async fn exec_capture_within(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
        within: std::time::Duration,
    ) -> Result<(i64, Vec<u8>), RuntimeError>;
    /// Counts from inside `container` what command `process` (process group `pgid`; 0: none
    /// known) left there, without starting a program: the helper's look (docs/helper.md,
    /// "What a command left"). `None` when this executor cannot look: the caller then runs
    /// its kill and sweep helpers, which look for themselves.
    async fn look_inside(&self, container: &str, pgid: u32, process: &str) -> Option<LeftBehind> {
        let _ = (container, pgid, process);
        None
    }
    /// The host pid of a running exec's process (`None` once it ended or before it runs).
    async fn exec_pid(&self, exec_id: &str) -> Result<Option<u32>, RuntimeError> {
        let _ = exec_id;
        Ok(None)
    }
    /// Which transport commands into `container` took last (`moat doctor`): `exec` unless a
    /// transport layer says otherwise.
    fn transport_of(&self, container: &str) -> &'static str {
        let _ = container;
        crate::config::Transport::Exec.name()
    }
    /// `container` was removed: drop what this executor keeps for it (a helper connection),
    /// so a new container of the same name starts afresh.
    fn release(&self, container: &str) {
        let _ = container;
    }
}

/// Container, image and network lifecycle: what sessions, image builds, egress, the pruner
/// and `moat doctor` need from a container engine.
#[async_trait]
pub trait Engine: Send + Sync + 'static {
    /// Checks the engine answers and reports its version.
    async fn ping(&self) -> Result<EngineInfo, RuntimeError>;
    /// Whether a bind mount's source is a path on this host as moat sees it, so a filesystem
    /// moat mounts there is what the container gets (the sessions' own disks,
    /// docs/security.md, "Disk bound"). The real engine: yes; a fake one mounts nothing.
    fn binds_host_paths(&self) -> bool {
        true
    }
    /// Whether `image` exists locally.
    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError>;
    /// A container by name or id; `None` when it does not exist.
    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError>;
    /// Containers (running or not) carrying `label` (`key` or `key=value`).
    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerInfo>, RuntimeError>;
    /// What container `id` has from the host, as the engine reports it: every bind and volume
    /// with its host path and whether it is writable, and the root filesystem's upper
    /// directory when the root is writable; `None` when the container does not exist. A
    /// container's mounts never change after it was created, so callers may keep the answer
    /// by id (docs/security.md, "Directories a sandbox can write").
    async fn host_mounts(&self, id: &str) -> Result<Option<Vec<HostMount>>, RuntimeError>;
    /// Creates a container; returns its id.
    async fn create_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError>;
    async fn start_container(&self, id: &str) -> Result<(), RuntimeError>;
    /// Gives container `id` the name `name` (`docker rename`): how a warm pool container
    /// becomes a session's (docs/pool.md, "Claims"). Its labels, mounts and processes stay.
    async fn rename_container(&self, id: &str, name: &str) -> Result<(), RuntimeError>;
    /// Force-removes a container (and its anonymous volumes); a missing one is not an error.
    async fn remove_container(&self, id: &str) -> Result<(), RuntimeError>;
    /// Kills a running container (`docker kill`, SIGKILL): every process in it ends, whatever
    /// its user, and the container stays, stopped, for the next command to start again. The
    /// disk bound's last resort (docs/security.md, "Disk bound"). A container that is not
    /// running is not an error.
    async fn kill_container(&self, name: &str) -> Result<(), RuntimeError>;
    /// Changes a running container's pids limit (`docker update --pids-limit`): room for
    /// moat's kill helper when a fork bomb holds every slot (docs/security.md, "Sandbox
    /// limits").
    async fn set_pids_limit(&self, name: &str, limit: i64) -> Result<(), RuntimeError>;
    /// Creates a walled bridge network unless one of that name exists: no route out of the
    /// host, no host address on the bridge, no IPv6, so a member reaches only the other
    /// members (docs/security.md, "Network egress"). Says whether an existing one is walled.
    async fn ensure_network(
        &self,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<WalledNetwork, RuntimeError>;
    /// Makes the host drop every packet that arrives from network `name`'s bridge: the host's
    /// side of the egress wall, for what needs no address (a limited broadcast;
    /// docs/security.md, "Network egress"). Needs root on the engine's host.
    async fn shut_host_input(&self, name: &str) -> Result<(), RuntimeError>;
    /// Undoes [`Engine::shut_host_input`]; a missing network or rule is fine.
    async fn open_host_input(&self, name: &str);
    /// Removes a network; a missing one is not an error.
    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError>;
    /// Names of the networks carrying `label` (`key` or `key=value`).
    async fn list_networks(&self, label: &str) -> Result<Vec<String>, RuntimeError>;
    /// Attaches a created container to one more network.
    async fn connect_network(&self, network: &str, container: &str) -> Result<(), RuntimeError>;
    /// Detaches a container from a network; not attached (or gone) is not an error.
    async fn disconnect_network(&self, network: &str, container: &str) -> Result<(), RuntimeError>;
    /// The runtimes the engine offers (`runc`, `runsc`, …), for `moat doctor` and the check
    /// before a session asks for `sandbox.runtime`.
    async fn runtimes(&self) -> Result<Vec<String>, RuntimeError>;
    /// The tags (`repository:tag`) of the local images of `repository`.
    async fn image_tags(&self, repository: &str) -> Result<Vec<String>, RuntimeError>;
    /// The tags of the local images carrying `label` (`key=value`).
    async fn images_labelled(&self, label: &str) -> Result<Vec<String>, RuntimeError> {
        Err(unsupported(format!("list the images labelled {label}")))
    }
    /// Removes an image tag without force: the engine refuses one a container still uses.
    async fn remove_image(&self, tag: &str) -> Result<(), RuntimeError>;
    /// Starts a long-lived command detached from moat (`docker exec -d`); returns its exec id.
    /// Used to start `moat-helper` (docs/helper.md); engines without it refuse.
    async fn exec_detached(
        &self,
        container: &str,
        argv: Vec<String>,
    ) -> Result<String, RuntimeError> {
        let _ = argv;
        Err(RuntimeError::Other {
            action: format!("start a detached command in {container}"),
            message: "this engine does not start detached commands".into(),
        })
    }
    /// Freezes every process of a running container (the engine's pause: the cgroup freezer),
    /// for E2B's pause (docs/e2b.md, "Pause and resume").
    async fn pause_container(&self, name: &str) -> Result<(), RuntimeError> {
        Err(unsupported(format!("pause {name}")))
    }
    /// Thaws a paused container.
    async fn unpause_container(&self, name: &str) -> Result<(), RuntimeError> {
        Err(unsupported(format!("unpause {name}")))
    }
    /// One sample of a running container's CPU and memory use (the engine's stats).
    async fn container_stats(&self, name: &str) -> Result<ContainerStats, RuntimeError> {
        Err(unsupported(format!("read the stats of {name}")))
    }
    /// Commits a container's own filesystem layer (bind mounts are not in it) to the image
    /// `tag`, with `labels` besides the container's own (the engine merges them in).
    async fn commit_container(
        &self,
        name: &str,
        tag: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        let _ = labels;
        Err(unsupported(format!("commit {name} to {tag}")))
    }
    /// Builds `tag` from an in-memory tar build context, with `labels` set on the image
    /// (without a Dockerfile step); `progress` gets each output line.
    async fn build_image(
        &self,
        context: Vec<u8>,
        tag: &str,
        build_args: Vec<(String, String)>,
        labels: Vec<(String, String)>,
        progress: Progress,
    ) -> Result<(), RuntimeError>;
}

/// What an engine without a call answers.
fn unsupported(action: String) -> RuntimeError {
    RuntimeError::Other {
        action,
        message: "this engine does not offer it".into(),
    }
}

/// An engine that also runs commands itself (the Engine API's exec; the fake): what the
/// helper executor falls back to, and what a test or `moat doctor` holds when it needs both.
pub trait Runtime: Engine + Executor {}

impl<T: Engine + Executor + ?Sized> Runtime for T {}
