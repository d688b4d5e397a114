//! [`DockerRuntime`]: the real engine over bollard, both seams (`Engine` and `Executor`).

use async_trait::async_trait;
use bollard::Docker;

use crate::runtime::{
    ContainerInfo, ContainerSpec, ContainerStats, Engine, EngineInfo, ExecSpec, ExecStarted,
    Executor, HostMount, Progress, RuntimeError,
};

/// The real engine. Cheap to clone: bollard's client is an `Arc` inside.
#[derive(Clone)]
pub struct DockerRuntime {
    pub(super) docker: Docker,
    /// The engine's unix socket, for starting TTY execs without bollard's decoder (see
    /// `hijack`). `None` for a non-unix `DOCKER_HOST`: those keep bollard's TTY path, whose
    /// output stalls on chunks that start with 0x00–0x02.
    pub(super) socket: Option<std::path::PathBuf>,
}

impl DockerRuntime {
    /// Connects through `DOCKER_HOST` (or the default unix socket) and negotiates the API
    /// version. bollard 0.21.1 never sends the version prefix (bollard#736), so requests are
    /// served at the engine's own version; negotiating now keeps that right after the upgrade.
    pub async fn connect() -> Result<Self, RuntimeError> {
        let docker = Docker::connect_with_defaults()
            .map_err(RuntimeError::Connect)?
            .with_timeout(std::time::Duration::from_secs(120));
        let docker = docker
            .negotiate_version()
            .await
            .map_err(RuntimeError::Connect)?;
        let socket = super::hijack::unix_socket(std::env::var("DOCKER_HOST").ok().as_deref());
        Ok(Self { docker, socket })
    }
}

#[async_trait]
impl Engine for DockerRuntime {
    async fn ping(&self) -> Result<EngineInfo, RuntimeError> {
        let v = self.docker.version().await.map_err(RuntimeError::Connect)?;
        Ok(EngineInfo {
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
        })
    }

    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(RuntimeError::engine(format!("inspect image {image}"), e)),
        }
    }

    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        self.inspect(name).await
    }

    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerInfo>, RuntimeError> {
        self.list(label).await
    }

    async fn host_mounts(&self, id: &str) -> Result<Option<Vec<HostMount>>, RuntimeError> {
        self.mounts(id).await
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError> {
        self.create(spec).await
    }

    async fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.start(id).await
    }

    async fn rename_container(&self, id: &str, name: &str) -> Result<(), RuntimeError> {
        self.rename(id, name).await
    }
    async fn remove_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.remove(id).await
    }

    async fn kill_container(&self, name: &str) -> Result<(), RuntimeError> {
        self.kill(name).await
    }

    async fn pause_container(&self, name: &str) -> Result<(), RuntimeError> {
        self.pause(name).await
    }

    async fn unpause_container(&self, name: &str) -> Result<(), RuntimeError> {
        self.unpause(name).await
    }

    async fn container_stats(&self, name: &str) -> Result<ContainerStats, RuntimeError> {
        self.stats(name).await
    }

    async fn commit_container(
        &self,
        name: &str,
        tag: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        self.commit(name, tag, labels).await
    }

    async fn set_pids_limit(&self, name: &str, limit: i64) -> Result<(), RuntimeError> {
        let body = bollard::models::ContainerUpdateBody {
            pids_limit: Some(limit),
            ..Default::default()
        };
        self.docker
            .update_container(name, body)
            .await
            .map_err(|e| RuntimeError::engine(format!("update the pids limit of {name}"), e))
    }

    async fn ensure_network(
        &self,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<crate::runtime::WalledNetwork, RuntimeError> {
        self.ensure_network(name, labels).await
    }

    async fn shut_host_input(&self, name: &str) -> Result<(), RuntimeError> {
        self.shut_input(name).await
    }

    async fn open_host_input(&self, name: &str) {
        self.open_input(name).await
    }

    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError> {
        self.drop_network(name).await
    }

    async fn list_networks(&self, label: &str) -> Result<Vec<String>, RuntimeError> {
        self.networks(label).await
    }

    async fn connect_network(&self, network: &str, container: &str) -> Result<(), RuntimeError> {
        self.attach(network, container).await
    }

    async fn disconnect_network(&self, network: &str, container: &str) -> Result<(), RuntimeError> {
        self.detach(network, container).await
    }

    async fn image_tags(&self, repository: &str) -> Result<Vec<String>, RuntimeError> {
        self.tags(repository).await
    }

    async fn remove_image(&self, tag: &str) -> Result<(), RuntimeError> {
        self.untag(tag).await
    }

    async fn images_labelled(&self, label: &str) -> Result<Vec<String>, RuntimeError> {
        self.labelled(label).await
    }

    async fn runtimes(&self) -> Result<Vec<String>, RuntimeError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| RuntimeError::engine("read the engine's info", e))?;
        let mut names: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
        names.sort();
        Ok(names)
    }

    async fn exec_detached(
        &self,
        container: &str,
        argv: Vec<String>,
    ) -> Result<String, RuntimeError> {
        self.start_detached(container, argv).await
    }

    async fn build_image(
        &self,
        context: Vec<u8>,
        tag: &str,
        build_args: Vec<(String, String)>,
        labels: Vec<(String, String)>,
        progress: Progress,
    ) -> Result<(), RuntimeError> {
        self.build(context, tag, build_args, labels, progress).await
    }
}

#[async_trait]
impl Executor for DockerRuntime {
    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecStarted, RuntimeError> {
        self.start_exec(container, spec).await
    }

    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>, RuntimeError> {
        let inspect = self
            .docker
            .inspect_exec(exec_id)
            .await
            .map_err(|e| RuntimeError::engine(format!("inspect exec {exec_id}"), e))?;
        Ok(if inspect.running == Some(true) {
            None
        } else {
            inspect.exit_code
        })
    }

    async fn resize_exec(&self, exec_id: &str, rows: u16, cols: u16) -> Result<(), RuntimeError> {
        let options = bollard::query_parameters::ResizeExecOptions {
            h: rows as i32,
            w: cols as i32,
        };
        self.docker
            .resize_exec(exec_id, options)
            .await
            .map_err(|e| RuntimeError::engine(format!("resize exec {exec_id}"), e))
    }

    async fn exec_capture_within(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
        within: std::time::Duration,
    ) -> Result<(i64, Vec<u8>), RuntimeError> {
        self.capture(container, argv, user, within).await
    }

    async fn exec_pid(&self, exec_id: &str) -> Result<Option<u32>, RuntimeError> {
        let inspect = self
            .docker
            .inspect_exec(exec_id)
            .await
            .map_err(|e| RuntimeError::engine(format!("inspect exec {exec_id}"), e))?;
        Ok(match (inspect.running, inspect.pid) {
            (Some(true), Some(pid)) if pid > 0 => Some(pid as u32),
            _ => None,
        })
    }
}
