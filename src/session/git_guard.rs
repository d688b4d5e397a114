//! What of a host workspace the sandbox sees read-only so that nothing it plants runs later
//! on the host (docs/security.md, "Host workspaces").
//!
//! The sandbox runs as the checkout's owner, so git's `safe.directory` check passes on the
//! host, and git there runs what it finds in the repository's metadata: hooks, and commands
//! in its config (`core.fsmonitor`, `core.pager`, `core.sshCommand`, filters, …). So the
//! metadata is mounted read-only over the workspace mount:
//!
//! - `.git` (a directory, or a `gitdir:` file together with the directory it names when that
//!   lies in the workspace), the `commondir` it names, and the directories and files its
//!   config makes git read from the checkout (`core.hooksPath`, `include.path`,
//!   `includeIf.*.path`);
//! - every submodule the index lists (a gitlink: `git status` runs git inside each): its
//!   `.git`, or the whole directory when it is not checked out (else the sandbox could make it
//!   a repository of its own), and its own metadata the same way, recursively;
//! - the `.git` file of a linked worktree the repository keeps inside the workspace.
//!
//! A bind mount moves with its parent directory when that is renamed, so mounting `.git` of
//! `vendor/lib` alone would let the sandbox rename `vendor` and put a repository of its own
//! where the submodule was. Every directory between the workspace and a read-only path is
//! therefore *pinned*: bind-mounted onto itself, writable, which makes it a mount point the
//! kernel refuses to rename or remove (`EBUSY`).
//!
//! Everything is looked up beneath the workspace's descriptor without following a symbolic
//! link: the sandbox may have planted one to make moat mount a host directory of its
//! choosing. A symbolic link on the way is an error naming it, not a path skipped, as is a
//! path the metadata names that does not exist (the sandbox could create it): moat does not
//! start a container it cannot guard. `--git-writable` is the way out of both.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, Mode, SFlag};

use super::git_config;
use super::git_index;
use crate::contract::WORKSPACE_MOUNT;
use crate::runtime::Mount;

/// Most mounts one workspace's guard may add: past it the session is refused rather than
/// left half guarded.
pub const MAX_GUARD_MOUNTS: usize = 256;
/// Largest config, `gitdir:` or `commondir` file read.
const MAX_TEXT_BYTES: u64 = 1 << 20;
/// Largest index read (Chromium's is about 30 MiB).
const MAX_INDEX_BYTES: u64 = 256 << 20;
/// Deepest submodule nesting followed.
const MAX_DEPTH: usize = 8;
/// How deep configuration includes are followed; git's own limit is 10.
const MAX_INCLUDE_DEPTH: usize = 10;
/// Most linked worktrees listed per repository.
const MAX_WORKTREES: usize = 1024;

