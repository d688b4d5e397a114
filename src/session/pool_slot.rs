//! The warm pool over the session manager (docs/pool.md): which shapes it keeps, how a pool
//! container is made (as a session's is, under a slot key no session can name), how a claim
//! makes it a session's in one step, and what a daemon does with a pool it finds at start.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use rand::Rng;

use crate::config::SandboxConfig;
use crate::runtime::ContainerInfo;
use crate::store::{now_ms, SessionSetup};

use super::container_name::ContainerName;
use super::disk_image::{DiskError, DiskImage};
use super::manager::{effective_sandbox, SessionContainer, SessionError, Sessions};
use super::pool::{Filler, PoolHandle, PoolStatus, Shape, Slot};
use super::spec::{build_spec, config_hash, DISK_LABEL, MOAT_LABEL, POOL_LABEL, VERSION_LABEL};

/// What a slot key starts with. A slot key holds a `/`, which the session key rule
/// (`crate::session_key`) refuses, so no caller can name a pool container as its session,
/// and no session's container name (a hash over its key) is a slot's (docs/pool.md,
/// "Unreachable before claim").
const SLOT_PREFIX: &str = "pool/";

/// Whether `key` is a pool slot's, not a session's.
pub fn is_slot_key(key: &str) -> bool {
    key.starts_with(SLOT_PREFIX)
}

impl Sessions {
    /// The shapes `[pool]` asks for. A shape with its own egress network cannot be made
    /// before its session is known (the network and proxy are the session's), so it is left
    /// out, with a warning.
    pub fn pool_shapes(&self) -> Vec<Shape> {
        let config = &self.config;
        config
            .pool
            .shapes(&config.sandbox.image)
            .into_iter()
            .filter_map(|(image, want)| {
                let sandbox = Self::pool_sandbox(&config.sandbox, image.clone());
                if sandbox.network == crate::egress::container::EGRESS_NETWORK {
                    tracing::warn!("the warm pool keeps no sandbox with network = \"egress\": each has its own network");
                    return None;
                }
                Some(Shape {
                    hash: config_hash(&sandbox),
                    image,
                    want,
                })
            })
            .collect()
    }

    fn pool_sandbox(config: &SandboxConfig, image: Option<String>) -> SandboxConfig {
        let setup = SessionSetup {
            image,
            ..Default::default()
        };
        effective_sandbox(config, &setup)
    }

    /// Starts this daemon's warm pool: adopts what an earlier daemon of this home left that
    /// it can trust, removes the rest, then fills in the background. Nothing when `[pool]`
    /// keeps no shape (but what an earlier daemon left still goes).
    pub async fn start_pool(self: &Arc<Self>) {
        let shapes = self.pool_shapes();
        let mut adopted: Vec<Slot> = Vec::new();
        for c in self.pool_leftovers().await {
            let slot = slot_of(&c, self.home.root());
            let wanted = shapes
                .iter()
                .find(|s| s.hash == slot.shape)
                .map_or(0, |s| s.want);
            let have = adopted.iter().filter(|s| s.shape == slot.shape).count();
            let same_build =
                c.labels.get(VERSION_LABEL).map(String::as_str) == Some(env!("CARGO_PKG_VERSION"));
            if c.running && same_build && have < wanted {
                tracing::info!(container = %slot.name, "adopting a warm pool container");
                adopted.push(slot);
            } else {
                tracing::info!(container = %slot.name, "removing a warm pool container this daemon does not keep");
                self.discard_slot(slot).await;
            }
        }
        if shapes.is_empty() {
            return;
        }
        let filler = Arc::new(SlotFiller(Arc::downgrade(self)));
        let _ = self.pool.set(PoolHandle::start(shapes, adopted, filler));
    }

    /// Removes every ready pool container; the daemon's last act.
    pub async fn drain_pool(&self) {
        if let Some(pool) = self.pool.get() {
            pool.drain().await;
        }
    }

