//! An in-memory engine and executor for unit tests of the logic above the seams. It records every call
//! and can be told to fail; commands "run" by a test-provided handler.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::oneshot;

use super::{
    ContainerInfo, ContainerSpec, Engine, EngineInfo, ExecSpec, ExecStarted, Executor, HostMount,
    RuntimeError,
};

/// A recorded call, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Create(String),
    Start(String),
    /// `rename_container`: (id, new name).
    Rename(String, String),
    Remove(String),
    /// `kill_container` of this name.
    Kill(String),
    Exec {
        container: String,
        argv: Vec<String>,
    },
    Capture {
        container: String,
        argv: Vec<String>,
        /// The user it was asked to run as (`None`: the container's).
        user: Option<String>,
    },
    CreateNetwork(String),
    RemoveNetwork(String),
    Connect {
        network: String,
        container: String,
    },
    Disconnect {
        network: String,
        container: String,
    },
    ShutHostInput(String),
    OpenHostInput(String),
    /// `host_mounts` of this container id.
    Mounts(String),
}

/// What a command does once started; its exec ends when the future does.
pub type ExecTask = Pin<Box<dyn Future<Output = ()> + Send>>;

type Handler = dyn Fn(&ExecSpec) -> ExecTask + Send + Sync;
/// Answers one `exec_capture`: (container, argv) → (exit code, output).
type CaptureHandler = dyn Fn(&str, &[String]) -> (i64, Vec<u8>) + Send + Sync;

#[derive(Default)]
struct State {
    containers: BTreeMap<String, ContainerInfo>,
    specs: BTreeMap<String, ContainerSpec>,
    calls: Vec<Call>,
    next_id: u64,
    /// Network name → labels.
    networks: BTreeMap<String, BTreeMap<String, String>>,
    /// Networks made without the wall, as an older moat made them.
    unwalled: std::collections::BTreeSet<String>,
    /// Mounts a test adds to a container beyond its spec's (a volume the image declares).
    extra_mounts: BTreeMap<String, Vec<HostMount>>,
    /// Set: `host_mounts` fails, as an engine that stopped answering would.
    mounts_fail: bool,
}

/// See the module docs.
#[derive(Clone, Default)]
pub struct FakeRuntime {
    state: Arc<Mutex<State>>,
    /// Plays the command of each `exec` (its run files, its duration); without it every exec
    /// ends at once having done nothing.
    on_exec: Option<Arc<Handler>>,
    /// Plays the short helper commands (kill, sweep, resolve) a test cares about; without
    /// it every capture answers `(0, "")`.
    on_capture: Option<Arc<CaptureHandler>>,
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the task `handler` returns for every `exec` (on its own tokio task); the exec
    /// reports "finished" when the task ends. For commands that take time, or run until
    /// they are killed, as moat's wrapper would.
    pub fn with_exec_task(
        mut self,
        handler: impl Fn(&ExecSpec) -> ExecTask + Send + Sync + 'static,
    ) -> Self {
        self.on_exec = Some(Arc::new(handler));
        self
    }

    /// Answers every `exec_capture` with `handler(container, argv)`.
    pub fn with_capture_handler(
        mut self,
        handler: impl Fn(&str, &[String]) -> (i64, Vec<u8>) + Send + Sync + 'static,
    ) -> Self {
        self.on_capture = Some(Arc::new(handler));
        self
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn spec(&self, name: &str) -> Option<ContainerSpec> {
        self.state.lock().unwrap().specs.get(name).cloned()
    }

    /// Adds `mount` to what `host_mounts` reports for container `name`.
    pub fn add_mount(&self, name: &str, mount: HostMount) {
        let mut s = self.state.lock().unwrap();
        s.extra_mounts
            .entry(name.to_string())
            .or_default()
            .push(mount);
    }

    /// Makes every later `host_mounts` fail (`true`) or answer again.
    /// A network of this name already exists without the wall (made by an older moat).
    pub fn add_unwalled_network(&self, name: &str, labels: BTreeMap<String, String>) {
        let mut st = self.state.lock().unwrap();
        st.networks.insert(name.to_string(), labels);
        st.unwalled.insert(name.to_string());
    }

    pub fn fail_mounts(&self, fail: bool) {
        self.state.lock().unwrap().mounts_fail = fail;
    }

    /// Stops a container behind moat's back, as `docker stop` would.
    pub fn stop(&self, name: &str) {
        if let Some(c) = self.state.lock().unwrap().containers.get_mut(name) {
            c.running = false;
            c.state = "exited".into();
        }
    }

    /// Restarts a container behind moat's back, as `docker restart` would: it runs again,
    /// started now.
    pub fn restart(&self, name: &str) {
        if let Some(c) = self.state.lock().unwrap().containers.get_mut(name) {
            c.running = true;
            c.state = "running".into();
            c.started_at_ms = Some(crate::store::now_ms());
        }
    }
}

#[async_trait]
impl Engine for FakeRuntime {
    fn binds_host_paths(&self) -> bool {
        false
    }

