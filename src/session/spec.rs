//! The container a session gets, derived purely from config (so it is unit-tested here and
//! its hash decides when a config change means "recreate").

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::git_guard::GitGuard;
use crate::config::{SandboxConfig, WorkspaceAccess};
use crate::contract::WORKSPACE_MOUNT;
use crate::runtime::{ContainerSpec, Mount};

/// Label every moat container carries; its value is the container key.
pub const MOAT_LABEL: &str = "dev.moat.session";
pub const HASH_LABEL: &str = "dev.moat.config-hash";
/// On a container whose `/workspace` and `/run/moat` are its session's own filesystem
/// (`disk_image`): a container made without it mounts other directories.
pub const DISK_LABEL: &str = "dev.moat.disk";
/// On a warm pool container: its shape (the config hash it was made for). It stays after a
/// claim (labels never change), where the store says which session claimed it
/// (docs/pool.md, "Claims").
pub const POOL_LABEL: &str = "dev.moat.pool";
pub const CREATED_LABEL: &str = "dev.moat.created-at";
pub const VERSION_LABEL: &str = "dev.moat.version";
/// On a host-workspace container: how its git metadata is mounted (`ro:<hash of the mounts>`,
/// `writable`, or `read-only` for a read-only workspace). A host-workspace container without
/// it was made before `.git` was guarded and is never kept (docs/security.md, "Host
/// workspaces").
pub const GIT_LABEL: &str = "dev.moat.git";
/// Where the per-container run directory (process logs, stdin FIFOs) appears.
pub const RUN_MOUNT: &str = "/run/moat";

/// A stable hash of everything that shapes the container. Changing any of it means the
/// running container no longer matches the config.
///
/// `shell` only picks the login shell each exec starts, so it is left out: switching it (or
/// upgrading to a moat that has it) keeps the containers and their processes. It is followed
/// only by `egress` (decided live by the daemon) and `transport` (docs/helper.md), which shape
/// no container either, so cutting from `shell` on leaves exactly the text earlier versions
/// hashed.
pub fn config_hash(sandbox: &SandboxConfig) -> String {
    let json = serde_json::to_string(sandbox).unwrap_or_default();
    let json = match json.rsplit_once(",\"shell\":") {
        Some((head, _)) => format!("{head}}}"),
        None => json,
    };
    hex::encode(&Sha256::digest(json.as_bytes())[..8])
}

/// The hash of a container whose `/workspace` is the host directory `workspace`, its git
/// metadata mounted as `git` says: other mounts, another container.
pub fn hash_with_workspace(sandbox: &SandboxConfig, workspace: &str, git: &GitMode) -> String {
    let text = format!(
        "{}\0{workspace}\0git:{}",
        config_hash(sandbox),
        git.hash_text()
    );
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
}

/// How a host workspace's git metadata reaches the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitMode {
    /// Read-only, through these mounts (none when the workspace has no `.git`).
    Guarded(GitGuard),
    /// Writable: the operator said so (`--git-writable`, `sandbox.git_writable`).
    Writable,
    /// The whole workspace is read-only: nothing to add.
    ReadOnlyWorkspace,
}

impl GitMode {
    /// Whether the sandbox is kept from writing metadata it otherwise could.
    pub fn guards(&self) -> bool {
        matches!(self, GitMode::Guarded(g) if !g.is_empty())
    }

    /// What the container's hash covers of it.
    fn hash_text(&self) -> String {
        match self {
            GitMode::Guarded(g) => format!("ro\n{}", g.fingerprint()),
            GitMode::Writable => "writable".into(),
            GitMode::ReadOnlyWorkspace => "read-only".into(),
        }
    }

    /// The value of [`GIT_LABEL`].
    pub fn label(&self) -> String {
        match self {
            GitMode::Guarded(g) => format!(
                "ro:{}",
                hex::encode(&Sha256::digest(g.fingerprint().as_bytes())[..4])
            ),
            GitMode::Writable => "writable".into(),
            GitMode::ReadOnlyWorkspace => "read-only".into(),
        }
    }

