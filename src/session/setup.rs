//! What a session is created with beyond the configuration (`moat sessions create NAME
//! --workspace DIR`, `moat exec --workspace DIR`, `moat run --image … --network …`,
//! `POST /v1/sessions` for operators): which host directories may be a workspace, which user
//! the container then runs as, which images and networks a session may choose, and when a
//! request conflicts with what a session already has (docs/security.md, "Host workspaces").
//!
//! The decisions ([`choose_user`], [`check_same`], [`check_image`], [`check_network`]) are
//! pure and table-tested; [`inspect`] is the thin I/O around them: it resolves the path, puts
//! it through the very refusals `sandbox.binds` get ([`crate::config::check_host_path`]), and
//! reads the owner from the opened directory rather than from the path.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{open, OFlag};
use nix::sys::stat::{fstat, Mode};

use crate::config::SandboxConfig;
use crate::store::{SessionSetup, WorkspaceRow};

/// `HOME` for a sandbox user taken from a workspace's owner: that uid usually has no entry
/// in the image's passwd file, so the engine would set `/`, which is read-only.
pub const OWNER_HOME: &str = "/tmp";

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("use {path} as a workspace: {why}")]
    Refused { path: String, why: String },
    #[error("use {path} as a workspace")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The two ways out give different things, and the text says which: a chown makes the
    /// checkout the sandbox's to write, `sandbox.user` alone leaves it read-only to the
    /// sandbox (README, "Root-owned checkouts").
    #[error("use {path} as a workspace: it belongs to root (uid 0), and moat never runs a sandbox as root. Either give it to the sandbox's user, `chown -R {user} {quoted}`: the sandbox then runs as its owner and can write it, and what it makes is {user}'s on the host; or leave it root's and set sandbox.user to the uid:gid commands should run as: the sandbox can then read it but not write to it")]
    RootOwned {
        /// The directory as the caller named it.
        path: String,
        /// The same, quoted for a shell, so the suggested command can be pasted.
        quoted: String,
        /// The `uid:gid` the sandbox runs as when nothing else is chosen (`sandbox.user`'s
        /// default), the owner to give the directory to.
        user: String,
    },
    #[error("create session {session} with {asked}: the session already has {current}, fixed for its life; run `moat sessions rm {session}` and create it again to change it")]
    Conflict {
        session: String,
        current: String,
        asked: String,
    },
    #[error(
        "use image `{0}`: an image name is at most 256 characters of letters, digits and `._-/:@`"
    )]
    Image(String),
    #[error("use network `{0}`: a session chooses `none` or `bridge`")]
    Network(String),
    #[error("create session {0} with its own workspace, image or network: sandbox.scope is not `session`, so its container is shared with other sessions; this needs scope = \"session\"")]
    Shared(String),
    #[error("use a host workspace: sandbox.workspace_access is none, so no workspace is mounted")]
    NoMount,
}

impl SetupError {
    /// Whether the caller's request is at fault (a 400 on HTTP) rather than moat.
    pub fn is_callers(&self) -> bool {
        !matches!(self, SetupError::Open { .. })
    }
}

/// The `uid:gid` a container with a host workspace owned by `owner` runs as: `sandbox.user`
/// when the operator set it, else the owner, so files made in the sandbox belong to whoever
/// owns the directory on the host; never root.
pub fn choose_user(
    path: &str,
    owner: (u32, u32),
    sandbox: &SandboxConfig,
) -> Result<String, SetupError> {
    if sandbox.user_set {
        return Ok(sandbox.user.clone());
    }
    if owner.0 == 0 {
        return Err(SetupError::RootOwned {
            path: path.to_string(),
            quoted: shlex::try_quote(path)
                .map(|q| q.into_owned())
                .unwrap_or_else(|_| path.to_string()),
            user: sandbox.user.clone(),
        });
    }
    Ok(format!("{}:{}", owner.0, owner.1))
}

/// Refuses `asked` for `session` when the session already has another setup: `current` is
/// its recorded one, and `existing_default` the default workspace of a session that already
/// exists without a record (`None`: the session is new).
pub fn check_same(
    session: &str,
    current: Option<&SessionSetup>,
    existing_default: Option<&Path>,
    asked: &SessionSetup,
) -> Result<(), SetupError> {
    let none = SessionSetup::default();
    let current = match (current, existing_default) {
        (Some(c), _) => c,
        (None, Some(_)) => &none,
        (None, None) => return Ok(()),
    };
    if current == asked {
        return Ok(());
    }
    Err(SetupError::Conflict {
        session: session.to_string(),
        current: describe(current, existing_default),
        asked: describe(asked, None),
    })
}