    /// What the pool holds now and how its claims went, by shape (empty without a pool).
    pub async fn pool_status(&self) -> PoolStatus {
        match self.pool.get() {
            Some(pool) => pool.status().await,
            None => PoolStatus::default(),
        }
    }

    /// The unclaimed pool containers of this home the engine has, running or not.
    async fn pool_leftovers(&self) -> Vec<ContainerInfo> {
        let Ok(list) = self.runtime.list_containers(POOL_LABEL).await else {
            return Vec::new();
        };
        let home = self.home.root().display().to_string();
        list.into_iter()
            .filter(|c| {
                let Some(key) = c.labels.get(MOAT_LABEL) else {
                    return false;
                };
                is_slot_key(key)
                    && ContainerName::for_key(key, &home).name == c.name
                    && matches!(self.store.claim_of_slot(key), Ok(None))
            })
            .collect()
    }

    /// The session key container `c` of this home serves: its label's, or for a claimed
    /// pool container the key that claimed it. `None` for an unclaimed pool container and
    /// for another home's container.
    pub fn key_of(&self, c: &ContainerInfo) -> Option<String> {
        let label = c.labels.get(MOAT_LABEL)?;
        let key = if is_slot_key(label) {
            self.store.claim_of_slot(label).ok().flatten()?
        } else {
            label.clone()
        };
        let home = self.home.root().display().to_string();
        (ContainerName::for_key(&key, &home).name == c.name).then_some(key)
    }

    /// The name a container of `key` has its directories and disk under: its own, or the
    /// pool slot's it was claimed from.
    pub fn disk_slug(&self, key: &str, names: &ContainerName) -> Result<String, SessionError> {
        Ok(match self.store.claimed_slot(key)? {
            Some(slot) => {
                ContainerName::for_key(&slot, &self.home.root().display().to_string()).slug
            }
            None => names.slug.clone(),
        })
    }

    /// Makes one warm container of `shape`, as a session's is made, then starts its helper.
    async fn fill_slot(&self, shape: &Shape) -> Result<Slot, SessionError> {
        let sandbox = Self::pool_sandbox(&self.config.sandbox, shape.image.clone());
        let tag: u32 = rand::rng().random();
        let key = format!("{SLOT_PREFIX}{}/{tag:08x}", &shape.hash);
        let names = ContainerName::for_key(&key, &self.home.root().display().to_string());
        if !self.runtime.image_exists(&sandbox.image).await? {
            return Err(SessionError::NoImage(sandbox.image.clone()));
        }
        self.check_runtime(&sandbox).await?;
        let made = async {
            let workspace = self.workspace_dir(&names.slug);
            let run_dir = self.home.run_dir(&names.slug);
            let disk = self
                .session_disk(&names.slug, false, &workspace, &run_dir, &sandbox)
                .await?;
            self.prepare_dirs(&workspace, &run_dir, &sandbox, false)?;
            let (ws_source, run_source) = match &disk {
                Some(d) => (d.workspace(), d.run()),
                None => (workspace.clone(), run_dir.clone()),
            };
            let mut spec = build_spec(
                &sandbox,
                &names.name,
                &key,
                &ws_source,
                &run_source,
                now_ms(),
            );
            spec.labels
                .insert(POOL_LABEL.to_string(), shape.hash.clone());
            if let Some(d) = &disk {
                super::manager::add_disk_mounts(&mut spec, d);
            }
            let id = self.create_and_start(&spec, &sandbox).await?;
            // The helper is started now, by name as every command reaches it, so the first
            // command after a claim finds it running.
            if let Err(e) = self
                .commands()
                .exec_capture(&names.name, vec!["true".into()], None)
                .await
            {
                let _ = self.runtime.remove_container(&id).await;
                return Err(e.into());
            }
            Ok::<_, SessionError>((id, disk.is_some()))
        }
        .await;
        match made {
            Ok((id, disk)) => Ok(Slot {
                key,
                name: names.name,
                id,
                shape: shape.hash.clone(),
                disk,
            }),
            Err(e) => {
                self.commands().release(&names.name);
                let _ = self.purge_slot_dirs(&names.slug).await;
                Err(e)
            }
        }
    }

