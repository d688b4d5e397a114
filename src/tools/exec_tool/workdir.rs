//! Maps a requested workdir to a container path inside the workspace (docs/mcp.md, "Tools": `workdir`).
//!
//! Accepted: a container path under `/workspace`, a path relative to it, or a host path inside
//! the session's host workspace. `.` and `..` are resolved first, on the text, as a shell's
//! logical `cd` does (`/workspace/d/../d` is `/workspace/d`); a path that then lies outside the
//! workspace leaves it. The rest is resolved on the host beneath the open workspace (relative
//! symlinks inside it are followed, nothing that leads out is) and must exist as a directory;
//! otherwise the error names the allowed root (docs/security.md, "Run directory and workspace
//! files").

use std::path::{Component, Path, PathBuf};

use crate::contract::WORKSPACE_MOUNT;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WorkdirError {
    #[error(
        "use workdir `{requested}`: it leaves the workspace (allowed root: {root} or {host_root})"
    )]
    Escapes {
        requested: String,
        root: String,
        host_root: String,
    },
    #[error("use workdir `{requested}`: no such directory in the workspace (allowed root: {root} or {host_root})")]
    Missing {
        requested: String,
        root: String,
        host_root: String,
    },
}

/// Returns the container path to run in.
pub fn map_workdir(requested: Option<&str>, host_workspace: &Path) -> Result<String, WorkdirError> {
    let requested = requested.map(str::trim).filter(|r| !r.is_empty());
    let Some(req) = requested else {
        return Ok(WORKSPACE_MOUNT.to_string());
    };
    let root = WORKSPACE_MOUNT.to_string();
    let host_root = host_workspace.display().to_string();
    // The request is quoted in the error: its control and bidi characters are shown escaped.
    let shown = crate::output::escape_display(req);
    let escapes = || WorkdirError::Escapes {
        requested: shown.clone(),
        root: root.clone(),
        host_root: host_root.clone(),
    };
    // A relative path is relative to the workspace; either side's absolute form is accepted.
    let path = lexical_normalize(&Path::new(WORKSPACE_MOUNT).join(req));
    let rel: PathBuf = if let Ok(r) = path.strip_prefix(host_workspace) {
        r.to_path_buf()
    } else if let Ok(r) = path.strip_prefix(WORKSPACE_MOUNT) {
        r.to_path_buf()
    } else {
        return Err(escapes());
    };
    let missing = || WorkdirError::Missing {
        requested: shown.clone(),
        root: root.clone(),
        host_root: host_root.clone(),
    };
    let (real_root, real) = match resolve_beneath(host_workspace, &rel) {
        Ok(r) => r,
        Err(Resolve::Escapes) => return Err(escapes()),
        Err(Resolve::Missing) => return Err(missing()),
    };
    let Ok(inside) = real.strip_prefix(&real_root) else {
        return Err(escapes());
    };
    if inside.as_os_str().is_empty() {
        return Ok(WORKSPACE_MOUNT.to_string());
    }
    Ok(Path::new(WORKSPACE_MOUNT)
        .join(inside)
        .display()
        .to_string())
}

/// Resolves `.` and `..` in the absolute path `p` on its text alone, as POSIX `cd` does without
/// `-P` (`/..` is `/`). The result has no `.` or `..` left, so a workspace prefix on it means
/// the path stays in the workspace; symlinks are the kernel's to judge afterwards.
fn lexical_normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

enum Resolve {
    Escapes,
    Missing,
}