/// Mounts that keep a host workspace's git metadata out of the sandbox's reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitGuard {
    /// Directories, relative to the workspace, bind-mounted onto themselves writable: mount
    /// points cannot be renamed, so nothing read-only below them can be moved aside.
    pub pins: Vec<PathBuf>,
    /// Directories and files, relative to the workspace, mounted read-only.
    pub read_only: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("protect the git metadata of {root}: {path} is a symbolic link, so moat cannot mount what git reads there read-only (the sandbox could point it elsewhere); replace it with the directory or file it leads to, or create the session with --git-writable")]
    Symlink { root: String, path: String },
    #[error("protect the git metadata of {root}: {what} names {path}, which does not exist, and the sandbox could create it with content git on the host would run; create it, remove that setting, or create the session with --git-writable")]
    Missing {
        root: String,
        what: String,
        path: String,
    },
    #[error(
        "protect the git metadata of {root}: {path} is neither a directory nor a regular file"
    )]
    Odd { root: String, path: String },
    #[error("protect the git metadata of {root}: it needs more than {MAX_GUARD_MOUNTS} read-only mounts (submodules nested more than {MAX_DEPTH} deep, or very many); create the session with --git-writable")]
    TooMany { root: String },
    #[error("protect the git metadata of {root}: read {path}: {reason}")]
    Unreadable {
        root: String,
        path: String,
        reason: String,
    },
    #[error("protect the git metadata of {root}: read {path}")]
    Io {
        root: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl GitGuard {
    /// Nothing to mount (no `.git` in the workspace).
    pub fn is_empty(&self) -> bool {
        self.pins.is_empty() && self.read_only.is_empty()
    }

    /// The bind mounts for a workspace at `root`, to be added after the workspace's own:
    /// pins writable, the rest read-only (the engine mounts parents before children).
    pub fn mounts(&self, root: &Path) -> Vec<Mount> {
        let mount = |rel: &PathBuf, read_only: bool| Mount {
            source: root.join(rel).display().to_string(),
            target: Path::new(WORKSPACE_MOUNT).join(rel).display().to_string(),
            read_only,
        };
        self.pins
            .iter()
            .map(|p| mount(p, false))
            .chain(self.read_only.iter().map(|p| mount(p, true)))
            .collect()
    }

    /// The host paths mounted read-only: what moat's own file tools must not write either.
    pub fn read_only_paths(&self, root: &Path) -> Vec<PathBuf> {
        self.read_only.iter().map(|p| root.join(p)).collect()
    }

    /// A stable text of the mounts, for the container's config hash: other mounts, another
    /// container.
    pub fn fingerprint(&self) -> String {
        let mut text = String::new();
        for p in &self.pins {
            text.push_str(&format!("pin {}\n", p.display()));
        }
        for p in &self.read_only {
            text.push_str(&format!("ro {}\n", p.display()));
        }
        text
    }
}

/// The guard for the workspace at `root` (resolved, as recorded); see the module docs.
pub fn scan(root: &Path) -> Result<GitGuard, GuardError> {
    let fd = super::setup::open_dir(root).map_err(|source| GuardError::Io {
        root: root.display().to_string(),
        path: root.display().to_string(),
        source,
    })?;
    let mut s = Scan {
        root,
        fd,
        pins: Vec::new(),
        read_only: Vec::new(),
    };
    let git = PathBuf::from(".git");
    let gitdir = match s.lookup(&git)? {
        None => return Ok(GitGuard::default()),
        Some(Kind::Dir) => {
            s.read_only(&git)?;
            Located::Inside(git)
        }
        Some(Kind::File) => {
            s.read_only(&git)?;
            match s.gitdir_of(&git, Path::new(""))? {
                Some(gitdir) => gitdir,
                None => return s.finish(),
            }
        }
        Some(Kind::Symlink) => return Err(s.symlink(&git)),
        Some(Kind::Other) => return Err(s.odd(&git)),
    };
    s.repository(&gitdir, Path::new(""), 0)?;
    s.finish()
}

/// What is at a path, not following a final symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// Where a path git's metadata names lies.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Located {
    /// In the workspace: relative to it, free of `.` and `..`.
    Inside(PathBuf),
    /// Elsewhere on the host, out of the sandbox's reach: absolute.
    Outside(PathBuf),
}

struct Scan<'a> {
    /// The workspace's host path, as resolved and recorded.
    root: &'a Path,
    /// The workspace, opened without following a link: every lookup starts here.
    fd: OwnedFd,
    pins: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
}

