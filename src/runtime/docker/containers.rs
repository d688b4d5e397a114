//! Container lifecycle calls.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, Mount as DockerMount, MountType};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions, StartContainerOptions,
};

use super::DockerRuntime;
use crate::runtime::{ContainerInfo, ContainerSpec, HostMount, RuntimeError};

/// The engine's `State.StartedAt` (RFC 3339 with nanoseconds) in milliseconds since the
/// epoch; the zero time it gives a container never started (`0001-01-01T00:00:00Z`) and
/// anything unreadable are `None`.
fn started_at_ms(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
        .filter(|ms| *ms > 0)
}

impl DockerRuntime {
    pub(super) async fn inspect(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        match self.docker.inspect_container(name, None).await {
            Ok(c) => {
                let state = c.state.as_ref();
                Ok(Some(ContainerInfo {
                    id: c.id.unwrap_or_default(),
                    name: c
                        .name
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string(),
                    running: state.and_then(|s| s.running).unwrap_or(false),
                    state: state
                        .and_then(|s| s.status.map(|st| st.to_string()))
                        .unwrap_or_default(),
                    labels: c
                        .config
                        .and_then(|cfg| cfg.labels)
                        .unwrap_or_default()
                        .into_iter()
                        .collect(),
                    pid: state
                        .and_then(|s| s.pid)
                        .and_then(|p| u32::try_from(p).ok())
                        .unwrap_or(0),
                    image: c.image.unwrap_or_default(),
                    started_at_ms: state
                        .and_then(|s| s.started_at.as_deref())
                        .and_then(started_at_ms),
                    runtime: c
                        .host_config
                        .and_then(|h| h.runtime)
                        .filter(|r| !r.is_empty()),
                }))
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(RuntimeError::engine(format!("inspect container {name}"), e)),
        }
    }

    /// The engine's own account of what `id` has from the host: `Mounts` (binds and volumes,
    /// each with its host source and `RW`), and with a writable root filesystem the storage
    /// driver's upper directory, which the container writes too.
    pub(super) async fn mounts(&self, id: &str) -> Result<Option<Vec<HostMount>>, RuntimeError> {
        let c = match self.docker.inspect_container(id, None).await {
            Ok(c) => c,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Ok(None),
            Err(e) => return Err(RuntimeError::engine(format!("inspect container {id}"), e)),
        };
        let mut out: Vec<HostMount> = c
            .mounts
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                let source = m.source.filter(|s| !s.is_empty())?;
                Some(HostMount {
                    source,
                    target: m.destination.unwrap_or_default(),
                    // A mount the engine does not say is read-only is taken as writable.
                    writable: m.rw.unwrap_or(true),
                    kind: m.typ.unwrap_or_default(),
                })
            })
            .collect();
        let read_only_root = c
            .host_config
            .as_ref()
            .and_then(|h| h.readonly_rootfs)
            .unwrap_or(false);
        if !read_only_root {
            if let Some(upper) = c
                .graph_driver
                .as_ref()
                .and_then(|g| g.data.get("UpperDir"))
                .filter(|u| !u.is_empty())
            {
                out.push(HostMount {
                    source: upper.clone(),
                    target: "/".into(),
                    writable: true,
                    kind: "rootfs".into(),
                });
            }
        }
        Ok(Some(out))
    }

    pub(super) async fn list(&self, label: &str) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![label.to_string()],
            )])),
            ..Default::default()
        };
        let list = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| RuntimeError::engine("list containers", e))?;
        Ok(list
            .into_iter()
            .map(|c| {
                let state = c.state.map(|s| s.to_string()).unwrap_or_default();
                ContainerInfo {
                    id: c.id.unwrap_or_default(),
                    name: c
                        .names
                        .and_then(|n| n.into_iter().next())
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string(),
                    running: state == "running",
                    state,
                    labels: c.labels.unwrap_or_default().into_iter().collect(),
                    pid: 0,
                    image: c.image_id.unwrap_or_default(),
                    started_at_ms: None,
                    runtime: None,
                }
            })
            .collect())
    }

    pub(super) async fn create(&self, spec: &ContainerSpec) -> Result<String, RuntimeError> {
        let mounts = spec
            .mounts
            .iter()
            .map(|m| DockerMount {
                typ: Some(MountType::BIND),
                source: Some(m.source.clone()),
                target: Some(m.target.clone()),
                read_only: Some(m.read_only),
                ..Default::default()
            })
            .collect();
        let host_config = HostConfig {
            init: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            cap_add: (!spec.cap_add.is_empty()).then(|| spec.cap_add.clone()),
            security_opt: Some(spec.security_opt.clone()),
            readonly_rootfs: Some(spec.read_only_root),
            tmpfs: Some(spec.tmpfs.clone().into_iter().collect()),
            mounts: Some(mounts),
            pids_limit: Some(spec.pids_limit),
            memory: Some(spec.memory_bytes),
            // Equal to `memory`, so the limit cannot be dodged by swapping.
            memory_swap: Some(spec.memory_bytes),
            shm_size: (spec.shm_bytes > 0).then_some(spec.shm_bytes),
            nano_cpus: (spec.nano_cpus > 0).then_some(spec.nano_cpus),
            network_mode: Some(spec.network.clone()),
            dns: (!spec.dns.is_empty()).then(|| spec.dns.clone()),
            runtime: spec.runtime.clone(),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(spec.cmd.clone()),
            user: Some(spec.user.clone()),
            env: Some(spec.env.clone()),
            working_dir: Some(spec.working_dir.clone()),
            labels: Some(spec.labels.clone().into_iter().collect()),
            network_disabled: Some(spec.network == "none"),
            host_config: Some(host_config),
            ..Default::default()
        };
        let options = CreateContainerOptions {
            name: Some(spec.name.clone()),
            ..Default::default()
        };
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| RuntimeError::engine(format!("create container {}", spec.name), e))?;
        Ok(created.id)
    }

    pub(super) async fn start(&self, id: &str) -> Result<(), RuntimeError> {
        self.docker
            .start_container(id, None::<StartContainerOptions>)
            .await
            .map_err(|e| RuntimeError::engine(format!("start container {id}"), e))
    }

    pub(super) async fn rename(&self, id: &str, name: &str) -> Result<(), RuntimeError> {
        let options = bollard::query_parameters::RenameContainerOptions {
            name: name.to_string(),
        };
        self.docker
            .rename_container(id, options)
            .await
            .map_err(|e| RuntimeError::engine(format!("rename container {id} to {name}"), e))
    }

    pub(super) async fn kill(&self, name: &str) -> Result<(), RuntimeError> {
        let options = bollard::query_parameters::KillContainerOptions {
            signal: "KILL".into(),
        };
        match self.docker.kill_container(name, Some(options)).await {
            Ok(()) => Ok(()),
            // 409: not running (already stopped, or being removed).
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(RuntimeError::engine(format!("kill container {name}"), e)),
        }
    }

    pub(super) async fn remove(&self, id: &str) -> Result<(), RuntimeError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(RuntimeError::engine(format!("remove container {id}"), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::started_at_ms;

    #[test]
    fn the_engines_start_time_reads_as_milliseconds() {
        let rows: &[(&str, Option<i64>)] = &[
            ("2024-05-01T12:00:00.123456789Z", Some(1_714_564_800_123)),
            ("2024-05-01T14:00:00.5+02:00", Some(1_714_564_800_500)),
            ("2024-05-01T12:00:00Z", Some(1_714_564_800_000)),
            // A container never started.
            ("0001-01-01T00:00:00Z", None),
            ("", None),
            ("yesterday", None),
        ];
        for (text, want) in rows {
            assert_eq!(started_at_ms(text), *want, "{text:?}");
        }
    }
}