/// Resolves `rel` as a directory beneath the workspace, never leaving it on the host, with
/// the routine the file tools use (`files::beneath`): the workspace is opened `O_NOFOLLOW`,
/// and `openat2(RESOLVE_BENEATH)` refuses `..`, absolute symlinks and symlinks that lead out,
/// instead of following them to a host path (which would tell the sandbox whether a host path
/// exists; docs/security.md, "Run directory and workspace files"); a lookup a rename raced is
/// tried again rather than reported missing. Returns the real paths of the workspace and of
/// the directory found.
fn resolve_beneath(workspace: &Path, rel: &Path) -> Result<(PathBuf, PathBuf), Resolve> {
    use crate::files::beneath::{self, BeneathError};
    use nix::fcntl::OFlag;
    let root = beneath::open_root(workspace).map_err(|_| Resolve::Missing)?;
    let dir =
        beneath::open(&root, rel, OFlag::O_PATH | OFlag::O_DIRECTORY).map_err(|e| match e {
            BeneathError::Escapes => Resolve::Escapes,
            BeneathError::Missing | BeneathError::Io(_) => Resolve::Missing,
        })?;
    let real = |fd| beneath::real_path(fd).map_err(|_| Resolve::Missing);
    Ok((real(&root)?, real(&dir)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("src/app")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::fs::write(ws.join("file.txt"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), ws.join("escape")).unwrap();
        std::os::unix::fs::symlink("src", ws.join("inner-link")).unwrap();
        std::os::unix::fs::symlink(ws.join("src"), ws.join("abs-link")).unwrap();
        // Whether a host path exists must not show: both answers are "leaves".
        std::os::unix::fs::symlink("/nonexistent-host-path", ws.join("probe")).unwrap();
        let host = |p: &str| format!("{}/{p}", ws.display());
        let rows: Vec<(Option<String>, Result<&str, &str>)> = vec![
            (None, Ok("/workspace")),
            (Some("".into()), Ok("/workspace")),
            (Some("/workspace".into()), Ok("/workspace")),
            (Some("/workspace/src".into()), Ok("/workspace/src")),
            (Some("src/app".into()), Ok("/workspace/src/app")),
            (Some(host("src/app")), Ok("/workspace/src/app")),
            (Some(ws.display().to_string()), Ok("/workspace")),
            (Some("inner-link".into()), Ok("/workspace/src")),
            // An absolute symlink means a host path here and something else in the
            // container: it is never followed on the host.
            (Some("abs-link".into()), Err("leaves")),
            (Some("probe".into()), Err("leaves")),
            // `..` that stays inside is resolved on the text, as a shell's `cd` does.
            (Some("/workspace/src/../src".into()), Ok("/workspace/src")),
            (Some("/workspace/src/./app/..".into()), Ok("/workspace/src")),
            (Some("src/app/../..".into()), Ok("/workspace")),
            (
                Some("/workspace/src/../../workspace/src".into()),
                Ok("/workspace/src"),
            ),
            (Some(host("src/../src/app")), Ok("/workspace/src/app")),
            (Some("/workspace/../etc".into()), Err("leaves")),
            (Some("../outside".into()), Err("leaves")),
            (Some("src/../../outside".into()), Err("leaves")),
            (Some("/workspace/..".into()), Err("leaves")),
            (Some("/workspace/src/../..".into()), Err("leaves")),
            (Some("/workspace/../workspace-other".into()), Err("leaves")),
            (Some(host("../outside")), Err("leaves")),
            // A symlink that leads out stays refused, however the path reaches it.
            (Some("src/../escape".into()), Err("leaves")),
            (Some("escape/../escape".into()), Err("leaves")),
            (Some("inner-link/../src".into()), Ok("/workspace/src")),
            (Some("/workspace/src/../probe".into()), Err("leaves")),
            (
                Some("/workspace/a\u{202e}\nb".into()),
                Err("no such directory"),
            ),
            (Some("/etc/\u{202e}\u{1b}[2J".into()), Err("leaves")),
            (Some("/etc".into()), Err("leaves")),
            (Some("/tmp".into()), Err("leaves")),
            (Some("escape".into()), Err("leaves")),
            (Some("/workspace/escape".into()), Err("leaves")),
            (Some("nope".into()), Err("no such directory")),
            (Some("file.txt".into()), Err("no such directory")),
        ];
        for (req, want) in rows {
            let got = map_workdir(req.as_deref(), &ws);
            match (&got, want) {
                (Ok(p), Ok(w)) => assert_eq!(p, w, "{req:?}"),
                (Err(e), Err(w)) => {
                    let msg = e.to_string();
                    assert!(msg.contains(w), "{req:?}: {msg}");
                    assert!(msg.contains("allowed root: /workspace"), "{msg}");
                    assert!(
                        !msg.chars().any(crate::output::is_deceptive),
                        "{req:?}: raw control or bidi character in {msg:?}"
                    );
                }
                _ => panic!("{req:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// A rename anywhere on the machine while the lookup goes through `..` makes the kernel
    /// answer `EAGAIN`; the workdir once took that for a missing directory (the file tools
    /// already tried again). The sandbox can rename in its workspace at will.
    #[test]
    fn a_rename_racing_the_lookup_is_no_missing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("a")).unwrap();
        std::fs::create_dir_all(ws.join("b")).unwrap();
        std::fs::create_dir_all(ws.join("spin")).unwrap();
        std::os::unix::fs::symlink("../b", ws.join("a/link")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let renamer = {
            let (stop, ws) = (stop.clone(), ws.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::fs::rename(ws.join("spin"), ws.join("spun")).unwrap();
                    std::fs::rename(ws.join("spun"), ws.join("spin")).unwrap();
                }
            })
        };
        let started = std::time::Instant::now();
        let mut lookups = 0;
        let mut failed = Vec::new();
        while started.elapsed() < std::time::Duration::from_secs(1) {
            lookups += 1;
            if let Err(e) = map_workdir(Some("a/link"), &ws) {
                failed.push(e);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        renamer.join().unwrap();
        eprintln!("{lookups} lookups, {} failed", failed.len());
        assert!(
            failed.is_empty(),
            "{} of {lookups}: {:?}",
            failed.len(),
            failed.first()
        );
    }
}