impl Scan<'_> {
    fn shown(&self, rel: &Path) -> String {
        crate::output::escape_display(&self.root.join(rel).display().to_string())
    }

    fn root_text(&self) -> String {
        crate::output::escape_display(&self.root.display().to_string())
    }

    fn symlink(&self, rel: &Path) -> GuardError {
        GuardError::Symlink {
            root: self.root_text(),
            path: self.shown(rel),
        }
    }

    fn odd(&self, rel: &Path) -> GuardError {
        GuardError::Odd {
            root: self.root_text(),
            path: self.shown(rel),
        }
    }

    fn missing(&self, what: &str, rel: &Path) -> GuardError {
        GuardError::Missing {
            root: self.root_text(),
            what: what.to_string(),
            path: self.shown(rel),
        }
    }

    fn io(&self, rel: &Path, e: impl Into<std::io::Error>) -> GuardError {
        GuardError::Io {
            root: self.root_text(),
            path: self.shown(rel),
            source: e.into(),
        }
    }

    /// Opens the directory `rel` beneath the workspace, one component at a time, never
    /// following a link; `Ok(None)` when a component is missing or not a directory.
    fn open_dir(&self, rel: &Path) -> Result<Option<OwnedFd>, GuardError> {
        let mut dir = self
            .fd
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| self.io(Path::new(""), e))?;
        let mut so_far = PathBuf::new();
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Ok(None);
            };
            so_far.push(name);
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            dir = match openat(&dir, name, flags, Mode::empty()) {
                // O_PATH with O_NOFOLLOW may hand back the link itself: check what it is.
                Ok(fd) => match fstat(&fd).map(|st| kind(st.st_mode)) {
                    Ok(Kind::Dir) => fd,
                    Ok(Kind::Symlink) => return Err(self.symlink(&so_far)),
                    Ok(_) => return Ok(None),
                    Err(e) => return Err(self.io(&so_far, e)),
                },
                Err(Errno::ENOENT) => return Ok(None),
                Err(Errno::ENOTDIR) | Err(Errno::ELOOP) => {
                    return match fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                        Ok(st) if kind(st.st_mode) == Kind::Symlink => Err(self.symlink(&so_far)),
                        _ => Ok(None),
                    }
                }
                Err(e) => return Err(self.io(&so_far, e)),
            };
        }
        Ok(Some(dir))
    }

    /// What is at `rel` (its last component not followed), or `None`. A symbolic link on the
    /// way to it is an error.
    fn lookup(&self, rel: &Path) -> Result<Option<Kind>, GuardError> {
        let (parent, name) = match (rel.parent(), rel.file_name()) {
            (Some(p), Some(n)) => (p, n),
            _ => return Ok(Some(Kind::Dir)),
        };
        let Some(dir) = self.open_dir(parent)? else {
            return Ok(None);
        };
        match fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(kind(st.st_mode))),
            Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => Ok(None),
            Err(e) => Err(self.io(rel, e)),
        }
    }

    /// The regular file `rel` beneath the workspace, at most `max` bytes; `None` when missing.
    fn read_inside(&self, rel: &Path, max: u64) -> Result<Option<Vec<u8>>, GuardError> {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Ok(None);
        };
        let Some(dir) = self.open_dir(parent)? else {
            return Ok(None);
        };
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = match openat(&dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => return Ok(None),
            Err(Errno::ELOOP) => return Err(self.symlink(rel)),
            Err(e) => return Err(self.io(rel, e)),
        };
        let st = fstat(&fd).map_err(|e| self.io(rel, e))?;
        if kind(st.st_mode) != Kind::File {
            return Err(self.odd(rel));
        }
        self.bounded(std::fs::File::from(fd), rel, max).map(Some)
    }

    /// A file of a git directory outside the workspace (out of this sandbox's reach; links
    /// there are the operator's, so they are followed); `None` when missing. Opened without
    /// blocking and read only when it is a regular file: such a path may still lie in
    /// another session's workspace, where a FIFO would hang this one's start.
    fn read_outside(&self, path: &Path, max: u64) -> Result<Option<Vec<u8>>, GuardError> {
        use std::os::unix::fs::OpenOptionsExt;
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path);
        let f = match opened {
            Ok(f) => f,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(self.io(path, e)),
        };
        let meta = f.metadata().map_err(|e| self.io(path, e))?;
        if !meta.is_file() {
            return Err(self.odd(path));
        }
        self.bounded(f, path, max).map(Some)
    }

    fn bounded(&self, f: std::fs::File, shown: &Path, max: u64) -> Result<Vec<u8>, GuardError> {
        let mut bytes = Vec::new();
        f.take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(shown, e))?;
        if bytes.len() as u64 > max {
            return Err(GuardError::Unreadable {
                root: self.root_text(),
                path: self.shown(shown),
                reason: format!("it is larger than {max} bytes"),
            });
        }
        Ok(bytes)
    }

    /// `file` of the git directory `dir`.
    fn read_git_file(
        &self,
        dir: &Located,
        file: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, GuardError> {
        match dir {
            Located::Inside(rel) => self.read_inside(&rel.join(file), max),
            Located::Outside(abs) => self.read_outside(&abs.join(file), max),
        }
    }

    /// Where `raw` (a path from git's metadata) leads from `base` (absolute, on the host).
    /// Inside the workspace every `..` must climb out of a real directory, not a link.
    fn place(&self, base: &Path, raw: &str) -> Result<Located, GuardError> {
        let raw_path = Path::new(raw);
        if raw.starts_with('~') {
            // The home directory: never inside a workspace (setup refuses one holding it).
            return Ok(Located::Outside(raw_path.to_path_buf()));
        }
        let mut abs = if raw_path.is_absolute() {
            PathBuf::from("/")
        } else {
            base.to_path_buf()
        };
        for c in raw_path.components() {
            match c {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::Normal(n) => abs.push(n),
                Component::ParentDir => {
                    if let Ok(rel) = abs.strip_prefix(self.root) {
                        if !rel.as_os_str().is_empty() {
                            match self.lookup(rel)? {
                                Some(Kind::Dir) => {}
                                Some(Kind::Symlink) => return Err(self.symlink(rel)),
                                _ => return Err(self.missing(&format!("`{raw}`"), rel)),
                            }
                        }
                    }
                    abs.pop();
                }
            }
        }
        if let Ok(rel) = abs.strip_prefix(self.root) {
            return Ok(Located::Inside(rel.to_path_buf()));
        }
        // Outside by name; a link outside (the operator's) may still lead back in, which
        // moat could not follow without following the sandbox's links too. The nearest part
        // that exists tells.
        let mut probe = abs.as_path();
        loop {
            if let Ok(real) = std::fs::canonicalize(probe) {
                if real.starts_with(self.root) {
                    return Err(self.symlink(probe));
                }
                break;
            }
            match probe.parent() {
                Some(p) => probe = p,
                None => break,
            }
        }
        Ok(Located::Outside(abs))
    }

    fn absolute(&self, place: &Located) -> PathBuf {
        match place {
            Located::Inside(rel) => self.root.join(rel),
            Located::Outside(abs) => abs.clone(),
        }
    }

    fn covered(&self, rel: &Path) -> bool {
        self.read_only.iter().any(|r| rel.starts_with(r))
    }

    /// Mounts `rel` read-only and pins the directories above it.
    fn read_only(&mut self, rel: &Path) -> Result<(), GuardError> {
        if self.covered(rel) {
            return Ok(());
        }
        self.pin_above(rel);
        self.read_only.retain(|r| !r.starts_with(rel));
        self.read_only.push(rel.to_path_buf());
        self.check_count()
    }

    /// Pins every directory between the workspace and `rel` (not `rel` itself).
    fn pin_above(&mut self, rel: &Path) {
        let mut so_far = PathBuf::new();
        let comps: Vec<_> = rel.components().collect();
        for c in comps.iter().take(comps.len().saturating_sub(1)) {
            so_far.push(c);
            if !self.pins.contains(&so_far) {
                self.pins.push(so_far.clone());
            }
        }
    }

    fn check_count(&self) -> Result<(), GuardError> {
        if self.pins.len() + self.read_only.len() > MAX_GUARD_MOUNTS {
            return Err(GuardError::TooMany {
                root: self.root_text(),
            });
        }
        Ok(())
    }

    /// Protects what `place` names when it is in the workspace: it must exist (`what` says
    /// who names it) and is mounted read-only.
    fn protect(&mut self, place: &Located, what: &str) -> Result<(), GuardError> {
        let Located::Inside(rel) = place else {
            return Ok(());
        };
        if rel.as_os_str().is_empty() {
            // The workspace itself: a setting that hands git the whole checkout (a hooks
            // path of `.`) cannot be guarded by a mount over the workspace.
            return Err(GuardError::Unreadable {
                root: self.root_text(),
                path: self.root_text(),
                reason: format!("{what} names the workspace itself"),
            });
        }
        match self.lookup(rel)? {
            Some(Kind::Dir) | Some(Kind::File) => self.read_only(rel),
            Some(Kind::Symlink) => Err(self.symlink(rel)),
            Some(Kind::Other) => Err(self.odd(rel)),
            None => Err(self.missing(what, rel)),
        }
    }

    /// The git directory a `gitdir:` file at `file` names, protected when it lies in the
    /// workspace; `worktree` is where the file is. `None` for a file that names none: git
    /// refuses such a repository, so nothing is read from it.
    fn gitdir_of(&mut self, file: &Path, worktree: &Path) -> Result<Option<Located>, GuardError> {
        let bytes = self.read_inside(file, MAX_TEXT_BYTES)?.unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let Some(raw) = text
            .lines()
            .find_map(|l| l.strip_prefix("gitdir:"))
            .map(str::trim)
        else {
            return Ok(None);
        };
        let place = self.place(&self.root.join(worktree), raw)?;
        self.protect(&place, &format!("the gitdir file {}", self.shown(file)))?;
        Ok(Some(place))
    }

    /// Guards what the repository whose git directory is `gitdir` and whose work tree is
    /// `worktree` (relative) makes git read: its common directory, the files its config
    /// names, its submodules and its linked worktrees.
    fn repository(
        &mut self,
        gitdir: &Located,
        worktree: &Path,
        depth: usize,
    ) -> Result<(), GuardError> {
        if depth > MAX_DEPTH {
            return Err(GuardError::TooMany {
                root: self.root_text(),
            });
        }
        let mut dirs = vec![gitdir.clone()];
        if let Some(bytes) = self.read_git_file(gitdir, "commondir", MAX_TEXT_BYTES)? {
            let raw = String::from_utf8_lossy(&bytes).trim().to_string();
            let common = self.place(&self.absolute(gitdir), &raw)?;
            self.protect(&common, "the commondir of a git directory")?;
            dirs.push(common);
        }
        let mut hash_len = 20;
        for dir in &dirs {
            // `config.worktree` (with `extensions.worktreeConfig`) is read as well.
            for name in ["config", "config.worktree"] {
                let Some(bytes) = self.read_git_file(dir, name, MAX_TEXT_BYTES)? else {
                    continue;
                };
                let entries = git_config::parse(&String::from_utf8_lossy(&bytes));
                if git_config::last(&entries, "extensions", "objectformat")
                    .is_some_and(|f| f.eq_ignore_ascii_case("sha256"))
                {
                    hash_len = 32;
                }
                let base = self.absolute(dir);
                self.config_names(&entries, &base, worktree, 0)?;
            }
        }
        for dir in &dirs {
            self.worktrees(dir)?;
        }
        for path in self.gitlinks(gitdir, hash_len)? {
            self.submodule(&worktree.join(path), depth)?;
        }
        Ok(())
    }

    /// Protects what one configuration file's `entries` make git read from the workspace
    /// (`core.hooksPath`, `include.path`, `includeIf.*.path`), and follows each include inside
    /// the workspace into its own entries, as git does (at most [`MAX_INCLUDE_DEPTH`] deep,
    /// git's own limit being 10): an include the agent can write, or one it can create, would
    /// otherwise name hooks and `core.fsmonitor` unguarded. `base` is the directory the file
    /// is in, against which git resolves its relative includes.
    fn config_names(
        &mut self,
        entries: &[git_config::Entry],
        base: &Path,
        worktree: &Path,
        depth: usize,
    ) -> Result<(), GuardError> {
        if depth > MAX_INCLUDE_DEPTH {
            return Err(GuardError::Unreadable {
                root: self.root_text(),
                path: base.display().to_string(),
                reason: format!("configuration includes nested more than {MAX_INCLUDE_DEPTH} deep"),
            });
        }
        if let Some(hooks) = git_config::last(entries, "core", "hookspath") {
            let place = self.place(&self.root.join(worktree), hooks)?;
            self.protect(&place, "core.hooksPath")?;
        }
        for include in git_config::includes(entries) {
            let place = self.place(base, include)?;
            self.protect(&place, "include.path")?;
            let Located::Inside(rel) = &place else {
                continue;
            };
            let Some(bytes) = self.read_inside(rel, MAX_TEXT_BYTES)? else {
                continue;
            };
            let nested = git_config::parse(&String::from_utf8_lossy(&bytes));
            let nested_base = self
                .root
                .join(rel)
                .parent()
                .map_or_else(|| self.root.to_path_buf(), Path::to_path_buf);
            self.config_names(&nested, &nested_base, worktree, depth + 1)?;
        }
        Ok(())
    }

    /// The gitlinks of `gitdir`'s index (and its shared index, when split).
    fn gitlinks(&self, gitdir: &Located, hash_len: usize) -> Result<Vec<PathBuf>, GuardError> {
        let Some(bytes) = self.read_git_file(gitdir, "index", MAX_INDEX_BYTES)? else {
            return Ok(Vec::new());
        };
        let unreadable = |e: git_index::IndexError| GuardError::Unreadable {
            root: self.root_text(),
            path: self.absolute(gitdir).join("index").display().to_string(),
            reason: e.to_string(),
        };
        let mut found = git_index::gitlinks(&bytes, hash_len).map_err(unreadable)?;
        if let Some(shared) = found.shared.take() {
            let name = format!("sharedindex.{shared}");
            if let Some(bytes) = self.read_git_file(gitdir, &name, MAX_INDEX_BYTES)? {
                found.paths.extend(
                    git_index::gitlinks(&bytes, hash_len)
                        .map_err(unreadable)?
                        .paths,
                );
            }
        }
        let mut out: Vec<PathBuf> = Vec::new();
        for p in found.paths {
            // git refuses such paths itself; nothing to guard.
            let path = Path::new(&p);
            if path.components().all(|c| matches!(c, Component::Normal(_)))
                && !out.contains(&path.to_path_buf())
            {
                out.push(path.to_path_buf());
            }
        }
        Ok(out)
    }

    /// A submodule at `sub` (relative to the workspace): its directory pinned, its `.git`
    /// read-only and its own metadata guarded; not checked out, the directory read-only.
    fn submodule(&mut self, sub: &Path, depth: usize) -> Result<(), GuardError> {
        if self.covered(sub) {
            return Ok(());
        }
        match self.lookup(sub)? {
            Some(Kind::Dir) => {}
            Some(Kind::Symlink) => return Err(self.symlink(sub)),
            // A gitlink where a file is: git reports a type change and does not enter it —
            // until the sandbox replaces the file with a repository of its own, which git
            // then enters. The file is mounted read-only, so it stays a file.
            Some(Kind::File) => return self.read_only(sub),
            Some(Kind::Other) => return Err(self.odd(sub)),
            None => return Err(self.missing("the index (a submodule)", sub)),
        }
        let git = sub.join(".git");
        match self.lookup(&git)? {
            None => self.read_only(sub),
            Some(Kind::Dir) => {
                self.read_only(&git)?;
                self.repository(&Located::Inside(git), sub, depth + 1)
            }
            Some(Kind::File) => {
                self.read_only(&git)?;
                match self.gitdir_of(&git, sub)? {
                    Some(gitdir) => self.repository(&gitdir, sub, depth + 1),
                    None => Ok(()),
                }
            }
            Some(Kind::Symlink) => Err(self.symlink(&git)),
            Some(Kind::Other) => Err(self.odd(&git)),
        }
    }

    /// Linked worktrees of `dir` whose `.git` file is in the workspace: that file read-only.
    /// One that is missing is left: the sandbox making it is making a repository of its own
    /// in a directory, which is what any `.git` it creates is (see the docs).
    fn worktrees(&mut self, dir: &Located) -> Result<(), GuardError> {
        let names = match dir {
            Located::Inside(rel) => {
                let Some(fd) = self.open_dir(&rel.join("worktrees"))? else {
                    return Ok(());
                };
                let reopened = openat(
                    &fd,
                    ".",
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| self.io(&rel.join("worktrees"), e))?;
                let mut stream = nix::dir::Dir::from_fd(reopened)
                    .map_err(|e| self.io(&rel.join("worktrees"), e))?;
                stream
                    .iter()
                    .filter_map(|e| e.ok())
                    .map(|e| String::from_utf8_lossy(e.file_name().to_bytes()).into_owned())
                    .filter(|n| n != "." && n != "..")
                    .take(MAX_WORKTREES)
                    .collect::<Vec<_>>()
            }
            Located::Outside(abs) => match std::fs::read_dir(abs.join("worktrees")) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .take(MAX_WORKTREES)
                    .collect(),
                Err(_) => return Ok(()),
            },
        };
        for name in names {
            let file = format!("worktrees/{name}/gitdir");
            let Some(bytes) = self.read_git_file(dir, &file, MAX_TEXT_BYTES)? else {
                continue;
            };
            let raw = String::from_utf8_lossy(&bytes).trim().to_string();
            let base = self.absolute(dir).join("worktrees").join(&name);
            if let Located::Inside(rel) = self.place(&base, &raw)? {
                match self.lookup(&rel)? {
                    Some(Kind::File) => self.read_only(&rel)?,
                    Some(Kind::Symlink) => return Err(self.symlink(&rel)),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The guard: pins under a read-only path are dropped (they are read-only anyway), and
    /// everything is sorted parents first.
    fn finish(mut self) -> Result<GitGuard, GuardError> {
        let ro = self.read_only.clone();
        self.pins.retain(|p| !ro.iter().any(|r| p.starts_with(r)));
        self.pins
            .sort_by_key(|p| (p.components().count(), p.clone()));
        self.read_only
            .sort_by_key(|p| (p.components().count(), p.clone()));
        self.check_count()?;
        Ok(GitGuard {
            pins: self.pins,
            read_only: self.read_only,
        })
    }
}

fn kind(mode: u32) -> Kind {
    match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

#[cfg(test)]
mod tests;