    /// Removes a pool container that will never be claimed, with its directories and disk.
    async fn discard_slot(&self, slot: Slot) {
        let _ = self.runtime.remove_container(&slot.id).await;
        self.commands().release(&slot.name);
        let slug = ContainerName::for_key(&slot.key, &self.home.root().display().to_string()).slug;
        if let Err(e) = self.purge_slot_dirs(&slug).await {
            tracing::warn!(container = %slot.name, "failed to remove a warm container's directories: {e}");
        }
    }

    async fn purge_slot_dirs(&self, slug: &str) -> Result<(), SessionError> {
        let disk = DiskImage::new(self.home.root(), slug);
        let (ws, run) = (self.workspace_dir(slug), self.home.run_dir(slug));
        tokio::task::spawn_blocking(move || {
            disk.remove(&ws, &run)?;
            for dir in [ws, run] {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => return Err(DiskError::Io { path: dir, source }),
                }
            }
            Ok(())
        })
        .await
        .map_err(|e| DiskError::Io {
            path: self.home.root().to_path_buf(),
            source: std::io::Error::other(e),
        })??;
        Ok(())
    }

    /// A new session's container from the pool, when one of its shape is ready and nothing
    /// of an earlier session of this key is on disk; `None` (a miss, counted) otherwise, and
    /// the caller starts a container as before. Only the session manager calls it, for a
    /// session with no container, no host workspace and no egress network.
    pub(super) async fn claim_from_pool(
        &self,
        key: &str,
        names: &ContainerName,
        sandbox: &SandboxConfig,
    ) -> Result<Option<SessionContainer>, SessionError> {
        let Some(pool) = self.pool.get() else {
            return Ok(None);
        };
        let begun = std::time::Instant::now();
        let hash = config_hash(sandbox);
        let slot = if pool.keeps(&hash) && self.fresh_for_claim(key, names)? {
            pool.claim(&hash).await
        } else {
            None
        };
        let Some(slot) = slot else {
            crate::metrics::metrics().pool_miss();
            pool.count(&hash, false);
            return Ok(None);
        };
        match self.take_over(key, names, &slot, sandbox).await {
            Ok(c) => {
                crate::metrics::metrics().pool_hit(begun.elapsed().as_secs_f64());
                pool.count(&hash, true);
                Ok(Some(c))
            }
            Err(e) => {
                tracing::warn!(container = %slot.name, "failed to claim a warm container, starting one: {e}");
                let _ = self.store.forget_claim(key);
                if slot.disk {
                    let slug =
                        ContainerName::for_key(&slot.key, &self.home.root().display().to_string())
                            .slug;
                    let disk = DiskImage::new(self.home.root(), &slug);
                    let (ws, run) = (
                        self.workspace_dir(&names.slug),
                        self.home.run_dir(&names.slug),
                    );
                    let _ = tokio::task::spawn_blocking(move || disk.unbind(&ws, &run)).await;
                }
                self.commands().release(&names.name);
                self.discard_slot(slot).await;
                crate::metrics::metrics().pool_miss();
                pool.count(&hash, false);
                Ok(None)
            }
        }
    }

    /// Whether nothing of an earlier life of `key` is left (a workspace, a run directory, a
    /// disk, a claim): such a session gets its own things back from a container made for it.
    fn fresh_for_claim(&self, key: &str, names: &ContainerName) -> Result<bool, SessionError> {
        let empty = |d: &Path| match std::fs::read_dir(d) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        Ok(self.store.claimed_slot(key)?.is_none()
            && !DiskImage::new(self.home.root(), &names.slug).exists()
            && empty(&self.workspace_dir(&names.slug))
            && empty(&self.home.run_dir(&names.slug)))
    }

    /// The claim itself: the container takes the session's name, its directories move to
    /// the session's places (or, on a disk, are bound there), and the store records it.
    async fn take_over(
        &self,
        key: &str,
        names: &ContainerName,
        slot: &Slot,
        sandbox: &SandboxConfig,
    ) -> Result<SessionContainer, SessionError> {
        self.runtime.rename_container(&slot.id, &names.name).await?;
        self.commands().release(&slot.name);
        let home = self.home.root().display().to_string();
        let slot_slug = ContainerName::for_key(&slot.key, &home).slug;
        let from = (
            self.workspace_dir(&slot_slug),
            self.home.run_dir(&slot_slug),
        );
        let to = (
            self.workspace_dir(&names.slug),
            self.home.run_dir(&names.slug),
        );
        let disk = slot
            .disk
            .then(|| DiskImage::new(self.home.root(), &slot_slug));
        let (d, f, t) = (disk.clone(), from.clone(), to.clone());
        tokio::task::spawn_blocking(move || move_dirs(d.as_ref(), &f, &t))
            .await
            .map_err(|e| DiskError::Io {
                path: to.0.clone(),
                source: std::io::Error::other(e),
            })??;
        self.store.record_claim(key, &slot.key, now_ms())?;
        Ok(SessionContainer {
            key: key.to_string(),
            name: names.name.clone(),
            id: slot.id.clone(),
            workspace: to.0,
            run_dir: to.1,
            owner: sandbox.uid_gid(),
            read_only: false,
            read_only_parts: Vec::new(),
            warning: None,
            disk,
        })
    }
}

