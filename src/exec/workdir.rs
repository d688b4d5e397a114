//! Maps a requested workdir to a container path inside the workspace (SPEC §3).
//!
//! Accepted: a container path under `/workspace`, a path relative to it, or a host path inside
//! the session's host workspace. The host side is resolved (symlinks included) and must stay
//! inside the workspace and exist as a directory; otherwise the error names the allowed root.

use std::path::{Component, Path, PathBuf};

use crate::session::WORKSPACE_MOUNT;

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
    let escapes = || WorkdirError::Escapes {
        requested: req.to_string(),
        root: root.clone(),
        host_root: host_root.clone(),
    };
    let path = Path::new(req);
    // Relative to the workspace, as seen from either side.
    let rel: PathBuf = if let Ok(r) = path.strip_prefix(host_workspace) {
        r.to_path_buf()
    } else if let Ok(r) = path.strip_prefix(WORKSPACE_MOUNT) {
        r.to_path_buf()
    } else if path.is_relative() {
        path.to_path_buf()
    } else {
        return Err(escapes());
    };
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(escapes());
    }
    let host = host_workspace.join(&rel);
    let real_root = host_workspace
        .canonicalize()
        .unwrap_or_else(|_| host_workspace.to_path_buf());
    let real = match host.canonicalize() {
        Ok(r) => r,
        Err(_) => {
            return Err(WorkdirError::Missing {
                requested: req.to_string(),
                root,
                host_root,
            })
        }
    };
    if !real.starts_with(&real_root) {
        return Err(escapes());
    }
    if !real.is_dir() {
        return Err(WorkdirError::Missing {
            requested: req.to_string(),
            root,
            host_root,
        });
    }
    let inside = real.strip_prefix(&real_root).unwrap_or(Path::new(""));
    if inside.as_os_str().is_empty() {
        return Ok(WORKSPACE_MOUNT.to_string());
    }
    Ok(Path::new(WORKSPACE_MOUNT)
        .join(inside)
        .display()
        .to_string())
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
        std::os::unix::fs::symlink(ws.join("src"), ws.join("inner-link")).unwrap();
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
            (Some("/workspace/../etc".into()), Err("leaves")),
            (Some("../outside".into()), Err("leaves")),
            (Some("src/../../outside".into()), Err("leaves")),
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
                }
                _ => panic!("{req:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