/// "workspace /srv/a (read-only), image x, network bridge".
fn describe(setup: &SessionSetup, default: Option<&Path>) -> String {
    let mut parts = Vec::new();
    match (&setup.workspace, default) {
        (Some(w), _) if w.read_only => parts.push(format!("workspace {} (read-only)", w.path)),
        (Some(w), _) if w.git_writable => {
            parts.push(format!("workspace {} (git writable)", w.path))
        }
        (Some(w), _) => parts.push(format!("workspace {}", w.path)),
        (None, Some(d)) => parts.push(format!("its default workspace {}", d.display())),
        (None, None) => parts.push("the default workspace".to_string()),
    }
    if let Some(i) = &setup.image {
        parts.push(format!("image {i}"));
    }
    if let Some(n) = &setup.network {
        parts.push(format!("network {n}"));
    }
    if let Some(r) = &setup.runtime {
        parts.push(format!("runtime {r}"));
    }
    if setup.root {
        parts.push("root allowed".to_string());
    }
    if let Some(h) = &setup.home {
        parts.push(format!("the workspace also at {h}"));
    }
    parts.join(", ")
}

/// An image a session may name: a bounded reference in the engine's alphabet (it is passed
/// on to the engine, never to a shell).
pub fn check_image(image: &str) -> Result<(), SetupError> {
    let ok = !image.is_empty()
        && image.len() <= 256
        && !image.starts_with('-')
        && image
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/:@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(SetupError::Image(crate::output::escape_display(
            &image.chars().take(300).collect::<String>(),
        )))
    }
}

/// The networks a session may choose: none, or the engine's default bridge. Anything else
/// (host, container:…, a named network) is the configuration's to decide.
pub fn check_network(network: &str) -> Result<(), SetupError> {
    match network {
        "none" | "bridge" => Ok(()),
        other => Err(SetupError::Network(crate::output::escape_display(
            &other.chars().take(100).collect::<String>(),
        ))),
    }
}

/// How the operator asked for a host workspace to be mounted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkspaceMode {
    /// The whole directory read-only (`--read-only`).
    pub read_only: bool,
    /// Its git metadata writable (`--git-writable`); without it `.git` is read-only.
    pub git_writable: bool,
}

/// Resolves and checks `dir` and decides the user: the row to record for the session.
/// `home` is the operator's home directory, whose secret directories are refused.
pub fn inspect(
    dir: &Path,
    mode: WorkspaceMode,
    sandbox: &SandboxConfig,
    home: Option<&Path>,
) -> Result<WorkspaceRow, SetupError> {
    let shown = dir.display().to_string();
    if sandbox.workspace_access == crate::config::WorkspaceAccess::None {
        return Err(SetupError::NoMount);
    }
    let refused = |why: String| SetupError::Refused {
        path: shown.clone(),
        why,
    };
    if !dir.is_absolute() {
        return Err(refused("the path is not absolute".into()));
    }
    // As written (a symlink named like a forbidden directory) and as resolved.
    crate::config::check_host_path(&shown, home).map_err(|w| refused(format!("it {w}")))?;
    let real = std::fs::canonicalize(dir).map_err(|source| SetupError::Open {
        path: shown.clone(),
        source,
    })?;
    let real_text = real
        .to_str()
        .ok_or_else(|| refused("the path is not UTF-8".into()))?
        .to_string();
    if real_text.contains(':') || real_text.contains(',') {
        // The engine's mount syntax separates fields with these.
        return Err(refused("the path holds `:` or `,`".into()));
    }
    crate::config::check_host_path(&real_text, home)
        .map_err(|w| refused(format!("it resolves to {real_text}, which {w}")))?;
    let fd = open_dir(&real).map_err(|source| SetupError::Open {
        path: shown.clone(),
        source,
    })?;
    let st = fstat(&fd).map_err(|e| SetupError::Open {
        path: shown.clone(),
        source: e.into(),
    })?;
    let user = choose_user(&shown, (st.st_uid, st.st_gid), sandbox)?;
    Ok(WorkspaceRow {
        path: real_text,
        read_only: mode.read_only,
        user,
        // A read-only workspace has nothing to make writable.
        git_writable: mode.git_writable && !mode.read_only,
    })
}