/// Moves a slot's workspace and run directory to a session's places: on a disk, the disk's
/// directories are bound at the new places and let go at the old; without one, the two
/// directories are renamed (the container's mounts follow the directories, not their names).
/// Blocking.
fn move_dirs(
    disk: Option<&DiskImage>,
    from: &(PathBuf, PathBuf),
    to: &(PathBuf, PathBuf),
) -> Result<(), DiskError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DiskError::Io { path, source }
    };
    match disk {
        Some(d) => {
            d.bind(&to.0, &to.1)?;
            d.unbind(&from.0, &from.1)?;
            for dir in [&from.0, &from.1] {
                let _ = std::fs::remove_dir(dir);
            }
        }
        None => {
            for (a, b) in [(&from.0, &to.0), (&from.1, &to.1)] {
                match std::fs::remove_dir(b) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io(b)(e)),
                }
                std::fs::rename(a, b).map_err(io(b))?;
            }
        }
    }
    Ok(())
}

/// The slot a pool container of this home is, from its labels.
fn slot_of(c: &ContainerInfo, _home: &Path) -> Slot {
    Slot {
        key: c.labels.get(MOAT_LABEL).cloned().unwrap_or_default(),
        name: c.name.clone(),
        id: c.id.clone(),
        shape: c.labels.get(POOL_LABEL).cloned().unwrap_or_default(),
        disk: c.labels.contains_key(DISK_LABEL),
    }
}

/// The pool's [`Filler`]: the session manager, held weakly so the owner task does not keep
/// it alive.
struct SlotFiller(Weak<Sessions>);

#[async_trait]
impl Filler for SlotFiller {
    async fn fill(&self, shape: &Shape) -> Result<Slot, String> {
        let sessions = self.0.upgrade().ok_or("the session manager is gone")?;
        sessions
            .fill_slot(shape)
            .await
            .map_err(|e| crate::error_chain::error_chain(&e))
    }