    async fn ping(&self) -> Result<EngineInfo, RuntimeError> {
        Ok(EngineInfo {
            version: "fake".into(),
            api_version: "1.41".into(),
        })
    }

    async fn image_exists(&self, _image: &str) -> Result<bool, RuntimeError> {
        Ok(true)
    }

    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        let s = self.state.lock().unwrap();
        Ok(s.containers
            .values()
            .find(|c| c.name == name || c.id == name)
            .cloned())
    }

    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let (key, value) = label
            .split_once('=')
            .map_or((label, None), |(k, v)| (k, Some(v)));
        let s = self.state.lock().unwrap();
        Ok(s.containers
            .values()
            .filter(|c| match (c.labels.get(key), value) {
                (Some(v), Some(want)) => v == want,
                (Some(_), None) => true,
                _ => false,
            })
            .cloned()
            .collect())
    }

    async fn host_mounts(&self, id: &str) -> Result<Option<Vec<HostMount>>, RuntimeError> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(Call::Mounts(id.to_string()));
        if s.mounts_fail {
            return Err(RuntimeError::Other {
                action: format!("inspect container {id}"),
                message: "the fake engine was told to fail".into(),
            });
        }
        let Some(name) = s
            .containers
            .values()
            .find(|c| c.id == id || c.name == id)
            .map(|c| c.name.clone())
        else {
            return Ok(None);
        };
        let mut out: Vec<HostMount> = s
            .specs
            .get(&name)
            .map(|spec| {
                spec.mounts
                    .iter()
                    .map(|m| HostMount {
                        source: m.source.clone(),
                        target: m.target.clone(),
                        writable: !m.read_only,
                        kind: "bind".into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.extend(s.extra_mounts.get(&name).cloned().unwrap_or_default());
        Ok(Some(out))
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError> {
        let mut s = self.state.lock().unwrap();
        if s.containers.contains_key(&spec.name) {
            return Err(RuntimeError::Other {
                action: format!("create container {}", spec.name),
                message: "name in use".into(),
            });
        }
        s.next_id += 1;
        let id = format!("fake{:08}", s.next_id);
        s.calls.push(Call::Create(spec.name.clone()));
        s.specs.insert(spec.name.clone(), spec.clone());
        s.containers.insert(
            spec.name.clone(),
            ContainerInfo {
                id: id.clone(),
                name: spec.name.clone(),
                running: false,
                state: "created".into(),
                labels: spec.labels.clone(),
                pid: 0,
                image: spec.image.clone(),
                started_at_ms: None,
                runtime: spec.runtime.clone(),
            },
        );
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(Call::Start(id.to_string()));
        let c = s
            .containers
            .values_mut()
            .find(|c| c.id == id || c.name == id)
            .ok_or_else(|| RuntimeError::Other {
                action: format!("start container {id}"),
                message: "no such container".into(),
            })?;
        c.running = true;
        c.state = "running".into();
        c.started_at_ms = Some(crate::store::now_ms());
        Ok(())
    }

    async fn rename_container(&self, id: &str, name: &str) -> Result<(), RuntimeError> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(Call::Rename(id.to_string(), name.to_string()));
        if s.containers.contains_key(name) {
            return Err(RuntimeError::Other {
                action: format!("rename container {id} to {name}"),
                message: "name in use".into(),
            });
        }
        let old = s
            .containers
            .values()
            .find(|c| c.id == id || c.name == id)
            .map(|c| c.name.clone())
            .ok_or_else(|| RuntimeError::Other {
                action: format!("rename container {id} to {name}"),
                message: "no such container".into(),
            })?;
        let mut info = s.containers.remove(&old).expect("found above");
        info.name = name.to_string();
        s.containers.insert(name.to_string(), info);
        if let Some(mut spec) = s.specs.remove(&old) {
            spec.name = name.to_string();
            s.specs.insert(name.to_string(), spec);
        }
        Ok(())
    }

    async fn set_pids_limit(&self, _name: &str, _limit: i64) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn kill_container(&self, name: &str) -> Result<(), RuntimeError> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(Call::Kill(name.to_string()));
        if let Some(c) = s
            .containers
            .values_mut()
            .find(|c| c.id == name || c.name == name)
        {
            c.running = false;
            c.state = "exited".into();
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<(), RuntimeError> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(Call::Remove(id.to_string()));
        s.containers.retain(|_, c| c.id != id && c.name != id);
        Ok(())
    }

    async fn ensure_network(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<crate::runtime::WalledNetwork, RuntimeError> {
        let mut st = self.state.lock().unwrap();
        if !st.networks.contains_key(name) {
            st.networks.insert(name.to_string(), labels.clone());
            st.calls.push(Call::CreateNetwork(name.to_string()));
        }
        Ok(crate::runtime::WalledNetwork {
            subnets: vec!["10.99.0.0/24".into()],
            walled: !st.unwalled.contains(name),
            gateways: vec!["10.99.0.1".into()],
        })
    }

    async fn shut_host_input(&self, name: &str) -> Result<(), RuntimeError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::ShutHostInput(name.to_string()));
        Ok(())
    }

    async fn open_host_input(&self, name: &str) {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::OpenHostInput(name.to_string()));
    }

    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError> {
        let mut st = self.state.lock().unwrap();
        st.networks.remove(name);
        st.unwalled.remove(name);
        st.calls.push(Call::RemoveNetwork(name.to_string()));
        Ok(())
    }

    async fn list_networks(&self, label: &str) -> Result<Vec<String>, RuntimeError> {
        let (key, value) = match label.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (label, None),
        };
        let st = self.state.lock().unwrap();
        Ok(st
            .networks
            .iter()
            .filter(|(_, l)| {
                l.get(key)
                    .is_some_and(|v| value.is_none_or(|want| v == want))
            })
            .map(|(n, _)| n.clone())
            .collect())
    }

    async fn connect_network(&self, network: &str, container: &str) -> Result<(), RuntimeError> {
        self.state.lock().unwrap().calls.push(Call::Connect {
            network: network.to_string(),
            container: container.to_string(),
        });
        Ok(())
    }

    async fn disconnect_network(&self, network: &str, container: &str) -> Result<(), RuntimeError> {
        self.state.lock().unwrap().calls.push(Call::Disconnect {
            network: network.to_string(),
            container: container.to_string(),
        });
        Ok(())
    }

    async fn image_tags(&self, _repository: &str) -> Result<Vec<String>, RuntimeError> {
        Ok(Vec::new())
    }

    async fn remove_image(&self, _tag: &str) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn runtimes(&self) -> Result<Vec<String>, RuntimeError> {
        Ok(vec!["runc".into()])
    }

    async fn build_image(
        &self,
        _context: Vec<u8>,
        _tag: &str,
        _build_args: Vec<(String, String)>,
        _labels: Vec<(String, String)>,
        _progress: super::Progress,
    ) -> Result<(), RuntimeError> {
        Ok(())
    }
}