/// Opens a resolved directory; a symlink swapped in since it was resolved is refused.
pub fn open_dir(dir: &Path) -> std::io::Result<OwnedFd> {
    Ok(open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The host directory of a recorded workspace, checked again before each container start:
/// it must still be a directory (not a symlink swapped in).
pub fn reopen(row: &WorkspaceRow) -> std::io::Result<PathBuf> {
    let path = PathBuf::from(&row.path);
    open_dir(&path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, ro: bool) -> WorkspaceRow {
        WorkspaceRow {
            path: path.into(),
            read_only: ro,
            user: "1000:1000".into(),
            git_writable: false,
        }
    }

    #[test]
    fn the_suggested_chown_can_be_pasted() {
        let e = choose_user("/ci/my repo", (0, 0), &SandboxConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`chown -R 1000:1000 '/ci/my repo'`"), "{e}");
    }

    #[test]
    fn the_user_is_the_owner_unless_set_and_never_root() {
        let default = SandboxConfig::default();
        let set = SandboxConfig {
            user: "2000:3000".into(),
            user_set: true,
            ..Default::default()
        };
        let rows: &[(&SandboxConfig, (u32, u32), Option<&str>)] = &[
            (&default, (1234, 5678), Some("1234:5678")),
            (&default, (0, 0), None),
            (&default, (0, 1000), None),
            (&set, (1234, 5678), Some("2000:3000")),
            (&set, (0, 0), Some("2000:3000")),
        ];
        for (sandbox, owner, want) in rows {
            let got = choose_user("/w", *owner, sandbox);
            match want {
                Some(u) => assert_eq!(got.unwrap(), *u, "{owner:?}"),
                None => {
                    // Each way out, with what it gives.
                    let e = got.unwrap_err().to_string();
                    assert!(
                        e.contains("`chown -R 1000:1000 /w`: the sandbox then runs as its owner and can write it"),
                        "{e}"
                    );
                    assert!(
                        e.contains("set sandbox.user to the uid:gid commands should run as: the sandbox can then read it but not write to it"),
                        "{e}"
                    );
                }
            }
        }
    }

    #[test]
    fn another_setup_on_an_existing_session_is_a_conflict() {
        let ws = |path: &str, ro| SessionSetup {
            workspace: Some(row(path, ro)),
            ..Default::default()
        };
        let a = ws("/srv/a", false);
        let image = SessionSetup {
            image: Some("img:2".into()),
            ..Default::default()
        };
        let default = PathBuf::from("/home/op/.moat/workspaces/s");
        type Row<'a> = (
            Option<&'a SessionSetup>,
            Option<&'a Path>,
            SessionSetup,
            Option<&'a str>,
        );
        let rows: Vec<Row> = vec![
            (None, None, ws("/srv/a", false), None),
            (Some(&a), None, ws("/srv/a", false), None),
            (
                Some(&a),
                None,
                ws("/srv/b", false),
                Some("workspace /srv/a"),
            ),
            (Some(&a), None, ws("/srv/a", true), Some("workspace /srv/a")),
            (
                Some(&a),
                None,
                SessionSetup {
                    workspace: Some(WorkspaceRow {
                        git_writable: true,
                        ..row("/srv/a", false)
                    }),
                    ..Default::default()
                },
                Some("workspace /srv/a"),
            ),
            (Some(&a), None, image.clone(), Some("workspace /srv/a")),
            (Some(&image), None, ws("/srv/a", false), Some("image img:2")),
            (
                None,
                Some(&default),
                ws("/srv/a", false),
                Some("workspaces/s"),
            ),
            (None, Some(&default), SessionSetup::default(), None),
        ];
        for (current, existing, asked, conflict) in &rows {
            let got = check_same("s", *current, *existing, asked);
            match conflict {
                None => assert!(got.is_ok(), "{current:?} {existing:?} {asked:?}: {got:?}"),
                Some(named) => {
                    let e = got.unwrap_err().to_string();
                    assert!(e.contains(named), "{e}");
                    assert!(e.contains(&describe(asked, None)), "{e}");
                    assert!(e.contains("moat sessions rm s"), "{e}");
                }
            }
        }
    }

    #[test]
    fn images_and_networks_a_session_may_choose() {
        let long = "a".repeat(300);
        for (image, ok) in [
            ("moat-sandbox:bookworm", true),
            ("registry.local:5000/team/img@sha256:abc", true),
            ("", false),
            ("-x", false),
            ("img; rm -rf /", false),
            (long.as_str(), false),
        ] {
            assert_eq!(check_image(image).is_ok(), ok, "{image}");
        }
        for (net, ok) in [
            ("none", true),
            ("bridge", true),
            ("host", false),
            ("container:x", false),
            ("my-net", false),
        ] {
            assert_eq!(check_network(net).is_ok(), ok, "{net}");
        }
    }

    #[test]
    fn forbidden_directories_and_symlinks_to_them_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("innocent");
        std::os::unix::fs::symlink("/etc", &link).unwrap();
        let parent_link = dir.path().join("up");
        std::os::unix::fs::symlink("/", &parent_link).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let sandbox = SandboxConfig {
            user_set: true,
            ..Default::default()
        };
        for path in [
            PathBuf::from("/"),
            PathBuf::from("/etc"),
            PathBuf::from("/var/run/docker.sock"),
            home.join(".ssh"),
            home.clone(),
            link,
            parent_link,
            PathBuf::from("relative"),
        ] {
            let err = inspect(&path, WorkspaceMode::default(), &sandbox, Some(&home)).unwrap_err();
            assert!(
                matches!(err, SetupError::Refused { .. }),
                "{}: {err}",
                path.display()
            );
        }
        let ok = dir.path().join("project");
        std::fs::create_dir(&ok).unwrap();
        let ro = WorkspaceMode {
            read_only: true,
            git_writable: true,
        };
        let got = inspect(&ok, ro, &sandbox, Some(&home)).unwrap();
        assert_eq!(
            got.path,
            std::fs::canonicalize(&ok).unwrap().to_str().unwrap()
        );
        assert!(got.read_only);
        assert!(
            !got.git_writable,
            "a read-only workspace has no writable .git"
        );
    }
}
