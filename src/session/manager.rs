//! Creates, reuses, adopts and recreates session containers.
//!
//! The first command of a session creates its container; later ones reuse it from an
//! in-memory cache without asking the engine anything (that is most of exec latency). After a
//! restart moat adopts its containers by name and label. A container whose config hash no
//! longer matches is recreated, unless it was used in the last five minutes: then it is kept
//! and the caller gets a warning saying how to recreate it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::home::Home;
use crate::runtime::{Runtime, RuntimeError};
use crate::store::{now_ms, Store, StoreError};

use super::key::{container_key, validate_key, ContainerName, KeyError};
use super::spec::{build_spec, config_hash, HASH_LABEL, MOAT_LABEL};

/// How recently a container must have been used to be spared recreation on a config change.
const RECENT_USE_MS: i64 = 5 * 60 * 1000;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("prepare host directory {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("find image `{0}`: build it with `moat image build` (or set sandbox.image)")]
    NoImage(String),
    #[error("run sandbox.setup_command (exit code {code}): {output}")]
    Setup { code: i64, output: String },
}

/// A ready session container.
#[derive(Debug, Clone)]
pub struct SessionContainer {
    /// The key the container belongs to (the session key, or the agent/shared key by scope).
    pub key: String,
    pub name: String,
    pub id: String,
    /// Host side of `/workspace`.
    pub workspace: PathBuf,
    /// Host side of `/run/moat`.
    pub run_dir: PathBuf,
    /// Set when the container does not match the config but was kept (recently used).
    pub warning: Option<String>,
}

/// See the module docs.
pub struct Sessions {
    runtime: Arc<dyn Runtime>,
    store: Arc<Store>,
    config: Arc<Config>,
    home: Home,
    /// Containers known to be running, by container key. A std mutex: never held across
    /// `.await`.
    ready: Mutex<HashMap<String, SessionContainer>>,
    /// One creation at a time per container key, so two first commands do not race to create.
    creating: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Containers over `sandbox.workspace_max_bytes` (set by the disk guard), with the warning
    /// each command there gets until space is freed.
    over_disk: Mutex<HashMap<String, String>>,
}

impl Sessions {
    pub fn new(
        runtime: Arc<dyn Runtime>,
        store: Arc<Store>,
        config: Arc<Config>,
        home: Home,
    ) -> Self {
        Self {
            runtime,
            store,
            config,
            home,
            ready: Mutex::new(HashMap::new()),
            creating: Mutex::new(HashMap::new()),
            over_disk: Mutex::new(HashMap::new()),
        }
    }