    async fn discard(&self, slot: Slot) {
        if let Some(sessions) = self.0.upgrade() {
            sessions.discard_slot(slot).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, DiskBound};
    use crate::home::Home;
    use crate::runtime::fake::{Call, FakeRuntime};
    use crate::runtime::Engine;
    use crate::store::Store;

    fn config(size: usize) -> Config {
        let mut c = Config::default();
        c.sandbox.disk_bound = DiskBound::Watch;
        c.pool.size = size;
        c
    }

    fn sessions(
        fake: &FakeRuntime,
        store: &Arc<Store>,
        config: Config,
        home: &Path,
    ) -> Arc<Sessions> {
        Arc::new(Sessions::new(
            Arc::new(fake.clone()),
            Arc::new(fake.clone()),
            store.clone(),
            Arc::new(config),
            Home::at(home),
            crate::egress::gate::Gates::over(store),
        ))
    }

    /// The ready containers' names once the pool holds `n` of its one shape.
    async fn ready(s: &Sessions, n: usize) -> Vec<String> {
        for _ in 0..500 {
            let status = s.pool_status().await.shapes;
            if status.first().is_some_and(|st| st.ready.len() == n) {
                return status[0].ready.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the pool never held {n}: {:?}", s.pool_status().await);
    }

    fn creates(fake: &FakeRuntime) -> usize {
        fake.calls()
            .iter()
            .filter(|c| matches!(c, Call::Create(_)))
            .count()
    }

    #[tokio::test]
    async fn a_new_session_claims_a_warm_container_and_the_pool_refills() {
        let dir = tempfile::tempdir().unwrap();
        let (fake, store) = (FakeRuntime::new(), Arc::new(Store::in_memory().unwrap()));
        let s = sessions(&fake, &store, config(1), dir.path());
        s.start_pool().await;
        let warm = ready(&s, 1).await.remove(0);
        let slot = fake.inspect_container(&warm).await.unwrap().unwrap();
        // Made as a session's container is, with the helper started by name.
        assert!(fake.calls().contains(&Call::Capture {
            container: warm.clone(),
            argv: vec!["true".into()],
            user: None,
        }));
        let before = creates(&fake);
        let a = s.ensure("a").await.unwrap();
        assert_eq!(a.id, slot.id, "the warm container is the session's");
        assert!(fake
            .calls()
            .contains(&Call::Rename(slot.id.clone(), a.name.clone())));
        let (_, names) = s.names("a");
        assert_eq!(a.workspace, s.workspace_dir(&names.slug));
        assert!(a.workspace.is_dir() && a.run_dir.is_dir());
        let info = fake.inspect_container(&a.name).await.unwrap().unwrap();
        assert_eq!(s.key_of(&info).as_deref(), Some("a"));
        // It refills, and the next session gets the new one; the first is never handed again.
        let next = ready(&s, 1).await.remove(0);
        assert_ne!(next, warm);
        let b = s.ensure("b").await.unwrap();
        assert_ne!(b.id, a.id);
        let calls = fake.calls();
        assert!(
            !calls.contains(&Call::Create(a.name.clone()))
                && !calls.contains(&Call::Create(b.name.clone())),
            "both were claimed, none created: {calls:?}"
        );
        assert!(creates(&fake) > before, "the pool refilled");
        let status = s.pool_status().await;
        assert_eq!(
            (status.shapes[0].hits, status.shapes[0].misses),
            (2, 0),
            "{status:?}"
        );
        // The claimed container is adopted as the session's by a later moat.
        let again = sessions(&fake, &store, config(0), dir.path());
        assert_eq!(again.ensure("a").await.unwrap().id, a.id);
        // The daemon's end removes what is ready, and no session's container.
        let third = ready(&s, 1).await.remove(0);
        s.drain_pool().await;
        assert!(fake.inspect_container(&third).await.unwrap().is_none());
        assert!(fake.inspect_container(&a.name).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn no_session_key_names_a_warm_container() {
        let dir = tempfile::tempdir().unwrap();
        let (fake, store) = (FakeRuntime::new(), Arc::new(Store::in_memory().unwrap()));
        let s = sessions(&fake, &store, config(1), dir.path());
        s.start_pool().await;
        let warm = ready(&s, 1).await.remove(0);
        let info = fake.inspect_container(&warm).await.unwrap().unwrap();
        let slot_key = info.labels[MOAT_LABEL].clone();
        assert!(
            s.ensure(&slot_key).await.is_err(),
            "a slot key is no session key"
        );
        // Its readable part is a session key, of another container.
        let readable = warm.strip_prefix("moat-").unwrap();
        let other = s.ensure(readable).await.unwrap();
        assert_ne!(other.name, warm);
        assert_eq!(
            s.key_of(&info),
            None,
            "an unclaimed warm container is no session's"
        );
    }

    #[tokio::test]
    async fn a_session_with_leftovers_misses_and_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let (fake, store) = (FakeRuntime::new(), Arc::new(Store::in_memory().unwrap()));
        let s = sessions(&fake, &store, config(1), dir.path());
        s.start_pool().await;
        ready(&s, 1).await;
        let a = s.ensure("a").await.unwrap();
        std::fs::write(a.workspace.join("kept"), "x").unwrap();
        // Removed without purging: the workspace stays, and the next container of `a` is made
        // for it, not claimed.
        s.remove("a").await.unwrap();
        let warm = ready(&s, 1).await;
        let again = s.ensure("a").await.unwrap();
        assert_ne!(again.id, a.id);
        assert!(again.workspace.join("kept").is_file());
        let status = s.pool_status().await.shapes.remove(0);
        assert_eq!((status.hits, status.misses), (1, 1), "counted as a miss");
        assert_eq!(ready(&s, 1).await, warm, "the warm one is still there");
        // A host workspace never claims either.
        let host = dir.path().join("host");
        std::fs::create_dir(&host).unwrap();
        let setup = crate::store::SessionSetup {
            workspace: Some(crate::store::WorkspaceRow {
                path: host.display().to_string(),
                read_only: false,
                user: "4242:4243".into(),
                git_writable: true,
            }),
            ..Default::default()
        };
        let h = s.create("h", &setup).await.unwrap();
        assert_eq!(h.workspace, host);
        assert_eq!(ready(&s, 1).await, warm);
        // Purged, the key starts afresh and claims.
        s.remove_with("a", true).await.unwrap();
        let fresh = s.ensure("a").await.unwrap();
        assert_eq!(
            fake.inspect_container(&fresh.id)
                .await
                .unwrap()
                .unwrap()
                .labels[POOL_LABEL],
            config_hash(&config(1).sandbox)
        );
    }

    #[tokio::test]
    async fn a_new_daemon_adopts_the_pool_it_keeps_and_removes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let (fake, store) = (FakeRuntime::new(), Arc::new(Store::in_memory().unwrap()));
        let first = sessions(&fake, &store, config(1), dir.path());
        first.start_pool().await;
        let warm = ready(&first, 1).await;
        // Killed: nothing drained. The same config adopts without making another.
        let made = creates(&fake);
        let second = sessions(&fake, &store, config(1), dir.path());
        second.start_pool().await;
        assert_eq!(ready(&second, 1).await, warm);
        assert_eq!(creates(&fake), made);
        // A changed config: the old shape goes, the new one fills.
        let mut changed = config(1);
        changed.sandbox.memory = "1g".into();
        let third = sessions(&fake, &store, changed, dir.path());
        third.start_pool().await;
        let fresh = ready(&third, 1).await;
        assert_ne!(fresh, warm);
        assert!(fake.inspect_container(&warm[0]).await.unwrap().is_none());
        // No pool configured: what is left goes all the same.
        let fourth = sessions(&fake, &store, config(0), dir.path());
        fourth.start_pool().await;
        assert!(fake.inspect_container(&fresh[0]).await.unwrap().is_none());
        assert!(fourth.pool_status().await.shapes.is_empty());
    }
}
