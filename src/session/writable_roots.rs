//! Every host directory a sandbox of this moat home can write, in one place
//! (docs/security.md, "Directories a sandbox can write"). Host-command gating, approvals
//! (allow-always is withheld for such runs), the ask fallback and `policy explain` all read
//! it through `tools::exec_tool::Prepared`, so a feature that mounts something new into a
//! sandbox is covered the moment the engine reports the mount.
//!
//! Two sources, unioned:
//! - **What the engine says is mounted**: each container of this home (moat's label, a name
//!   derived from this home), running or stopped, and every bind or volume it may write, by
//!   host path, plus its root filesystem layer when that is writable. A container's mounts
//!   never change after it is created, so they are kept by container id; the list of
//!   containers is asked for on every call, so a container made a moment ago is never missed.
//! - **What moat will mount again**: the default workspace root, the run directories, the
//!   read-write `sandbox.binds` of the configuration, and every host workspace recorded in the
//!   store (`session_setup`) that is not read-only, even for a stopped or removed container:
//!   it is mounted again when its session starts.
//!
//! When the engine does not answer, the result says so and every gated host run asks: a
//! missed directory would run the agent's Makefile on the host, an extra question costs an
//! operator a click.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::host::WritableRoots;
use crate::runtime::HostMount;

use super::container_name::ContainerName;
use super::manager::Sessions;
use super::spec::{MOAT_LABEL, RUN_MOUNT};
use crate::contract::WORKSPACE_MOUNT;

impl Sessions {
    /// See the module docs. One engine list per call, plus one inspect for each container not
    /// seen before.
    pub async fn writable_roots(&self) -> WritableRoots {
        let mut roots = self.handed_in();
        let mut missing = Vec::new();
        match self.store.host_workspaces() {
            Ok(rows) => roots.extend(rows.into_iter().filter(|(_, row)| !row.read_only).map(
                |(key, row)| {
                    (
                        format!("the host workspace of session {key}"),
                        PathBuf::from(row.path),
                    )
                },
            )),
            Err(e) => missing.push(format!("read the host workspaces: {e}")),
        }
        match self.mounted().await {
            Ok(found) => roots.extend(found),
            Err(e) => missing.push(e),
        }
        if missing.is_empty() {
            WritableRoots::new(roots)
        } else {
            WritableRoots::incomplete(roots, missing.join("; "))
        }
    }

    /// What moat hands to sandboxes whether or not one runs now.
    fn handed_in(&self) -> Vec<(String, PathBuf)> {
        let sandbox = &self.config.sandbox;
        let workspaces = if sandbox.workspace_root.is_empty() {
            self.home.workspaces()
        } else {
            PathBuf::from(&sandbox.workspace_root)
        };
        let mut roots = vec![
            ("the sandbox workspaces".to_string(), workspaces),
            (
                "the sandbox run directories".to_string(),
                self.home.root().join("run"),
            ),
            // The sessions' own filesystems, whose directories are mounted at the two above
            // as well (docs/security.md, "Disk bound").
            (
                "the sandbox disks".to_string(),
                self.home.root().join(super::disk_image::DISKS_DIR),
            ),
        ];
        // And their block devices, whose bytes are the sandbox's files.
        let disks = self.home.root().join(super::disk_image::DISKS_DIR);
        roots.extend(
            super::disk_image::loop_devices_under(&disks)
                .into_iter()
                .map(|dev| ("the block device of a sandbox disk".to_string(), dev)),
        );
        for bind in &sandbox.binds {
            let mut parts = bind.split(':');
            let source = parts.next().unwrap_or_default();
            let _target = parts.next();
            if parts.next() != Some("ro") && source.starts_with('/') {
                roots.push((format!("the sandbox bind {bind}"), PathBuf::from(source)));
            }
        }
        roots
    }