    /// Host paths the sandbox sees read-only although the workspace is writable.
    pub fn read_only_paths(&self, workspace: &Path) -> Vec<std::path::PathBuf> {
        match self {
            GitMode::Guarded(g) => g.read_only_paths(workspace),
            _ => Vec::new(),
        }
    }
}

/// Adds the git mounts of a host workspace at `workspace` to `spec` (after the workspace's
/// own mount, which they lie over) and labels it.
pub fn add_git_mounts(spec: &mut ContainerSpec, workspace: &Path, git: &GitMode) {
    if let GitMode::Guarded(g) = git {
        spec.mounts.extend(g.mounts(workspace));
    }
    spec.labels.insert(GIT_LABEL.to_string(), git.label());
}

pub fn labels(key: &str, hash: &str, created_at_ms: i64) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MOAT_LABEL.to_string(), key.to_string()),
        (HASH_LABEL.to_string(), hash.to_string()),
        (CREATED_LABEL.to_string(), created_at_ms.to_string()),
        (
            VERSION_LABEL.to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
    ])
}

/// What root may do in a sandbox that may become root ([`SandboxConfig::root`]): own, read
/// and write any file of the container, change users, and signal any of its processes — a
/// subset of the engine's default set without `NET_RAW`, `MKNOD`, `SETFCAP`, `SETPCAP` and
/// `SYS_CHROOT`. A user other than root holds none of them: they bound what uid 0 gets
/// (docs/security.md, "Root inside E2B's sandboxes").
pub const ROOT_CAPS: [&str; 9] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "AUDIT_WRITE",
    "NET_BIND_SERVICE",
];

