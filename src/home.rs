//! The layout of `$MOAT_HOME` (default `~/.moat`). One place knows where every file lives.

use std::path::{Path, PathBuf};

/// Paths under `$MOAT_HOME`.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `$MOAT_HOME`, else `~/.moat`.
    pub fn from_env() -> Self {
        let root = std::env::var_os("MOAT_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".moat")))
            .unwrap_or_else(|| PathBuf::from("/var/lib/moat"));
        Self::at(root)
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        // Absolute, because these paths are handed to the engine as bind-mount sources.
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir()
                .map(|d| d.join(&root))
                .unwrap_or(root)
        };
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn config_file(&self) -> PathBuf {
        self.root.join("moat.toml")
    }

    pub fn state_db(&self) -> PathBuf {
        self.root.join("state.db")
    }

    pub fn socket(&self) -> PathBuf {
        self.root.join("moat.sock")
    }

    /// Held by the serving daemon for its whole life (one daemon per home), with its pid.
    pub fn daemon_lock(&self) -> PathBuf {
        self.root.join("daemon.lock")
    }

    /// Held by a client while it checks for a daemon and starts one.
    pub fn daemon_start_lock(&self) -> PathBuf {
        self.root.join("daemon.start.lock")
    }

    /// Where a daemon started on demand writes its log.
    pub fn daemon_log(&self) -> PathBuf {
        self.root.join("daemon.log")
    }

    /// Default parent of the per-session workspaces (`sandbox.workspace_root` overrides it).
    pub fn workspaces(&self) -> PathBuf {
        self.root.join("workspaces")
    }

    /// Per-container directory mounted at `/run/moat`: process logs, stdin FIFOs, exit codes.
    pub fn run_dir(&self, container_slug: &str) -> PathBuf {
        self.root.join("run").join(container_slug)
    }

    /// Run directory of host processes (logs, stdin FIFOs, exit codes); never mounted anywhere.
    pub fn host_run_dir(&self) -> PathBuf {
        self.root.join("host-run")
    }

    /// Default working directory of host commands (`elevated.workdir` overrides it): private,
    /// and no sandbox mounts it.
    pub fn host_work_dir(&self) -> PathBuf {
        self.root.join("host-work")
    }

    /// Private copies of the files approved host plans run, one directory per approval.
    pub fn host_approved_dir(&self) -> PathBuf {
        self.root.join("host-approved")
    }

    /// A node's TLS identity (docs/nodes.md, "Pairing"): its self-signed certificate and
    /// private key, made at first start and kept for the node's life, since gateways pin the
    /// certificate's fingerprint.
    pub fn node_dir(&self) -> PathBuf {
        self.root.join("node")
    }

    pub fn ensure_root(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)?;
        use std::os::unix::fs::PermissionsExt;
        // The socket, database and logs are the operator's; nobody else reads them.
        std::fs::set_permissions(&self.root, std::fs::Permissions::from_mode(0o700))
    }
}

/// Creates `dir` (and parents) and makes it private to moat's user.
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}
