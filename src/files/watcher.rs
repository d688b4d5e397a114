//! Watching a directory of a workspace for changes (E2B's watch, docs/e2b.md, "Watching"):
//! inotify on this machine over the workspace's own directories, each opened through the
//! confined layer and watched through its descriptor (`/proc/self/fd/N`), so a watch never
//! lands on a directory outside the workspace whatever the sandbox swaps in meanwhile.
//!
//! Changes are named relative to the watched directory (`nested/f.txt` when recursive) and
//! typed as E2B's daemon types them (its inotify library's mapping): a create or a move in is
//! `Create`, a write or truncation `Write`, an attribute change `Chmod`, a delete `Remove`, a
//! move out `Rename`. A recursive watch adds each directory made (or moved in) below it as it
//! appears, up to a bound; names that are not UTF-8 are left out, since no path the API answers
//! may name another file than the one that changed.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use tokio::io::unix::AsyncFd;

use super::{ConfineError, Workspace};

/// What happened to an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Create,
    Write,
    Remove,
    Rename,
    Chmod,
}

/// One change below the watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Relative to the watched directory, `/`-separated.
    pub name: String,
    pub kind: ChangeKind,
}

/// Why a watch could not be made or kept.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Confine(#[from] ConfineError),
    #[error("watch `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// The events a watch asks the kernel for.
fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
}

/// The inotify instance as tokio's readiness wants it.
struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// One watch of a directory (and, when recursive, the directories below it).
pub struct Watcher {
    inotify: AsyncFd<Fd>,
    ws: Workspace,
    /// The watched directory, relative to the workspace.
    root: String,
    /// Each watched directory, relative to the watched one (`""` for itself).
    dirs: HashMap<WatchDescriptor, String>,
    recursive: bool,
    /// The most directories one watch holds: each is a kernel watch of moat's user, which
    /// the machine bounds for every program of that user together.
    max_dirs: usize,
    /// The watched directory itself went away (deleted or moved): nothing more comes.
    ended: bool,
    /// The kernel's queue overflowed once: changes were lost.
    pub overflowed: bool,
}

