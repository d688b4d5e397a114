//! E2B's paths onto the sandbox's home (docs/e2b.md, "Files"): a relative path, `~` and
//! `~/…` are under the calling user's home (`/home/user`, or root's `/root`); what moat serves
//! is `/home/user`, the session's workspace (also `/workspace` in the container). The text is cleaned as E2B's daemon cleans it (`..` taken
//! lexically, never above `/`), and what is then outside the home is refused with the rule
//! named. Pure: whether the path stays inside once symbolic links are followed is the
//! kernel's to say when it is opened (`files::confine`).

use std::path::{Component, Path, PathBuf};

/// The E2B user's home: the session's workspace, the one directory moat serves.
pub use crate::config::e2b::HOME;
/// The same directory as the container also mounts it.
const WORKSPACE: &str = crate::contract::WORKSPACE_MOUNT;
/// The longest path accepted, in bytes (PATH_MAX).
const MAX_PATH: usize = 4096;

/// A path beneath the home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomePath {
    /// Relative to the home, cleaned: `.` for the home itself, else plain names joined by `/`.
    pub rel: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("use path `{0}`: it is longer than {MAX_PATH} bytes")]
    TooLong(String),
    #[error("use path `{0}`: it contains a NUL byte")]
    Nul(String),
    #[error("use path `{0}`: it is outside the user's home ({HOME}); moat serves files beneath the home only, which is the sandbox's workspace (docs/e2b.md, \"Files\")")]
    Outside(String),
}

impl HomePath {
    /// The path as E2B shows it: absolute, under [`HOME`].
    pub fn shown(&self) -> String {
        if self.rel == "." {
            HOME.to_string()
        } else {
            format!("{HOME}/{}", self.rel)
        }
    }

    /// The home-relative path of `rel` as [`crate::files::Workspace`] reports it; `None`
    /// when it is not UTF-8, which no answer may show: a lossy spelling would name another
    /// file (docs/e2b.md, "Files").
    pub fn of(rel: &Path) -> Option<Self> {
        rel.to_str().map(Self::of_text)
    }

    /// [`Self::of`] a path given as text.
    fn of_text(text: &str) -> Self {
        let text = text.trim_start_matches("./");
        Self {
            rel: if text.is_empty() {
                ".".into()
            } else {
                text.to_string()
            },
        }
    }

    /// The last component (the home's own name for the home).
    pub fn name(&self) -> String {
        let shown = self.shown();
        shown.rsplit('/').next().unwrap_or_default().to_string()
    }
}

/// [`resolve_for`] the sandbox's own user, whose home is [`HOME`].
#[cfg(test)]
pub fn resolve(path: &str) -> Result<HomePath, PathError> {
    resolve_for(path, HOME)
}

/// `path` as cleaned absolute components, `..` popping (never above `/`).
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Where `path` (from a request by a user whose home is `user_home`) is beneath the home.
pub fn resolve_for(path: &str, user_home: &str) -> Result<HomePath, PathError> {
    let shown = || crate::output::escape_display(&path.chars().take(256).collect::<String>());
    if path.len() > MAX_PATH {
        return Err(PathError::TooLong(shown()));
    }
    if path.contains('\0') {
        return Err(PathError::Nul(shown()));
    }
    let absolute = if path == "~" {
        PathBuf::from(user_home)
    } else if let Some(rest) = path.strip_prefix("~/") {
        Path::new(user_home).join(rest)
    } else {
        Path::new(user_home).join(path)
    };
    let cleaned = clean(&absolute);
    let rel = [HOME, WORKSPACE]
        .iter()
        .find_map(|base| cleaned.strip_prefix(base).ok())
        .ok_or_else(|| PathError::Outside(shown()))?;
    // Made of the request's own text, so UTF-8.
    Ok(HomePath::of_text(&rel.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_land_beneath_the_home_or_are_refused() {
        for (given, want) in [
            ("a.txt", Some("a.txt")),
            ("", Some(".")),
            (".", Some(".")),
            ("~", Some(".")),
            ("~/d/a.txt", Some("d/a.txt")),
            ("/home/user", Some(".")),
            ("/home/user/", Some(".")),
            ("/home/user/d//./a", Some("d/a")),
            ("/home/user/d/../e", Some("e")),
            ("/workspace/x", Some("x")),
            ("~x", Some("~x")),
            ("d/../../user/z", Some("z")),
            ("..", None),
            ("../other/x", None),
            ("/home/user/../../etc/passwd", None),
            ("/home/username", None),
            ("/etc/passwd", None),
            ("/tmp/x", None),
            ("/", None),
            ("~/../x", None),
        ] {
            match (resolve(given), want) {
                (Ok(p), Some(w)) => assert_eq!(p.rel, w, "{given}"),
                (Err(e), None) => assert!(
                    e.to_string().contains("outside the user's home"),
                    "{given}: {e}"
                ),
                (got, want) => panic!("{given}: got {got:?}, want {want:?}"),
            }
        }
        // Root's relative paths are under /root, which moat does not serve.
        assert!(resolve_for("x", "/root").is_err());
        assert!(resolve_for("~", "/root").is_err());
        assert_eq!(resolve_for("/home/user/x", "/root").unwrap().rel, "x");
        assert!(resolve("a\0b").unwrap_err().to_string().contains("NUL"));
        assert!(resolve(&"a/".repeat(3000))
            .unwrap_err()
            .to_string()
            .contains("4096"));
        let p = resolve("d/a.txt").unwrap();
        assert_eq!(
            (p.shown().as_str(), p.name().as_str()),
            ("/home/user/d/a.txt", "a.txt")
        );
        let home = resolve("~").unwrap();
        assert_eq!(
            (home.shown().as_str(), home.name().as_str()),
            ("/home/user", "user")
        );
        assert_eq!(HomePath::of(Path::new(".")).unwrap().rel, ".");
        assert_eq!(HomePath::of(Path::new("x/y")).unwrap().rel, "x/y");
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = Path::new(std::ffi::OsStr::from_bytes(b"a\xff"));
        assert_eq!(HomePath::of(not_utf8), None, "never shown lossily");
    }
}