    pub fn runtime(&self) -> &Arc<dyn Runtime> {
        &self.runtime
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The names a session's container has, whether or not it exists yet.
    pub fn names(&self, session: &str) -> (String, ContainerName) {
        let key = container_key(session, self.config.sandbox.scope);
        let name = ContainerName::for_key(&key, &self.home.root().display().to_string());
        (key, name)
    }

    /// Host workspace directory of a session.
    pub fn workspace_dir(&self, slug: &str) -> PathBuf {
        let root = if self.config.sandbox.workspace_root.is_empty() {
            self.home.workspaces()
        } else {
            PathBuf::from(&self.config.sandbox.workspace_root)
        };
        root.join(slug)
    }

    /// Returns the session's running container, creating or starting it if needed.
    pub async fn ensure(&self, session: &str) -> Result<SessionContainer, SessionError> {
        validate_key(session)?;
        let (key, names) = self.names(session);
        if let Some(c) = self.ready.lock().unwrap().get(&key).cloned() {
            self.store.touch_session(session, &c.name, now_ms())?;
            return Ok(c);
        }
        let lock = self
            .creating
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_default()
            .clone();
        let _guard = lock.lock().await;
        if let Some(c) = self.ready.lock().unwrap().get(&key).cloned() {
            return Ok(c);
        }
        let container = self.ensure_slow(&key, &names).await?;
        self.store
            .touch_session(session, &container.name, now_ms())?;
        self.ready.lock().unwrap().insert(key, container.clone());
        Ok(container)
    }

    /// The containers this moat has in use: (name, workspace, run directory).
    pub fn in_use(&self) -> Vec<(String, PathBuf, PathBuf)> {
        self.ready
            .lock()
            .unwrap()
            .values()
            .map(|c| (c.name.clone(), c.workspace.clone(), c.run_dir.clone()))
            .collect()
    }

    /// Records whether container `name` is over its disk bound (`Some(warning)`) or not.
    pub fn set_over_disk(&self, name: &str, warning: Option<String>) {
        let mut over = self.over_disk.lock().unwrap();
        match warning {
            Some(w) => over.insert(name.to_string(), w),
            None => over.remove(name),
        };
    }

    /// The warning for commands in container `name` while it is over its disk bound.
    pub fn over_disk(&self, name: &str) -> Option<String> {
        self.over_disk.lock().unwrap().get(name).cloned()
    }

    /// Forgets the cached container of a session (e.g. after the engine said it is gone).
    pub fn invalidate(&self, session: &str) {
        let (key, _) = self.names(session);
        self.ready.lock().unwrap().remove(&key);
    }

    /// Drops a container from the cache after something else removed it (the pruner).
    pub fn forget_container(&self, name: &str) {
        self.ready.lock().unwrap().retain(|_, c| c.name != name);
    }

    /// Removes a session's container; its workspace stays on disk.
    pub async fn remove(&self, session: &str) -> Result<bool, SessionError> {
        validate_key(session)?;
        let (key, names) = self.names(session);
        self.ready.lock().unwrap().remove(&key);
        let existed = self.runtime.inspect_container(&names.name).await?.is_some();
        self.runtime.remove_container(&names.name).await?;
        self.store.forget_session(session)?;
        Ok(existed)
    }

    async fn ensure_slow(
        &self,
        key: &str,
        names: &ContainerName,
    ) -> Result<SessionContainer, SessionError> {
        let sandbox = &self.config.sandbox;
        let workspace = self.workspace_dir(&names.slug);
        let run_dir = self.home.run_dir(&names.slug);
        let mut warning = None;
        let want_hash = config_hash(sandbox);
        if let Some(existing) = self.runtime.inspect_container(&names.name).await? {
            let owned = existing.labels.get(MOAT_LABEL).map(String::as_str) == Some(key);
            let matches = existing.labels.get(HASH_LABEL) == Some(&want_hash);
            let recently_used = self
                .store
                .container_last_used(&names.name)?
                .is_some_and(|t| now_ms() - t < RECENT_USE_MS);
            if owned && (matches || recently_used) {
                if !matches {
                    warning = Some(format!(
                        "the sandbox config changed, but container {} was used in the last 5 minutes, so it was kept; run `moat sessions rm {key}` to recreate it",
                        names.name
                    ));
                }
                self.prepare_dirs(&workspace, &run_dir)?;
                if !existing.running {
                    self.runtime.start_container(&existing.id).await?;
                }
                return Ok(SessionContainer {
                    key: key.to_string(),
                    name: names.name.clone(),
                    id: existing.id,
                    workspace,
                    run_dir,
                    warning,
                });
            }
            tracing::info!(container = %names.name, "recreating container: config changed");
            self.runtime.remove_container(&existing.id).await?;
        }
        if !self.runtime.image_exists(&sandbox.image).await? {
            return Err(SessionError::NoImage(sandbox.image.clone()));
        }
        self.prepare_dirs(&workspace, &run_dir)?;
        let spec = build_spec(sandbox, &names.name, key, &workspace, &run_dir, now_ms());
        let id = self.runtime.create_container(&spec).await?;
        if let Err(e) = self.runtime.start_container(&id).await {
            let _ = self.runtime.remove_container(&id).await;
            return Err(e.into());
        }
        if !sandbox.setup_command.trim().is_empty() {
            let argv = vec!["sh".into(), "-lc".into(), sandbox.setup_command.clone()];
            let (code, output) = self.runtime.exec_capture(&id, argv, None).await?;
            if code != 0 {
                // Nothing half-set-up is left behind: the next command retries from scratch.
                let _ = self.runtime.remove_container(&id).await;
                let text = String::from_utf8_lossy(&output);
                let tail: String = text
                    .chars()
                    .rev()
                    .take(2000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                return Err(SessionError::Setup { code, output: tail });
            }
        }
        Ok(SessionContainer {
            key: key.to_string(),
            name: names.name.clone(),
            id,
            workspace,
            run_dir,
            warning,
        })
    }

    fn prepare_dirs(&self, workspace: &Path, run_dir: &Path) -> Result<(), SessionError> {
        let (uid, gid) = self.config.sandbox.uid_gid();
        let dir_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SessionError::Dir { path, source }
        };
        super::dirs::prepare_workspace(workspace, uid, gid).map_err(dir_err(workspace))?;
        super::dirs::prepare_run_dir(run_dir).map_err(dir_err(run_dir))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::{Call, FakeRuntime};

    fn sessions(fake: &FakeRuntime, config: Config, home: &Path) -> Sessions {
        Sessions::new(
            Arc::new(fake.clone()),
            Arc::new(Store::in_memory().unwrap()),
            Arc::new(config),
            Home::at(home),
        )
    }

    #[tokio::test]
    async fn creates_once_then_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let s = sessions(&fake, Config::default(), dir.path());
        let a = s.ensure("main").await.unwrap();
        let b = s.ensure("main").await.unwrap();
        assert_eq!(a.id, b.id);
        let creates = fake
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::Create(_)))
            .count();
        assert_eq!(creates, 1);
        assert!(a.workspace.is_dir() && a.run_dir.is_dir());
    }

    #[tokio::test]
    async fn adopts_and_restarts_a_stopped_container() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let first = sessions(&fake, Config::default(), dir.path());
        let a = first.ensure("main").await.unwrap();
        fake.stop(&a.name);
        // A new moat (empty cache) finds the container by name and starts it.
        let second = sessions(&fake, Config::default(), dir.path());
        let b = second.ensure("main").await.unwrap();
        assert_eq!(a.id, b.id);
        assert!(fake.calls().contains(&Call::Start(a.id.clone())));
    }

    #[tokio::test]
    async fn config_change_recreates_unless_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let store = Arc::new(Store::in_memory().unwrap());
        let mk = |config: Config| {
            Sessions::new(
                Arc::new(fake.clone()),
                store.clone(),
                Arc::new(config),
                Home::at(dir.path()),
            )
        };
        let a = mk(Config::default()).ensure("main").await.unwrap();
        let mut changed = Config::default();
        changed.sandbox.memory = "1g".into();
        // Used just now: kept, with a warning naming the fix.
        let b = mk(changed.clone()).ensure("main").await.unwrap();
        assert_eq!(a.id, b.id);
        assert!(b
            .warning
            .as_deref()
            .unwrap()
            .contains("moat sessions rm main"));
        // Not used for a while: recreated.
        store
            .touch_session("main", &a.name, now_ms() - RECENT_USE_MS - 1)
            .unwrap();
        let c = mk(changed).ensure("main").await.unwrap();
        assert_ne!(a.id, c.id);
        assert!(c.warning.is_none());
    }

    #[tokio::test]
    async fn bad_key_is_refused_before_any_engine_call() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let s = sessions(&fake, Config::default(), dir.path());
        let err = s.ensure("bad key").await.unwrap_err();
        assert!(err.to_string().contains("bad key"));
        assert!(fake.calls().is_empty());
    }
}