    /// The writable host mounts of every container of this home, as the engine reports them.
    async fn mounted(&self) -> Result<Vec<(String, PathBuf)>, String> {
        let listed = self
            .runtime
            .list_containers(MOAT_LABEL)
            .await
            .map_err(|e| format!("list the sandbox containers: {e}"))?;
        let home = self.home.root().display().to_string();
        // Claimed warm containers by the key that claimed them; waiting ones by their slot's
        // key (docs/pool.md, "Claims").
        let ours: Vec<_> = listed
            .into_iter()
            .filter_map(|c| {
                if let Some(key) = self.key_of(&c) {
                    return Some((key, c));
                }
                let key = c.labels.get(MOAT_LABEL)?.clone();
                (ContainerName::for_key(&key, &home).name == c.name).then_some((key, c))
            })
            .collect();
        let known: HashMap<String, Vec<HostMount>> = self.mounts_seen.lock().unwrap().clone();
        let mut fresh = HashMap::new();
        let mut out = Vec::new();
        for (key, c) in &ours {
            let mounts = match known.get(&c.id) {
                Some(m) => m.clone(),
                None => match self.runtime.host_mounts(&c.id).await {
                    Ok(Some(m)) => m,
                    // Removed between the list and the inspect: it writes nothing any more.
                    Ok(None) => continue,
                    Err(e) => return Err(format!("inspect container {}: {e}", c.name)),
                },
            };
            for m in mounts.iter().filter(|m| m.writable) {
                out.push((describe(key, &c.name, m), PathBuf::from(&m.source)));
            }
            fresh.insert(c.id.clone(), mounts);
        }
        // Only the containers that still exist are kept.
        let live: HashSet<&String> = ours.iter().map(|(_, c)| &c.id).collect();
        let mut seen = self.mounts_seen.lock().unwrap();
        seen.retain(|id, _| live.contains(id));
        seen.extend(fresh);
        Ok(out)
    }
}

