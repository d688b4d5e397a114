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

use crate::config::{Config, SandboxConfig, WorkspaceAccess};
use crate::home::Home;
use crate::runtime::{Engine, Executor, RuntimeError};
use crate::store::{now_ms, Store, StoreError};

use super::container_name::{container_key, ContainerName};
use super::disk_image::{DiskError, DiskImage, DiskPlan};
use super::spec::{
    build_spec, config_hash, GitMode, DISK_LABEL, GIT_LABEL, HASH_LABEL, MOAT_LABEL, POOL_LABEL,
};
use crate::session_key::{validate_key, KeyError};

/// How recently a container must have been used to be spared recreation on a config change.
const RECENT_USE_MS: i64 = 5 * 60 * 1000;

/// How long `sandbox.setup_command` may run in a new container before moat ends it and
/// removes the container (docs/helper.md, "Deadlines").
const SETUP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

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
    #[error("find image `{0}`: build it with `{cmd}` (or set sandbox.image)", cmd = build_command(.0))]
    NoImage(String),
    #[error("run sandbox.setup_command (exit code {code}): {output}")]
    Setup { code: i64, output: String },
    #[error(transparent)]
    Choice(#[from] super::setup::SetupError),
    #[error(transparent)]
    Egress(#[from] crate::egress::lifecycle::LifecycleError),
    #[error("use sandbox.runtime `{name}`: the engine offers only {offered}; for gVisor run scripts/setup-runsc (it installs runsc and registers it with the engine), or clear sandbox.runtime")]
    NoRuntime { name: String, offered: String },
    /// A host workspace whose git metadata cannot be mounted read-only.
    #[error(transparent)]
    Guard(#[from] super::git_guard::GuardError),
    /// The session's own filesystem (docs/security.md, "Disk bound").
    #[error(transparent)]
    Disk(#[from] DiskError),
}

impl SessionError {
    /// The failure class the edges map (`crate::contract::FailureKind`).
    pub fn kind(&self) -> crate::contract::FailureKind {
        use crate::contract::FailureKind;
        match self {
            Self::Key(_) => FailureKind::Invalid,
            Self::Choice(super::setup::SetupError::Conflict { .. }) => FailureKind::Conflict,
            Self::Choice(c) if c.is_callers() => FailureKind::Invalid,
            // The image or runtime the configuration names is missing: the operator's to fix.
            Self::NoImage(_) | Self::NoRuntime { .. } => FailureKind::Unavailable,
            // So is a checkout moat cannot guard (a symlinked .git, a missing hooks path).
            Self::Guard(super::git_guard::GuardError::Io { .. }) => FailureKind::Internal,
            Self::Guard(_) => FailureKind::Unavailable,
            _ => FailureKind::Internal,
        }
    }
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
    /// The uid:gid commands run as, which files moat makes for them (run files, files the
    /// file tools write) are handed to: `sandbox.user`, or a host workspace's owner.
    pub owner: (u32, u32),
    /// The workspace is the operator's own directory mounted read-only (`--read-only`), so
    /// moat's file tools must not write it either.
    pub read_only: bool,
    /// Host paths inside a writable workspace that the sandbox sees read-only (a host
    /// checkout's git metadata, docs/security.md, "Host workspaces"): moat's file tools must
    /// not write them either, or they would get round the mount.
    pub read_only_parts: Vec<PathBuf>,
    /// Set when the container does not match the config but was kept (recently used).
    pub warning: Option<String>,
    /// The session's own filesystem holding `workspace` and `run_dir`, when it has one: the
    /// kernel bounds it, so the disk guard leaves it alone (docs/security.md, "Disk bound").
    pub disk: Option<DiskImage>,
}

/// See the module docs.
pub struct Sessions {
    /// Containers, images and networks.
    pub(super) runtime: Arc<dyn Engine>,
    /// Commands in session containers (the helper transport or the engine's exec): the
    /// checks a session runs in its container go the way its commands go.
    commands: Arc<dyn Executor>,
    pub(super) store: Arc<Store>,
    pub(super) config: Arc<Config>,
    pub(super) home: Home,
    /// Containers known to be running, by container key. A std mutex: never held across
    /// `.await`.
    ready: Mutex<HashMap<String, SessionContainer>>,
    /// One creation at a time per container key, so two first commands do not race to create.
    creating: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Containers over `sandbox.workspace_max_bytes` (set by the disk guard), with the warning
    /// each command there gets until space is freed.
    over_disk: Mutex<HashMap<String, String>>,
    /// The egress control socket served for each container with `sandbox.network = "egress"`
    /// (by container name); aborted when the session goes (docs/security.md, "Network
    /// egress").
    egress: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// One egress start at a time: a daemon's adoption at start and a command's ensure could
    /// otherwise both bind the same control socket, and one of them fail.
    egress_start: tokio::sync::Mutex<()>,
    /// What each container's egress gate is built from, handed over by the app.
    egress_gates: crate::egress::gate::Gates,
    /// What the engine said each container (by id) has from the host, for
    /// [`Sessions::writable_roots`]: mounts never change after a container is created, so one
    /// inspect per container is enough; the list of containers is asked for every time.
    pub(super) mounts_seen: Mutex<HashMap<String, Vec<crate::runtime::HostMount>>>,
    /// How `sandbox.workspace_max_bytes` is held, decided once (docs/security.md, "Disk
    /// bound").
    disks: DiskPlan,
    /// The warm pool's owner task, once the daemon started it (docs/pool.md); unset in every
    /// other moat, whose new sessions start containers.
    pub(super) pool: std::sync::OnceLock<super::pool::PoolHandle>,
}

impl Sessions {
    pub fn new(
        runtime: Arc<dyn Engine>,
        commands: Arc<dyn Executor>,
        store: Arc<Store>,
        config: Arc<Config>,
        home: Home,
        egress_gates: crate::egress::gate::Gates,
    ) -> Self {
        let disks = if runtime.binds_host_paths() {
            DiskPlan::decide(config.sandbox.disk_bound, config.sandbox.workspace_max())
        } else {
            DiskPlan::Watch
        };
        Self {
            runtime,
            commands,
            store,
            home,
            ready: Mutex::new(HashMap::new()),
            creating: Mutex::new(HashMap::new()),
            over_disk: Mutex::new(HashMap::new()),
            egress: Mutex::new(HashMap::new()),
            egress_start: tokio::sync::Mutex::new(()),
            egress_gates,
            mounts_seen: Mutex::new(HashMap::new()),
            disks,
            config,
            pool: std::sync::OnceLock::new(),
        }
    }

    /// What runs commands in session containers.
    pub fn commands(&self) -> &Arc<dyn Executor> {
        &self.commands
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
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
        let lock = self.creation_lock(&key);
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

    /// The lock one creation of container `key` holds: a second creation, and a removal,
    /// wait for it.
    fn creation_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.creating
            .lock()
            .unwrap()
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    /// The containers this moat has in use.
    pub fn in_use(&self) -> Vec<SessionContainer> {
        self.ready.lock().unwrap().values().cloned().collect()
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
        self.commands.release(name);
    }

    /// Removes a session's container; its workspace stays on disk, but a host workspace is
    /// no longer the session's: the next one may choose another.
    pub async fn remove(&self, session: &str) -> Result<bool, SessionError> {
        self.remove_with(session, false).await
    }

    /// [`remove`](Self::remove); with `purge`, the directories moat made for the session go
    /// too: its default workspace (never a host workspace, which is the operator's) and its
    /// run directory. Their contents are the sandbox's, so the deletion never follows a
    /// symlink out of them (`remove_dir_all` works beneath directory descriptors).
    pub async fn remove_with(&self, session: &str, purge: bool) -> Result<bool, SessionError> {
        validate_key(session)?;
        let (key, names) = self.names(session);
        // A creation in flight finishes first, then goes with the rest: removing under it
        // would leave the container it is making running, with nothing left that knows it.
        let lock = self.creation_lock(&key);
        let _guard = lock.lock().await;
        self.ready.lock().unwrap().remove(&key);
        let existed = self.runtime.inspect_container(&names.name).await?.is_some();
        self.runtime.remove_container(&names.name).await?;
        self.commands.release(&names.name);
        let host = self.store.session_workspace(session)?;
        let disk_slug = self.disk_slug(&key, &names)?;
        self.remove_egress(&names.name).await?;
        self.store.forget_session(session)?;
        self.store.forget_session_setup(session)?;
        self.store.reset_sticky_state(session, true)?;
        if purge && key == session {
            // Unmounted first (a session without a disk has nothing to unmount): what is left
            // at the usual places is their empty mount points, or an older session's files.
            let disk = DiskImage::new(self.home.root(), &disk_slug);
            let (ws, run) = (
                self.workspace_dir(&names.slug),
                self.home.run_dir(&names.slug),
            );
            tokio::task::spawn_blocking(move || disk.remove(&ws, &run))
                .await
                .map_err(|e| DiskError::Io {
                    path: self.home.root().join(super::disk_image::DISKS_DIR),
                    source: std::io::Error::other(e),
                })??;
            let mut dirs = vec![self.home.run_dir(&names.slug)];
            if host.is_none() {
                dirs.push(self.workspace_dir(&names.slug));
            }
            for dir in dirs {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => return Err(SessionError::Dir { path: dir, source }),
                }
            }
            // Its disk is gone: a later session of this key starts afresh (and may claim).
            self.store.forget_claim(session)?;
        }
        Ok(existed)
    }

    /// Creates `session` (its container) with `setup` (a host workspace checked by
    /// [`super::setup::inspect`], an image, a network). A session that already exists keeps
    /// its setup: asking for another one is an error naming both.
    pub async fn create(
        &self,
        session: &str,
        setup: &crate::store::SessionSetup,
    ) -> Result<SessionContainer, SessionError> {
        use super::setup::{check_image, check_network, check_same, SetupError};
        validate_key(session)?;
        if let Some(image) = &setup.image {
            check_image(image)?;
        }
        if let Some(network) = &setup.network {
            check_network(network)?;
        }
        let (key, names) = self.names(session);
        let current = self.store.session_setup(session)?;
        if !setup.is_empty() && key != session {
            return Err(SetupError::Shared(session.to_string()).into());
        }
        let exists = current.is_none()
            && (self.store.session(session)?.is_some()
                || self.runtime.inspect_container(&names.name).await?.is_some());
        let default = exists.then(|| self.workspace_dir(&names.slug));
        check_same(session, current.as_ref(), default.as_deref(), setup)?;
        if current.is_none() && !setup.is_empty() {
            // Two creators racing: the first recorded wins, the other gets the conflict.
            let recorded = self.store.claim_session_setup(session, setup)?;
            check_same(session, Some(&recorded), None, setup)?;
        }
        self.ensure(session).await
    }

    /// The host workspace recorded for a session, if any (for `sessions list` and `show`).
    pub fn host_workspace(
        &self,
        session: &str,
    ) -> Result<Option<crate::store::WorkspaceRow>, SessionError> {
        Ok(self.store.session_workspace(session)?)
    }

    /// Removes a container's egress proxy and network and stops serving its control socket
    /// (nothing happens for a container without them).
    pub async fn remove_egress(&self, container: &str) -> Result<(), SessionError> {
        if let Some(task) = self.egress.lock().unwrap().remove(container) {
            task.abort();
        }
        crate::egress::lifecycle::remove(self.runtime.as_ref(), container).await?;
        let _ = std::fs::remove_dir_all(self.egress_dir(container));
        Ok(())
    }

    /// Serves the control socket of every running egress container this moat knows (after
    /// a daemon restart), so their proxies get answers before any command touches them.
    pub async fn adopt_egress(&self) {
        let Ok(list) = self.runtime.list_containers(MOAT_LABEL).await else {
            return;
        };
        for c in list {
            let Some(key) = c.labels.get(MOAT_LABEL) else {
                continue;
            };
            let known = matches!(self.store.container_last_used(&c.name), Ok(Some(_)));
            let proxy = crate::egress::container::EgressNames::for_container(&c.name).proxy;
            let has_proxy = matches!(self.runtime.inspect_container(&proxy).await, Ok(Some(_)));
            if !c.running || !known || !has_proxy {
                continue;
            }
            // The session's own settings decide, as when it was made.
            let setup = self
                .store
                .session_setup(key)
                .ok()
                .flatten()
                .unwrap_or_default();
            let sandbox = effective_sandbox(&self.config.sandbox, &setup);
            if let Err(e) = self.ensure_egress(key, &c.name, &sandbox).await {
                tracing::warn!(container = %c.name, "serve the egress channel again: {e}");
            }
        }
    }

    /// With `sandbox.network = "egress"`: the proxy, its network and the control socket for
    /// `container`, created or adopted (a new daemon serves the socket again).
    async fn ensure_egress(
        &self,
        key: &str,
        container: &str,
        sandbox: &crate::config::SandboxConfig,
    ) -> Result<(), SessionError> {
        if sandbox.network != crate::egress::container::EGRESS_NETWORK {
            return Ok(());
        }
        let _one = self.egress_start.lock().await;
        // While this daemon serves the socket, only the proxy may need starting again.
        let serving = self
            .egress
            .lock()
            .unwrap()
            .get(container)
            .is_some_and(|task| !task.is_finished());
        self.ensure_egress_parts(key, container, sandbox, !serving)
            .await
    }

    async fn ensure_egress_parts(
        &self,
        key: &str,
        container: &str,
        sandbox: &crate::config::SandboxConfig,
        listen: bool,
    ) -> Result<(), SessionError> {
        if !listen {
            let names = crate::egress::container::EgressNames::for_container(container);
            if let Some(c) = self.runtime.inspect_container(&names.proxy).await? {
                if c.running {
                    return Ok(());
                }
            }
        }
        let policy = crate::egress::EgressPolicy::parse(
            &sandbox.egress.allow,
            &sandbox.egress.deny,
            sandbox.egress.ask,
        )
        .map_err(crate::egress::lifecycle::LifecycleError::from)?;
        let gate =
            self.egress_gates
                .gate(key, policy, sandbox.egress.grant_minutes as i64 * 60_000);
        let dir = self.egress_dir(container);
        let task = crate::egress::lifecycle::ensure(
            self.runtime.as_ref(),
            container,
            &dir,
            &sandbox.image,
            &sandbox.egress,
            gate,
        )
        .await?;
        if let Some(old) = self
            .egress
            .lock()
            .unwrap()
            .insert(container.to_string(), task)
        {
            old.abort();
        }
        Ok(())
    }

    /// The host directory holding a container's egress control socket: named by a hash, so
    /// the socket's path stays inside the unix limit of 108 bytes whatever the key.
    fn egress_dir(&self, container: &str) -> PathBuf {
        use sha2::{Digest, Sha256};
        let hash = hex::encode(&Sha256::digest(container.as_bytes())[..6]);
        self.home.root().join("egress").join(hash)
    }

    /// Refuses a `sandbox.runtime` the engine does not offer, naming the fix.
    pub(super) async fn check_runtime(&self, sandbox: &SandboxConfig) -> Result<(), SessionError> {
        let wanted = &sandbox.runtime;
        if wanted.is_empty() {
            return Ok(());
        }
        let offered = self.runtime.runtimes().await?;
        if offered.iter().any(|r| r == wanted) {
            return Ok(());
        }
        Err(SessionError::NoRuntime {
            name: wanted.clone(),
            offered: offered.join(", "),
        })
    }

    /// How the git metadata of the host workspace `row` at `workspace` is mounted
    /// (docs/security.md, "Host workspaces"); `None` for a default workspace.
    ///
    /// The scan reads the checkout's index (up to 256 MiB), so it runs on a blocking thread,
    /// never on an async worker.
    async fn git_mode(
        &self,
        row: Option<&crate::store::WorkspaceRow>,
        workspace: &Path,
        sandbox: &SandboxConfig,
    ) -> Result<Option<GitMode>, SessionError> {
        if row.is_none() {
            return Ok(None);
        }
        Ok(Some(if sandbox.workspace_access == WorkspaceAccess::Ro {
            GitMode::ReadOnlyWorkspace
        } else if sandbox.git_writable {
            GitMode::Writable
        } else {
            let root = workspace.to_path_buf();
            let shown = root.display().to_string();
            let guard = tokio::task::spawn_blocking(move || super::git_guard::scan(&root))
                .await
                .map_err(|e| super::git_guard::GuardError::Io {
                    root: shown.clone(),
                    path: shown,
                    source: std::io::Error::other(e),
                })??;
            GitMode::Guarded(guard)
        }))
    }

    /// The hash a container of this session should carry: a host workspace, and how its git
    /// metadata is mounted, are part of what the container is. Without one the hash is what
    /// it always was.
    fn want_hash(
        sandbox: &SandboxConfig,
        row: Option<&crate::store::WorkspaceRow>,
        git: Option<&GitMode>,
    ) -> String {
        match (row, git) {
            (Some(row), Some(git)) => super::spec::hash_with_workspace(sandbox, &row.path, git),
            _ => config_hash(sandbox),
        }
    }

    async fn ensure_slow(
        &self,
        key: &str,
        names: &ContainerName,
    ) -> Result<SessionContainer, SessionError> {
        let setup = self.store.session_setup(key)?.unwrap_or_default();
        let host = setup.workspace.clone();
        let sandbox = &effective_sandbox(&self.config.sandbox, &setup);
        // A new session whose shape the warm pool keeps claims a ready container before
        // anything is made for it here (docs/pool.md, "Claims").
        if host.is_none()
            && sandbox.network != crate::egress::container::EGRESS_NETWORK
            && self.pool.get().is_some()
            && self.runtime.inspect_container(&names.name).await?.is_none()
        {
            if let Some(c) = self.claim_from_pool(key, names, sandbox).await? {
                return Ok(c);
            }
        }
        let workspace = match &host {
            Some(row) => super::setup::reopen(row).map_err(|source| SessionError::Dir {
                path: row.path.clone().into(),
                source,
            })?,
            None => self.workspace_dir(&names.slug),
        };
        let run_dir = self.home.run_dir(&names.slug);
        let disk_slug = self.disk_slug(key, names)?;
        let disk = self
            .session_disk(&disk_slug, host.is_some(), &workspace, &run_dir, sandbox)
            .await?;
        let mut warning = None;
        let mut git = self.git_mode(host.as_ref(), &workspace, sandbox).await?;
        let mut want_hash = Self::want_hash(sandbox, host.as_ref(), git.as_ref());
        let owner = sandbox.uid_gid();
        let read_only = host.as_ref().is_some_and(|r| r.read_only);
        let read_only_parts =
            |git: &Option<GitMode>| git.as_ref().map(|g| g.read_only_paths(&workspace));
        if let Some(existing) = self.runtime.inspect_container(&names.name).await? {
            let label = existing.labels.get(MOAT_LABEL).map(String::as_str);
            // A warm container this key claimed: its labels still name the pool's slot.
            let claimed = existing.labels.contains_key(POOL_LABEL)
                && label.is_some()
                && self.store.claimed_slot(key)?.as_deref() == label;
            let owned = label == Some(key) || claimed;
            let matches = existing.labels.get(HASH_LABEL) == Some(&want_hash);
            let recently_used = self
                .store
                .container_last_used(&names.name)?
                .is_some_and(|t| now_ms() - t < RECENT_USE_MS);
            // Made before git metadata was guarded, the container lets the sandbox write it:
            // never kept, however recently used (docs/security.md, "Host workspaces").
            let unguarded = git.as_ref().is_some_and(GitMode::guards)
                && !existing.labels.contains_key(GIT_LABEL);
            // Made with its directories elsewhere than where they now are (onto a disk, or
            // off one): it would write where moat no longer looks, unbounded. Never kept.
            let moved = disk.is_some() != existing.labels.contains_key(DISK_LABEL);
            // A claimed container's mounts name the slot's old places, so once stopped it
            // cannot start again: it is made anew over the same directories.
            let restartable = !claimed || existing.running;
            if owned && !moved && restartable && (matches || (recently_used && !unguarded)) {
                if !matches {
                    warning = Some(format!(
                        "the sandbox config changed, but container {} was used in the last 5 minutes, so it was kept; run `moat sessions rm {key}` to recreate it",
                        names.name
                    ));
                }
                self.prepare_dirs(&workspace, &run_dir, sandbox, host.is_some())?;
                self.ensure_egress(key, &names.name, sandbox).await?;
                if !existing.running {
                    // Nothing runs in it: what its last helper left goes (docs/helper.md,
                    // "Trust"), and so does what this moat knew of it (a connection, a time
                    // to retry after a failed start), so its first command starts a helper.
                    self.reset_helper(&run_dir)?;
                    self.commands.release(&names.name);
                    self.runtime.start_container(&existing.id).await?;
                    crate::metrics::metrics().sandbox_restarted();
                }
                return Ok(SessionContainer {
                    key: key.to_string(),
                    name: names.name.clone(),
                    id: existing.id,
                    workspace: workspace.clone(),
                    run_dir,
                    owner,
                    read_only,
                    read_only_parts: read_only_parts(&git).unwrap_or_default(),
                    warning,
                    disk,
                });
            }
            if unguarded {
                tracing::info!(container = %names.name, "recreating container: its .git is writable");
            } else {
                tracing::info!(container = %names.name, "recreating container: config changed");
            }
            self.runtime.remove_container(&existing.id).await?;
            self.commands.release(&names.name);
            if sandbox.network != crate::egress::container::EGRESS_NETWORK {
                // Left from an egress config: nothing may stay behind.
                self.remove_egress(&names.name).await?;
            }
            // Looked at again now that the old container is gone: nothing it did after the
            // first look is mounted.
            git = self.git_mode(host.as_ref(), &workspace, sandbox).await?;
            want_hash = Self::want_hash(sandbox, host.as_ref(), git.as_ref());
        }
        if !self.runtime.image_exists(&sandbox.image).await? {
            return Err(SessionError::NoImage(sandbox.image.clone()));
        }
        self.check_runtime(sandbox).await?;
        self.prepare_dirs(&workspace, &run_dir, sandbox, host.is_some())?;
        self.reset_helper(&run_dir)?;
        // With a disk, the container names the disk's own directories: an engine that does not
        // see moat's mounts finds no such directory and refuses the container, where the
        // usual paths would mount the empty directories under them, unbounded.
        let (ws_source, run_source) = match &disk {
            Some(d) => (d.workspace(), d.run()),
            None => (workspace.clone(), run_dir.clone()),
        };
        let mut spec = build_spec(sandbox, &names.name, key, &ws_source, &run_source, now_ms());
        spec.labels.insert(HASH_LABEL.to_string(), want_hash);
        if let Some(d) = &disk {
            add_disk_mounts(&mut spec, d);
        }
        if let Some(git) = &git {
            super::spec::add_git_mounts(&mut spec, &workspace, git);
        }
        let egress = sandbox.network == crate::egress::container::EGRESS_NETWORK;
        if egress {
            let parts = crate::egress::container::EgressNames::for_container(&names.name);
            spec.network = parts.network;
            spec.env
                .extend(crate::egress::container::proxy_env(&parts.proxy));
        }
        let created = async {
            if egress {
                self.ensure_egress(key, &names.name, sandbox).await?;
                // The sandbox's resolver answers its proxy's name and forwards every other
                // name to these: the network's gateway, which no one holds, so a name reaches
                // no DNS server whatever the host's own resolvers are (the engine forwards to a
                // loopback resolver of the host from the host's namespace; docs/security.md,
                // "Network egress").
                let parts = crate::egress::container::EgressNames::for_container(&names.name);
                let labels = std::collections::BTreeMap::from([(
                    crate::egress::container::EGRESS_LABEL.to_string(),
                    names.name.clone(),
                )]);
                spec.dns = self
                    .runtime
                    .ensure_network(&parts.network, &labels)
                    .await?
                    .gateways;
            }
            self.create_and_start(&spec, sandbox).await
        }
        .await;
        let id = match created {
            Ok(id) => id,
            Err(e) => {
                // Nothing half-made stays: the proxy and network go with the failed sandbox.
                if egress {
                    let _ = self.remove_egress(&names.name).await;
                }
                return Err(e);
            }
        };
        Ok(SessionContainer {
            key: key.to_string(),
            name: names.name.clone(),
            id,
            read_only_parts: read_only_parts(&git).unwrap_or_default(),
            workspace,
            run_dir,
            owner,
            read_only,
            warning,
            disk,
        })
    }

    /// The session's own filesystem, made and mounted onto `workspace` and `run_dir`, when
    /// this moat holds the bound with one (docs/security.md, "Disk bound"). None for a host
    /// workspace (the operator's directory), and for a session whose directories hold files
    /// from before it had a disk (the guard watches those until the session is removed).
    pub(super) async fn session_disk(
        &self,
        slug: &str,
        host_workspace: bool,
        workspace: &Path,
        run_dir: &Path,
        sandbox: &SandboxConfig,
    ) -> Result<Option<DiskImage>, SessionError> {
        if host_workspace {
            return Ok(None);
        }
        match &self.disks {
            DiskPlan::Watch => return Ok(None),
            DiskPlan::Refused(why) => return Err(DiskError::Unavailable(why.clone()).into()),
            DiskPlan::Images => {}
        }
        let disk = DiskImage::new(self.home.root(), slug);
        let holds_files = |d: &Path| std::fs::read_dir(d).is_ok_and(|mut e| e.next().is_some());
        if !disk.exists() && (holds_files(workspace) || holds_files(run_dir)) {
            return Ok(None);
        }
        let bytes = sandbox.workspace_max();
        let (d, ws, run) = (disk.clone(), workspace.to_path_buf(), run_dir.to_path_buf());
        tokio::task::spawn_blocking(move || {
            d.ensure(bytes)?;
            d.bind(&ws, &run)
        })
        .await
        .map_err(|e| DiskError::Io {
            path: workspace.to_path_buf(),
            source: std::io::Error::other(e),
        })??;
        Ok(Some(disk))
    }

    /// Creates and starts a session container and runs `sandbox.setup_command` in it; a
    /// failure removes what was made.
    pub(super) async fn create_and_start(
        &self,
        spec: &crate::runtime::ContainerSpec,
        sandbox: &SandboxConfig,
    ) -> Result<String, SessionError> {
        let begun = std::time::Instant::now();
        let id = self.runtime.create_container(spec).await?;
        if let Err(e) = self.runtime.start_container(&id).await {
            let _ = self.runtime.remove_container(&id).await;
            return Err(e.into());
        }
        crate::metrics::metrics().sandbox_created(begun.elapsed().as_secs_f64());
        if !sandbox.setup_command.trim().is_empty() {
            let argv = vec!["sh".into(), "-lc".into(), sandbox.setup_command.clone()];
            // The operator's own command (package installs): long, but not for ever.
            let ran = self
                .commands
                .exec_capture_within(&id, argv, None, SETUP_DEADLINE)
                .await;
            let (code, output) = match ran {
                Ok(ran) => ran,
                Err(e) => {
                    // Past the deadline, or the engine failed: as for a failed setup.
                    let _ = self.runtime.remove_container(&id).await;
                    return Err(e.into());
                }
            };
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
        Ok(id)
    }

    /// Clears what an earlier container's helper left in `run_dir` (its socket, its record),
    /// for a container about to start with no process in it (docs/helper.md, "Trust").
    fn reset_helper(&self, run_dir: &Path) -> Result<(), SessionError> {
        crate::runtime::helper::socket::reset(run_dir).map_err(|source| SessionError::Dir {
            path: run_dir.to_path_buf(),
            source,
        })
    }

    /// Makes the run directory, and the default workspace; a host workspace is the
    /// operator's own directory and is left as it is (its owner is who the sandbox runs as).
    pub(super) fn prepare_dirs(
        &self,
        workspace: &Path,
        run_dir: &Path,
        sandbox: &SandboxConfig,
        host_workspace: bool,
    ) -> Result<(), SessionError> {
        let (uid, gid) = sandbox.uid_gid();
        let dir_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SessionError::Dir { path, source }
        };
        if !host_workspace {
            super::dirs::prepare_workspace(workspace, uid, gid).map_err(dir_err(workspace))?;
        }
        super::dirs::prepare_run_dir(run_dir).map_err(dir_err(run_dir))?;
        Ok(())
    }
}

/// Labels a container whose directories are its disk's, and mounts the disk's helper
/// directory: the one place under /run/moat the sandbox may make entries lives on the
/// workspace's filesystem (`DiskImage::helper`).
pub(super) fn add_disk_mounts(spec: &mut crate::runtime::ContainerSpec, d: &DiskImage) {
    spec.labels.insert(DISK_LABEL.to_string(), "1".into());
    spec.mounts.push(crate::runtime::Mount {
        source: d.helper().display().to_string(),
        target: format!(
            "{}/{}",
            super::spec::RUN_MOUNT,
            crate::runtime::helper::socket::DIR
        ),
        read_only: false,
    });
}

/// The command that builds `image` when it is one of moat's own.
fn build_command(image: &str) -> &'static str {
    if image == crate::config::e2b::BASE_IMAGE {
        "moat image build --e2b"
    } else {
        "moat image build"
    }
}

/// The sandbox settings a session's container is made with: the config, with the session's
/// image and network, and for a host workspace its user, read-only mount, writable git
/// metadata when asked for, and a usable HOME (docs/security.md, "Host workspaces").
pub(super) fn effective_sandbox(
    config: &SandboxConfig,
    setup: &crate::store::SessionSetup,
) -> SandboxConfig {
    let mut sandbox = config.clone();
    if let Some(image) = &setup.image {
        sandbox.image = image.clone();
    }
    if let Some(network) = &setup.network {
        sandbox.network = network.clone();
    }
    if let Some(runtime) = &setup.runtime {
        sandbox.runtime = runtime.clone();
    }
    sandbox.root = setup.root;
    if let Some(home) = &setup.home {
        sandbox.home_mount = home.clone();
    }
    if let Some(row) = &setup.workspace {
        if row.user != config.user {
            sandbox
                .env
                .entry("HOME".into())
                .or_insert_with(|| super::setup::OWNER_HOME.into());
        }
        sandbox.user = row.user.clone();
        if row.read_only {
            sandbox.workspace_access = WorkspaceAccess::Ro;
        }
        if row.git_writable {
            sandbox.git_writable = true;
        }
    }
    sandbox
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::{Call, FakeRuntime};

    fn sessions(fake: &FakeRuntime, config: Config, home: &Path) -> Sessions {
        let store = Arc::new(Store::in_memory().unwrap());
        Sessions::new(
            Arc::new(fake.clone()),
            Arc::new(fake.clone()),
            store.clone(),
            Arc::new(config),
            Home::at(home),
            crate::egress::gate::Gates::over(&store),
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
                Arc::new(fake.clone()),
                store.clone(),
                Arc::new(config),
                Home::at(dir.path()),
                crate::egress::gate::Gates::over(&store),
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

    fn egress_config() -> Config {
        let mut c = Config::default();
        c.sandbox.network = "egress".into();
        c.sandbox.egress.allow = vec!["pkgs.example.org".into()];
        c.sandbox.egress.outbound_network = "out".into();
        c
    }

    #[tokio::test]
    async fn egress_sessions_get_their_network_and_proxy_and_lose_them_on_rm() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let s = sessions(&fake, egress_config(), dir.path());
        let c = s.ensure("main").await.unwrap();
        let names = crate::egress::container::EgressNames::for_container(&c.name);
        let calls = fake.calls();
        // Network first, then the proxy on it and on the outbound network, then the sandbox.
        let at = |want: &Call| calls.iter().position(|c| c == want).unwrap();
        let net = at(&Call::CreateNetwork(names.network.clone()));
        let proxy = at(&Call::Create(names.proxy.clone()));
        let proxy_id = fake
            .inspect_container(&names.proxy)
            .await
            .unwrap()
            .unwrap()
            .id;
        let connect = at(&Call::Connect {
            network: "out".into(),
            container: proxy_id,
        });
        let sandbox = at(&Call::Create(c.name.clone()));
        assert!(
            net < proxy && proxy < connect && connect < sandbox,
            "{calls:?}"
        );
        let spec = fake.spec(&c.name).unwrap();
        assert_eq!(spec.network, names.network);
        assert_eq!(
            spec.dns,
            ["10.99.0.1"],
            "the sandbox's resolver forwards nowhere"
        );
        assert!(spec
            .env
            .contains(&format!("HTTPS_PROXY=http://{}:3128", names.proxy)));
        // The sandbox never joins the outbound network.
        assert!(!calls
            .iter()
            .any(|x| matches!(x, Call::Connect { container, .. } if *container == c.id)));
        // The control socket exists, only for the proxy's user.
        let sock = s
            .egress_dir(&c.name)
            .join(crate::egress::control::SOCKET_NAME);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        assert!(s.remove("main").await.unwrap());
        let calls = fake.calls();
        assert!(
            calls.contains(&Call::Remove(names.proxy.clone())),
            "{calls:?}"
        );
        assert!(calls.contains(&Call::RemoveNetwork(names.network.clone())));
        // The host's side of the wall comes and goes with the network.
        let shut = calls
            .iter()
            .position(|c| *c == Call::ShutHostInput(names.network.clone()))
            .expect("the host drops input from the network");
        let open = calls
            .iter()
            .position(|c| *c == Call::OpenHostInput(names.network.clone()))
            .expect("the rule goes with the network");
        let removed = calls
            .iter()
            .position(|c| *c == Call::RemoveNetwork(names.network.clone()))
            .unwrap();
        assert!(shut < open && open < removed, "{calls:?}");
        assert!(!sock.exists());
    }

    #[tokio::test]
    async fn an_egress_network_made_without_the_wall_is_rebuilt_when_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let s = sessions(&fake, egress_config(), dir.path());
        let c = s.ensure("main").await.unwrap();
        let names = crate::egress::container::EgressNames::for_container(&c.name);
        // An older moat's network of the same name: the host had an address on it.
        fake.add_unwalled_network(&names.network, std::collections::BTreeMap::new());
        // A new daemon adopts the session.
        let s2 = sessions(&fake, egress_config(), dir.path());
        s2.ensure("main").await.unwrap();
        let calls = fake.calls();
        let at = |want: &Call| calls.iter().rposition(|c| c == want).unwrap();
        let out = at(&Call::Disconnect {
            network: names.network.clone(),
            container: c.name.clone(),
        });
        let gone = at(&Call::RemoveNetwork(names.network.clone()));
        let made = at(&Call::CreateNetwork(names.network.clone()));
        let back = at(&Call::Connect {
            network: names.network.clone(),
            container: c.name.clone(),
        });
        let proxy = at(&Call::Create(names.proxy.clone()));
        assert!(
            out < gone && gone < made && made < back && back < proxy,
            "{calls:?}"
        );
    }

    #[tokio::test]
    async fn a_missing_runtime_is_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let mut config = Config::default();
        config.sandbox.runtime = "runsc".into();
        let s = sessions(&fake, config, dir.path());
        let err = s.ensure("main").await.unwrap_err().to_string();
        assert!(
            err.contains("scripts/setup-runsc") && err.contains("runc"),
            "{err}"
        );
        assert!(!fake.calls().iter().any(|c| matches!(c, Call::Create(_))));
    }

    #[tokio::test]
    async fn a_host_workspace_is_fixed_for_the_sessions_life() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let s = sessions(&fake, Config::default(), dir.path());
        let row = |path: &Path, ro| crate::store::SessionSetup {
            workspace: Some(crate::store::WorkspaceRow {
                path: path.display().to_string(),
                read_only: ro,
                user: "4242:4243".into(),
                git_writable: false,
            }),
            ..Default::default()
        };
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let c = s.create("w", &row(&a, true)).await.unwrap();
        assert_eq!(
            (c.workspace.as_path(), c.owner, c.read_only),
            (a.as_path(), (4242, 4243), true)
        );
        // The same again is fine; another directory, or the same one writable, is not.
        s.create("w", &row(&a, true)).await.unwrap();
        for other in [row(&b, true), row(&a, false)] {
            let e = s.create("w", &other).await.unwrap_err().to_string();
            assert!(
                e.contains("moat sessions rm w") && e.contains(&a.display().to_string()),
                "{e}"
            );
        }
        // A session that exists with its default workspace cannot take a host one.
        s.ensure("plain").await.unwrap();
        let e = s.create("plain", &row(&a, false)).await.unwrap_err();
        assert!(e.to_string().contains("workspaces/"), "{e}");
        // Once removed, the session may be created with another one.
        s.remove("w").await.unwrap();
        let c = s.create("w", &row(&b, false)).await.unwrap();
        assert_eq!(c.workspace, b);
    }

    #[tokio::test]
    async fn a_host_checkouts_git_is_mounted_read_only_unless_the_operator_says() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        let fake = FakeRuntime::new();
        let store = Arc::new(Store::in_memory().unwrap());
        let mk = |config: Config| {
            Sessions::new(
                Arc::new(fake.clone()),
                Arc::new(fake.clone()),
                store.clone(),
                Arc::new(config),
                Home::at(dir.path()),
                crate::egress::gate::Gates::over(&store),
            )
        };
        let row = |git_writable| crate::store::SessionSetup {
            workspace: Some(crate::store::WorkspaceRow {
                path: ws.display().to_string(),
                read_only: false,
                user: "4242:4243".into(),
                git_writable,
            }),
            ..Default::default()
        };
        let git_mount = |name: &str| {
            fake.spec(name)
                .unwrap()
                .mounts
                .into_iter()
                .find(|m| m.target == "/workspace/.git")
        };
        let s = mk(Config::default());
        let c = s.create("g", &row(false)).await.unwrap();
        let m = git_mount(&c.name).expect("a .git mount");
        assert!(m.read_only && m.source == ws.join(".git").display().to_string());
        assert_eq!(c.read_only_parts, vec![ws.join(".git")]);
        assert!(fake.spec(&c.name).unwrap().labels[GIT_LABEL].starts_with("ro:"));
        // The operator's opt-in, per session: no mount, and recorded so.
        let w = s.create("w", &row(true)).await.unwrap();
        assert!(git_mount(&w.name).is_none());
        assert!(w.read_only_parts.is_empty());
        assert_eq!(fake.spec(&w.name).unwrap().labels[GIT_LABEL], "writable");
        // Or for every host workspace, in the configuration: another container.
        let mut all = Config::default();
        all.sandbox.git_writable = true;
        store
            .touch_session("g", &c.name, now_ms() - RECENT_USE_MS - 1)
            .unwrap();
        let again = mk(all).ensure("g").await.unwrap();
        assert_ne!(again.id, c.id);
        assert!(git_mount(&again.name).is_none());

        // A container made before .git was guarded (no label) is recreated even though it
        // was used a moment ago: it lets the sandbox write .git.
        let s = mk(Config::default());
        s.remove("g").await.unwrap();
        let c = s.create("g", &row(false)).await.unwrap();
        let mut legacy = fake.spec(&c.name).unwrap();
        fake.remove_container(&c.id).await.unwrap();
        legacy.labels.remove(GIT_LABEL);
        legacy.labels.insert(HASH_LABEL.into(), "old".into());
        legacy.mounts.retain(|m| m.target != "/workspace/.git");
        let old = fake.create_container(&legacy).await.unwrap();
        store.touch_session("g", &c.name, now_ms()).unwrap();
        let fresh = mk(Config::default()).ensure("g").await.unwrap();
        assert_ne!(fresh.id, old);
        assert!(fresh.warning.is_none());
        assert!(git_mount(&fresh.name).unwrap().read_only);

        // A .git the sandbox could have swapped for a link is refused, naming the way out.
        let s = mk(Config::default());
        s.remove("g").await.unwrap();
        std::fs::rename(ws.join(".git"), dir.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), ws.join(".git")).unwrap();
        let e = s.create("g", &row(false)).await.unwrap_err().to_string();
        assert!(
            e.contains("symbolic link") && e.contains("--git-writable"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_shared_container_takes_no_setup_of_one_session() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let mut config = Config::default();
        config.sandbox.scope = crate::config::Scope::Agent;
        let s = sessions(&fake, config, dir.path());
        let setup = crate::store::SessionSetup {
            network: Some("bridge".into()),
            ..Default::default()
        };
        let e = s.create("a1:chat", &setup).await.unwrap_err().to_string();
        assert!(e.contains("scope = \"session\""), "{e}");
        assert!(fake.calls().is_empty());
        // Nothing chosen: fine in any scope.
        s.create("a1:chat", &Default::default()).await.unwrap();
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