#[async_trait]
impl Executor for FakeRuntime {
    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecStarted, RuntimeError> {
        self.state.lock().unwrap().calls.push(Call::Exec {
            container: container.to_string(),
            argv: spec.argv.clone(),
        });
        let (tx, rx) = oneshot::channel();
        match &self.on_exec {
            Some(h) => {
                let task = h(&spec);
                tokio::spawn(async move {
                    task.await;
                    let _ = tx.send(());
                });
            }
            None => {
                let _ = tx.send(());
            }
        }
        Ok(ExecStarted {
            id: "fake-exec".into(),
            finished: rx,
            tty: None,
        })
    }

    async fn exec_exit_code(&self, _exec_id: &str) -> Result<Option<i64>, RuntimeError> {
        Ok(Some(0))
    }

    async fn resize_exec(
        &self,
        _exec_id: &str,
        _rows: u16,
        _cols: u16,
    ) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn exec_capture_within(
        &self,
        container: &str,
        argv: Vec<String>,
        user: Option<String>,
        _within: std::time::Duration,
    ) -> Result<(i64, Vec<u8>), RuntimeError> {
        let answer = match &self.on_capture {
            Some(h) => h(container, &argv),
            None => (0, Vec::new()),
        };
        self.state.lock().unwrap().calls.push(Call::Capture {
            container: container.to_string(),
            argv,
            user,
        });
        Ok(answer)
    }
}