pub fn build_spec(
    sandbox: &SandboxConfig,
    name: &str,
    key: &str,
    workspace: &Path,
    run_dir: &Path,
    created_at_ms: i64,
) -> ContainerSpec {
    let mut mounts = Vec::new();
    if sandbox.workspace_access != WorkspaceAccess::None {
        mounts.push(Mount {
            source: workspace.display().to_string(),
            target: WORKSPACE_MOUNT.into(),
            read_only: sandbox.workspace_access == WorkspaceAccess::Ro,
        });
    }
    if sandbox.workspace_access != WorkspaceAccess::None && !sandbox.home_mount.is_empty() {
        mounts.push(Mount {
            source: workspace.display().to_string(),
            target: sandbox.home_mount.clone(),
            read_only: sandbox.workspace_access == WorkspaceAccess::Ro,
        });
    }
    mounts.push(Mount {
        source: run_dir.display().to_string(),
        target: RUN_MOUNT.into(),
        read_only: false,
    });
    for bind in &sandbox.binds {
        let mut parts = bind.split(':');
        let source = parts.next().unwrap_or_default().to_string();
        let target = parts.next().unwrap_or_default().to_string();
        mounts.push(Mount {
            source,
            target,
            read_only: parts.next() == Some("ro"),
        });
    }
    // Every tmpfs gets an explicit size inside the memory limit (docs/security.md, "Sandbox
    // limits"): the engine's default is half of the host's RAM.
    let plan = sandbox.tmpfs_plan();
    let tmpfs = plan
        .mounts
        .iter()
        .map(|m| {
            let mut options = "rw,nosuid,nodev,mode=1777".to_string();
            if let Some(size) = m.size {
                options.push_str(&format!(",size={size}"));
            }
            (m.path.clone(), options)
        })
        .collect();
    // A sandbox that may become root keeps setuid programs working (`sudo`): the rest of the
    // hardening stays (docs/security.md, "Root inside E2B's sandboxes").
    let mut security_opt = Vec::new();
    let mut cap_add = sandbox.cap_add.clone();
    if sandbox.root {
        cap_add.extend(ROOT_CAPS.iter().map(|c| c.to_string()));
    } else {
        security_opt.push("no-new-privileges:true".to_string());
    }
    if !sandbox.seccomp_profile.is_empty() {
        security_opt.push(format!("seccomp={}", sandbox.seccomp_profile));
    }
    if !sandbox.apparmor_profile.is_empty() {
        security_opt.push(format!("apparmor={}", sandbox.apparmor_profile));
    }
    let mut env = vec!["LANG=C.UTF-8".to_string()];
    env.extend(sandbox.env.iter().map(|(k, v)| format!("{k}={v}")));
    ContainerSpec {
        name: name.to_string(),
        image: sandbox.image.clone(),
        labels: labels(key, &config_hash(sandbox), created_at_ms),
        user: sandbox.user.clone(),
        env,
        mounts,
        tmpfs,
        read_only_root: sandbox.read_only_root,
        network: sandbox.network.clone(),
        cap_add,
        security_opt,
        pids_limit: sandbox.pids_limit,
        memory_bytes: sandbox.memory_bytes(),
        shm_bytes: plan.shm.unwrap_or(0) as i64,
        nano_cpus: (sandbox.cpus * 1e9) as i64,
        runtime: (!sandbox.runtime.is_empty()).then(|| sandbox.runtime.clone()),
        working_dir: WORKSPACE_MOUNT.into(),
        // Keeps the container alive between commands; `init` reaps what the commands leave.
        cmd: vec!["sleep".into(), "infinity".into()],
        dns: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_does_not_change_the_hash_but_the_rest_does() {
        use crate::config::Shell;
        let base = SandboxConfig::default();
        let json = serde_json::to_string(&base).unwrap();
        assert!(
            json.contains(r#","shell":"sh","git_writable":false,"egress":{"#)
                && json.ends_with(r#","transport":"helper","disk_bound":"auto"}"#),
            "shell, git_writable, egress, transport, then disk_bound, must stay last: {json}"
        );
        let mut git = base.clone();
        git.git_writable = true;
        assert_eq!(config_hash(&git), config_hash(&base));
        let mut bash = base.clone();
        bash.shell = Shell::Bash;
        assert_eq!(config_hash(&bash), config_hash(&base));
        let mut exec = base.clone();
        exec.transport = crate::config::Transport::Exec;
        assert_eq!(config_hash(&exec), config_hash(&base));
        // What it resolves to on this host is the container's `dev.moat.disk` label instead.
        let mut watch = base.clone();
        watch.disk_bound = crate::config::DiskBound::Watch;
        assert_eq!(config_hash(&watch), config_hash(&base));
        let mut other = base.clone();
        other.workspace_max_bytes = "1g".into();
        assert_ne!(config_hash(&other), config_hash(&base));
        let mut other = base.clone();
        other.image = "x".into();
        assert_ne!(config_hash(&other), config_hash(&base));
    }

    /// A sandbox that may become root loses only `no-new-privileges` and gains only the
    /// listed capabilities; its workspace also appears at the home it names. Other
    /// sandboxes' hashes do not move (the two fields are written only when set).
    #[test]
    fn a_root_sandbox_keeps_the_rest_of_the_hardening() {
        let plain = SandboxConfig::default();
        let mut root = plain.clone();
        root.root = true;
        root.home_mount = "/home/user".into();
        let spec = |s: &SandboxConfig| {
            build_spec(s, "moat-x", "x", Path::new("/h/ws"), Path::new("/h/run"), 1)
        };
        let (p, r) = (spec(&plain), spec(&root));
        assert!(!r
            .security_opt
            .iter()
            .any(|o| o.contains("no-new-privileges")));
        assert_eq!(r.cap_add, ROOT_CAPS.map(String::from).to_vec());
        assert!(p.cap_add.is_empty());
        for cap in [
            "SYS_ADMIN",
            "NET_RAW",
            "NET_ADMIN",
            "SYS_PTRACE",
            "MKNOD",
            "SYS_MODULE",
        ] {
            assert!(!r.cap_add.iter().any(|c| c == cap), "{cap}");
        }
        assert_eq!(
            (
                r.read_only_root,
                &r.user,
                r.pids_limit,
                r.memory_bytes,
                &r.network
            ),
            (
                p.read_only_root,
                &p.user,
                p.pids_limit,
                p.memory_bytes,
                &p.network
            )
        );
        let home = r.mounts.iter().find(|m| m.target == "/home/user").unwrap();
        assert_eq!(home.source, "/h/ws");
        assert!(!p.mounts.iter().any(|m| m.target == "/home/user"));
        assert_ne!(config_hash(&root), config_hash(&plain));
        let json = serde_json::to_string(&plain).unwrap();
        assert!(
            !json.contains("\"root\"") && !json.contains("home_mount"),
            "{json}"
        );
        // Neither is a key of moat.toml.
        let parsed: Result<SandboxConfig, _> = toml::from_str("root = true");
        assert!(parsed.is_err());
    }

    #[test]
    fn defaults_are_hardened() {
        let s = SandboxConfig::default();
        let spec = build_spec(
            &s,
            "moat-x",
            "x",
            Path::new("/h/ws"),
            Path::new("/h/run"),
            1,
        );
        assert!(spec.read_only_root);
        assert_eq!(spec.network, "none");
        assert_eq!(spec.user, "1000:1000");
        assert_eq!(spec.pids_limit, 512);
        assert_eq!(spec.memory_bytes, 2 << 30);
        assert!(spec
            .security_opt
            .contains(&"no-new-privileges:true".to_string()));
        assert!(spec.env.contains(&"LANG=C.UTF-8".to_string()));
        assert_eq!(
            spec.tmpfs.keys().collect::<Vec<_>>(),
            ["/run", "/tmp", "/var/tmp"]
        );
        // Sized inside the memory limit: half of 2 GiB, with /dev/shm.
        assert_eq!(
            spec.tmpfs["/tmp"],
            format!("rw,nosuid,nodev,mode=1777,size={}", 832u64 << 20)
        );
        assert!(spec.tmpfs["/run"].ends_with(&format!(",size={}", 64u64 << 20)));
        assert_eq!(spec.shm_bytes, 64 << 20);
        assert_eq!(spec.mounts[0].target, "/workspace");
        assert!(!spec.mounts[0].read_only);
        assert_eq!(spec.labels[MOAT_LABEL], "x");
    }

    #[test]
    fn workspace_access_modes() {
        let mut s = SandboxConfig {
            workspace_access: WorkspaceAccess::Ro,
            ..Default::default()
        };
        let spec = build_spec(&s, "n", "k", Path::new("/w"), Path::new("/r"), 1);
        assert!(spec.mounts[0].read_only);
        s.workspace_access = WorkspaceAccess::None;
        let spec = build_spec(&s, "n", "k", Path::new("/w"), Path::new("/r"), 1);
        assert!(spec.mounts.iter().all(|m| m.target != "/workspace"));
    }

    #[test]
    fn git_mounts_lie_over_the_workspace_and_change_the_hash() {
        let s = SandboxConfig::default();
        let guard = GitGuard {
            pins: vec!["vendor".into()],
            read_only: vec![".git".into(), "vendor/lib/.git".into()],
        };
        let mut spec = build_spec(&s, "n", "k", Path::new("/w"), Path::new("/r"), 1);
        add_git_mounts(&mut spec, Path::new("/w"), &GitMode::Guarded(guard.clone()));
        let m: Vec<(&str, &str, bool)> = spec
            .mounts
            .iter()
            .map(|m| (m.source.as_str(), m.target.as_str(), m.read_only))
            .collect();
        assert_eq!(
            m,
            [
                ("/w", "/workspace", false),
                ("/r", "/run/moat", false),
                ("/w/vendor", "/workspace/vendor", false),
                ("/w/.git", "/workspace/.git", true),
                ("/w/vendor/lib/.git", "/workspace/vendor/lib/.git", true),
            ]
        );
        assert!(spec.labels[GIT_LABEL].starts_with("ro:"));
        let hashes: Vec<String> = [
            GitMode::Guarded(guard),
            GitMode::Guarded(GitGuard::default()),
            GitMode::Writable,
            GitMode::ReadOnlyWorkspace,
        ]
        .iter()
        .map(|g| hash_with_workspace(&s, "/w", g))
        .collect();
        for (i, a) in hashes.iter().enumerate() {
            assert_eq!(
                hashes.iter().filter(|b| *b == a).count(),
                1,
                "{i}: {hashes:?}"
            );
        }
    }

    #[test]
    fn hash_follows_config() {
        let a = SandboxConfig::default();
        let mut b = a.clone();
        assert_eq!(config_hash(&a), config_hash(&b));
        b.memory = "1g".into();
        assert_ne!(config_hash(&a), config_hash(&b));
    }
}