/// What a writable mount is, for the reason an approval gives.
fn describe(key: &str, container: &str, m: &HostMount) -> String {
    match (m.kind.as_str(), m.target.as_str()) {
        ("rootfs", _) => format!("the writable root filesystem of container {container}"),
        (_, WORKSPACE_MOUNT) => format!("the workspace of session {key}"),
        (_, RUN_MOUNT) => format!("the run directory of session {key}"),
        ("volume", target) => format!("the volume at {target} of session {key}"),
        (_, target) => format!("the mount at {target} of session {key}"),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::home::Home;
    use crate::runtime::fake::{Call, FakeRuntime};
    use crate::runtime::{Engine, HostMount};
    use crate::store::{SessionSetup, Store, WorkspaceRow};

    use super::*;

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

    fn host_ws(path: &Path, read_only: bool) -> SessionSetup {
        SessionSetup {
            workspace: Some(WorkspaceRow {
                path: path.display().to_string(),
                read_only,
                user: "4242:4242".into(),
                git_writable: false,
            }),
            ..Default::default()
        }
    }

    fn has(roots: &WritableRoots, path: &Path, what: &str) -> bool {
        let real = std::fs::canonicalize(path).unwrap();
        roots
            .roots()
            .iter()
            .any(|(w, p)| *p == real && w.contains(what))
    }

    #[tokio::test]
    async fn every_writable_mount_of_this_homes_containers_counts_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let outside = dir.path().join("outside");
        let (ws, ro, stopped, gone, bind, old_bind, volume, ro_bind) = (
            outside.join("ws"),
            outside.join("ro-ws"),
            outside.join("stopped-ws"),
            outside.join("never-started"),
            outside.join("bind"),
            outside.join("old-bind"),
            outside.join("volume"),
            outside.join("ro-bind"),
        );
        for d in [
            &home, &ws, &ro, &stopped, &gone, &bind, &old_bind, &volume, &ro_bind,
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let fake = FakeRuntime::new();
        // A container made by an older configuration still mounts a bind the current one no
        // longer names: the engine's view counts, not the config's.
        let mut old = Config::default();
        old.sandbox.binds = vec![format!("{}:/old", old_bind.display())];
        sessions(&fake, old, &home).ensure("legacy").await.unwrap();
        let mut config = Config::default();
        config.sandbox.binds = vec![
            format!("{}:/data", bind.display()),
            format!("{}:/ref:ro", ro_bind.display()),
        ];
        let s = sessions(&fake, config.clone(), &home);
        s.create("w", &host_ws(&ws, false)).await.unwrap();
        s.create("r", &host_ws(&ro, true)).await.unwrap();
        let st = s.create("st", &host_ws(&stopped, false)).await.unwrap();
        fake.stop(&st.name);
        // Recorded, its container not made yet (or removed behind moat's back).
        s.store()
            .claim_session_setup("later", &host_ws(&gone, false))
            .unwrap();
        let plain = s.ensure("plain").await.unwrap();
        fake.add_mount(
            &plain.name,
            HostMount {
                source: volume.display().to_string(),
                target: "/cache".into(),
                writable: true,
                kind: "volume".into(),
            },
        );
        // Another home's container on the same engine is not this home's.
        let other_home = dir.path().join("other-home");
        let other_ws = outside.join("other-ws");
        std::fs::create_dir_all(&other_ws).unwrap();
        sessions(&fake, Config::default(), &other_home)
            .create("w", &host_ws(&other_ws, false))
            .await
            .unwrap();

        let roots = s.writable_roots().await;
        assert!(has(&roots, &ws, "session w"), "{:?}", roots.roots());
        assert!(has(&roots, &stopped, "session st"), "{:?}", roots.roots());
        assert!(
            has(&roots, &gone, "host workspace of session later"),
            "{:?}",
            roots.roots()
        );
        assert!(has(&roots, &bind, "/data"), "{:?}", roots.roots());
        assert!(has(&roots, &old_bind, "/old"), "{:?}", roots.roots());
        assert!(
            has(&roots, &volume, "volume at /cache"),
            "{:?}",
            roots.roots()
        );
        assert!(!roots.contains(&ro), "{:?}", roots.roots());
        assert!(!roots.contains(&ro_bind), "{:?}", roots.roots());
        assert!(!roots.contains(&other_ws), "{:?}", roots.roots());
        assert!(roots.contains(&home.join("run/x")));
        assert!(roots.contains(&home.join("workspaces/x")));
        assert!(roots.reason(&outside, "true").is_none());
    }

    #[tokio::test]
    async fn mounts_are_asked_once_per_container_and_a_new_one_is_never_missed() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let s = sessions(&fake, Config::default(), dir.path());
        let a = s.ensure("a").await.unwrap();
        let inspects = |id: &str| {
            fake.calls()
                .iter()
                .filter(|c| **c == Call::Mounts(id.to_string()))
                .count()
        };
        s.writable_roots().await;
        s.writable_roots().await;
        assert_eq!(inspects(&a.id), 1);
        // Made since: found by the next call.
        let extra = dir.path().join("extra");
        std::fs::create_dir_all(&extra).unwrap();
        let b = s.ensure("b").await.unwrap();
        fake.add_mount(
            &b.name,
            HostMount {
                source: extra.display().to_string(),
                target: "/extra".into(),
                writable: true,
                kind: "bind".into(),
            },
        );
        assert!(s.writable_roots().await.contains(&extra));
        assert_eq!((inspects(&a.id), inspects(&b.id)), (1, 1));
        // Removed: forgotten, and a container of the same name made again is asked anew.
        fake.remove_container(&b.id).await.unwrap();
        s.writable_roots().await;
        assert!(!s.mounts_seen.lock().unwrap().contains_key(&b.id));
    }

    #[tokio::test]
    async fn an_engine_that_does_not_answer_makes_every_run_ask() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeRuntime::new();
        let s = sessions(&fake, Config::default(), dir.path());
        s.ensure("a").await.unwrap();
        fake.fail_mounts(true);
        let roots = s.writable_roots().await;
        let why = roots.reason(dir.path(), "true").unwrap();
        assert!(why.contains("could not learn"), "{why}");
        assert!(why.contains("inspect container"), "{why}");
    }
}