impl Watcher {
    /// Watches `rel` (a directory of `ws`; refused when missing or not a directory), and with
    /// `recursive` every directory below it, up to `max_dirs` in all. Blocking: walks the
    /// tree; call it off the async threads.
    pub fn new(
        ws: Workspace,
        rel: &str,
        recursive: bool,
        max_dirs: usize,
    ) -> Result<Self, WatchError> {
        let io_err = |source: nix::Error| WatchError::Io {
            path: crate::output::escape_display(rel),
            source: source.into(),
        };
        let inotify =
            Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).map_err(io_err)?;
        // SAFETY: `Fd` owns the inotify descriptor and hands out that same one for as long as
        // the `AsyncFd` holds it.
        let inotify = unsafe { AsyncFd::register(Fd(inotify)) }.map_err(|e| WatchError::Io {
            path: crate::output::escape_display(rel),
            source: io::Error::other(e.to_string()),
        })?;
        let mut w = Self {
            inotify,
            ws,
            root: rel.to_string(),
            dirs: HashMap::new(),
            recursive,
            max_dirs: max_dirs.max(1),
            ended: false,
            overflowed: false,
        };
        w.add("")?;
        if recursive {
            let mut queue = vec![String::new()];
            while let Some(dir) = queue.pop() {
                for sub in w.subdirs(&dir) {
                    if w.dirs.len() >= w.max_dirs {
                        return Ok(w);
                    }
                    // A directory that went, or turned into something else, since it was
                    // listed is not watched; the rest are.
                    if w.add(&sub).is_ok() {
                        queue.push(sub);
                    }
                }
            }
        }
        Ok(w)
    }

    /// The workspace watched, for a look at what changed.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// Whether the watched directory went away.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The workspace-relative path of `sub`, a name relative to the watched directory.
    pub fn rel_of(&self, sub: &str) -> String {
        match (self.root.as_str(), sub) {
            (r, "") => r.to_string(),
            ("." | "", s) => s.to_string(),
            (r, s) => format!("{r}/{s}"),
        }
    }

    /// Watches the directory `sub` (relative to the watched one) through a descriptor of it
    /// opened beneath the workspace.
    fn add(&mut self, sub: &str) -> Result<(), WatchError> {
        let rel = self.rel_of(sub);
        let dir = self.ws.open_dir(&rel)?;
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let wd = self
            .inotify
            .get_ref()
            .0
            .add_watch(path.as_str(), mask())
            .map_err(|e| WatchError::Io {
                path: crate::output::escape_display(&rel),
                source: e.into(),
            })?;
        self.dirs.insert(wd, sub.to_string());
        Ok(())
    }

    /// The UTF-8-named directories directly in `sub`, read through a descriptor.
    fn subdirs(&self, sub: &str) -> Vec<String> {
        let Ok(fd) = self.ws.open_dir(&self.rel_of(sub)) else {
            return Vec::new();
        };
        let Ok(mut dir) = nix::dir::Dir::from_fd(fd) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in dir.iter().flatten() {
            let is_dir = entry.file_type() == Some(nix::dir::Type::Directory);
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if is_dir && name != "." && name != ".." {
                out.push(join(sub, name));
            }
        }
        out.sort();
        out
    }

    /// The changes the kernel holds now, without waiting.
    pub fn ready(&mut self) -> io::Result<Vec<Change>> {
        match self.inotify.get_ref().0.read_events() {
            Ok(events) => Ok(self.map(events)),
            Err(nix::errno::Errno::EAGAIN) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits for the next changes (never an empty batch, unless the watch ended).
    pub async fn next(&mut self) -> io::Result<Vec<Change>> {
        loop {
            if self.ended {
                return Ok(Vec::new());
            }
            let mut guard = self.inotify.readable().await?;
            match guard.get_inner().0.read_events() {
                Ok(events) => {
                    drop(guard);
                    let changes = self.map(events);
                    if !changes.is_empty() || self.ended {
                        return Ok(changes);
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => guard.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn map(&mut self, events: Vec<InotifyEvent>) -> Vec<Change> {
        let mut out = Vec::new();
        for e in events {
            if e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                self.overflowed = true;
                continue;
            }
            let Some(dir) = self.dirs.get(&e.wd).cloned() else {
                continue;
            };
            if e.mask.contains(AddWatchFlags::IN_IGNORED) {
                self.dirs.remove(&e.wd);
                if dir.is_empty() {
                    self.ended = true;
                }
                continue;
            }
            if e.mask
                .intersects(AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF)
            {
                if dir.is_empty() {
                    self.ended = true;
                }
                continue;
            }
            let Some(name) = e.name.as_ref().and_then(|n| n.to_str()) else {
                continue;
            };
            let name = join(&dir, name);
            let Some(kind) = kind_of(e.mask) else {
                continue;
            };
            let made_dir = e.mask.contains(AddWatchFlags::IN_ISDIR)
                && e.mask
                    .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO);
            if made_dir && self.recursive && self.dirs.len() < self.max_dirs {
                let _ = self.add(&name);
            }
            out.push(Change { name, kind });
        }
        out
    }
}

impl AsFd for Watcher {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inotify.get_ref().0.as_fd()
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// An event's kind as E2B's daemon reports it.
fn kind_of(mask: AddWatchFlags) -> Option<ChangeKind> {
    if mask.intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO) {
        Some(ChangeKind::Create)
    } else if mask.contains(AddWatchFlags::IN_MODIFY) {
        Some(ChangeKind::Write)
    } else if mask.contains(AddWatchFlags::IN_DELETE) {
        Some(ChangeKind::Remove)
    } else if mask.contains(AddWatchFlags::IN_MOVED_FROM) {
        Some(ChangeKind::Rename)
    } else if mask.contains(AddWatchFlags::IN_ATTRIB) {
        Some(ChangeKind::Chmod)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(dir: &std::path::Path) -> Workspace {
        Workspace::open(dir, (0, 0)).unwrap()
    }

    async fn settle(w: &mut Watcher) -> Vec<Change> {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        w.ready().unwrap()
    }

    #[tokio::test]
    async fn changes_are_named_below_the_watched_directory_and_typed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("w/sub")).unwrap();
        let mut w = Watcher::new(ws(d.path()), "w", true, 16).unwrap();
        std::fs::write(d.path().join("w/sub/f.txt"), "x").unwrap();
        std::fs::create_dir(d.path().join("w/new")).unwrap();
        let changes = settle(&mut w).await;
        assert_eq!(
            changes[..2],
            [
                Change {
                    name: "sub/f.txt".into(),
                    kind: ChangeKind::Create
                },
                Change {
                    name: "sub/f.txt".into(),
                    kind: ChangeKind::Write
                },
            ]
        );
        assert!(changes.contains(&Change {
            name: "new".into(),
            kind: ChangeKind::Create
        }));
        // A directory made after the watch began is watched too.
        std::fs::write(d.path().join("w/new/g"), "y").unwrap();
        std::fs::rename(d.path().join("w/new/g"), d.path().join("w/h")).unwrap();
        std::fs::remove_file(d.path().join("w/h")).unwrap();
        let changes = settle(&mut w).await;
        let kinds: Vec<_> = changes.iter().map(|c| (c.name.as_str(), c.kind)).collect();
        assert!(kinds.contains(&("new/g", ChangeKind::Rename)), "{kinds:?}");
        assert!(kinds.contains(&("h", ChangeKind::Create)), "{kinds:?}");
        assert!(kinds.contains(&("h", ChangeKind::Remove)), "{kinds:?}");
    }

    #[tokio::test]
    async fn a_flat_watch_sees_its_own_entries_only_and_ends_with_its_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("w/sub")).unwrap();
        let mut w = Watcher::new(ws(d.path()), "w", false, 16).unwrap();
        std::fs::write(d.path().join("w/sub/deep"), "x").unwrap();
        std::fs::write(d.path().join("w/top"), "x").unwrap();
        let names: Vec<_> = settle(&mut w).await.into_iter().map(|c| c.name).collect();
        assert!(names.iter().all(|n| n == "top"), "{names:?}");
        std::fs::remove_dir_all(d.path().join("w")).unwrap();
        settle(&mut w).await;
        assert!(w.ended());
    }

    #[tokio::test]
    async fn a_watch_stays_beneath_the_workspace_and_holds_its_bound() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("w")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("w/out")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        // A link out of the workspace is no directory to watch.
        assert!(Watcher::new(ws(d.path()), "link", false, 16).is_err());
        assert!(Watcher::new(ws(d.path()), "w/missing", false, 16).is_err());
        std::fs::write(d.path().join("file"), "x").unwrap();
        assert!(Watcher::new(ws(d.path()), "file", false, 16).is_err());
        // Recursion does not follow the link out, and stops at its bound of directories.
        for i in 0..10 {
            std::fs::create_dir(d.path().join(format!("w/d{i}"))).unwrap();
        }
        let mut w = Watcher::new(ws(d.path()), "w", true, 4).unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        assert!(settle(&mut w)
            .await
            .iter()
            .all(|c| !c.name.contains("secret")));
        assert_eq!(w.dirs.len(), 4);
    }

    #[tokio::test]
    async fn names_that_are_not_utf8_are_left_out() {
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("w")).unwrap();
        let mut w = Watcher::new(ws(d.path()), "w", false, 16).unwrap();
        let bad = std::ffi::OsStr::from_bytes(b"a\xff");
        std::fs::write(d.path().join("w").join(bad), "x").unwrap();
        std::fs::write(d.path().join("w/ok"), "x").unwrap();
        let names: Vec<_> = settle(&mut w).await.into_iter().map(|c| c.name).collect();
        assert!(names.iter().all(|n| n == "ok"), "{names:?}");
    }
}
