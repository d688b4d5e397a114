//! Opening paths beneath a session's workspace, by descriptor, with the kernel as the judge
//! (docs/security.md, "File tools").
//!
//! The workspace root is opened `O_NOFOLLOW`; every path below it is resolved by
//! [`super::beneath`] (`openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)`, the
//! routine the exec workdir uses too), so `..` above the root, absolute symbolic links,
//! symbolic links whose target climbs out, `/proc` magic links and other mounts are refused by
//! the kernel instead of by checking strings. The sandbox owns the
//! workspace and may swap any entry at any moment; nothing here checks a path and then reopens
//! it by name. The last component of a path that is written or deleted is handled with `*at`
//! calls on its opened parent and must not be a symbolic link.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, fstat, fstatat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{fchown, unlinkat, Gid, Uid, UnlinkatFlags};

use super::beneath::BeneathError;
use crate::contract::WORKSPACE_MOUNT;

/// Longest path accepted, in bytes (PATH_MAX on Linux).
pub const MAX_PATH_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("use path `{path}`: it leaves the workspace (give a path relative to {WORKSPACE_MOUNT} or under it; `..` above it and symbolic links that lead out of it, absolute ones included, are refused)")]
    Escapes { path: String },
    #[error("use path `{path}`: {reason}")]
    Invalid { path: String, reason: &'static str },
    #[error("open `{path}`: no such file or directory in the workspace")]
    Missing { path: String },
    #[error("open `{path}`: it is a directory")]
    IsDir { path: String },
    #[error("open `{path}`: it is not a directory")]
    NotDir { path: String },
    #[error("open `{path}`: it is not a regular file (a device, socket or pipe)")]
    NotFile { path: String },
    #[error("change `{path}`: it is a symbolic link (write to the file it points to instead)")]
    Symlink { path: String },
    #[error("{action} `{path}`")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("write `{path}`: it is inside {part}, which the sandbox sees read-only (the checkout's git metadata; docs/security.md, \"Host workspaces\"); create the session with --git-writable to let it")]
    ReadOnlyPart { path: String, part: String },
    #[error("list `{path}`: {reason}")]
    ListBound { path: String, reason: String },
    #[error("write `{path}`: it is over the {max}-byte bound")]
    TooLarge { path: String, max: u64 },
    #[error("open the workspace {root}")]
    Root {
        root: String,
        #[source]
        source: io::Error,
    },
}

/// An open workspace. Paths given to it are hostile (they come from a request), and so is
/// everything found beneath it (the sandbox writes there).
pub struct Workspace {
    /// The workspace directory itself, opened without following a symlink: the anchor every
    /// lookup starts from.
    root: OwnedFd,
    /// Its host path, accepted as a prefix of absolute paths as the exec workdir accepts it.
    host_root: PathBuf,
    /// uid:gid that files and directories created here are given (as root), so they belong
    /// to the sandbox user like the files it creates itself; `None` when moat is not root.
    owner: Option<(u32, u32)>,
    /// Host paths below the root that the sandbox sees read-only (a checkout's git
    /// metadata): nothing is written or made there, or moat would get round the mount.
    read_only: Vec<PathBuf>,
}

/// A path below the workspace split into its opened parent and its last component: what
/// writes, deletes and metadata lookups act on without following the last component.
pub struct Entry {
    /// The parent directory, resolved beneath the root.
    parent: OwnedFd,
    /// The last component, a plain name (no `/`, not `.` or `..`).
    name: OsString,
    /// The path as requested, escaped for messages.
    pub shown: String,
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

impl Workspace {
    /// Opens the workspace at `host_root`. `owner` is the sandbox user's uid:gid.
    pub fn open(host_root: &Path, owner: (u32, u32)) -> Result<Self, ConfineError> {
        let root = super::beneath::open_root(host_root).map_err(|source| ConfineError::Root {
            root: host_root.display().to_string(),
            source,
        })?;
        let owner = nix::unistd::geteuid().is_root().then_some(owner);
        Ok(Self {
            root,
            host_root: host_root.to_path_buf(),
            owner,
            read_only: Vec::new(),
        })
    }

    /// The same workspace, with `parts` (host paths below it) refused to every write.
    pub fn with_read_only(mut self, parts: Vec<PathBuf>) -> Self {
        self.read_only = parts;
        self
    }

    /// Refuses `tail` below the directory `dir` (opened beneath the root) when that is inside
    /// a read-only part. Where `dir` really is comes from the kernel (`/proc/self/fd`), so a
    /// link in the workspace leading into `.git` is seen through.
    fn check_writable(&self, dir: &OwnedFd, tail: &Path, shown: &str) -> Result<(), ConfineError> {
        if self.read_only.is_empty() {
            return Ok(());
        }
        let real = super::beneath::real_path(dir).map_err(|source| ConfineError::Io {
            action: "locate",
            path: shown.to_string(),
            source,
        })?;
        let full = real.join(tail);
        match self.read_only.iter().find(|p| full.starts_with(p)) {
            Some(part) => Err(ConfineError::ReadOnlyPart {
                path: shown.to_string(),
                part: crate::output::escape_display(&part.display().to_string()),
            }),
            None => Ok(()),
        }
    }

    /// [`Self::check_writable`] for `parent_rel/name` before anything on the way is made: the
    /// deepest part of it that exists, and the rest by name.
    fn check_creatable_here(
        &self,
        parent_rel: &Path,
        name: &OsStr,
        shown: &str,
    ) -> Result<(), ConfineError> {
        if self.read_only.is_empty() {
            return Ok(());
        }
        let mut probe = parent_rel.to_path_buf();
        let mut tail = PathBuf::from(name);
        loop {
            let here = if probe.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                probe.clone()
            };
            match self.open_beneath(&here, OFlag::O_PATH | OFlag::O_DIRECTORY, shown) {
                Ok(fd) => return self.check_writable(&fd, &tail, shown),
                Err(ConfineError::Missing { .. }) => match probe.file_name() {
                    Some(n) => {
                        tail = Path::new(n).join(&tail);
                        probe.pop();
                    }
                    None => return Ok(()),
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// The path relative to the root that `requested` names: relative to the workspace, or
    /// absolute under `/workspace` or under the host workspace. Only the text is looked at
    /// here; whether it stays inside is the kernel's to say when it is opened.
    pub fn relative(&self, requested: &str) -> Result<PathBuf, ConfineError> {
        let shown = crate::output::escape_display(requested);
        let invalid = |reason| ConfineError::Invalid {
            path: shown.clone(),
            reason,
        };
        if requested.is_empty() {
            return Err(invalid("the path is empty"));
        }
        if requested.len() > MAX_PATH_BYTES {
            return Err(invalid("the path is longer than 4096 bytes"));
        }
        if requested.contains('\0') {
            return Err(invalid("the path contains a NUL byte"));
        }
        let p = Path::new(requested);
        let rel = if p.is_absolute() {
            if let Ok(r) = p.strip_prefix(WORKSPACE_MOUNT) {
                r
            } else if let Ok(r) = p.strip_prefix(&self.host_root) {
                r
            } else {
                return Err(ConfineError::Escapes { path: shown });
            }
        } else {
            p
        };
        Ok(if rel.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rel.to_path_buf()
        })
    }

    /// Opens `rel` beneath the root ([`super::beneath::open`]).
    fn open_beneath(&self, rel: &Path, flags: OFlag, shown: &str) -> Result<OwnedFd, ConfineError> {
        super::beneath::open(&self.root, rel, flags).map_err(|e| match e {
            BeneathError::Escapes => ConfineError::Escapes {
                path: shown.to_string(),
            },
            BeneathError::Missing => ConfineError::Missing {
                path: shown.to_string(),
            },
            BeneathError::Io(source) => ConfineError::Io {
                action: "open",
                path: shown.to_string(),
                source,
            },
        })
    }

    /// Opens a file for reading, following symlinks only while they stay inside, and never
    /// blocking on a FIFO the sandbox planted. Returns it with its metadata; anything but a
    /// regular file is refused.
    pub fn open_file(&self, requested: &str) -> Result<(File, FileStat), ConfineError> {
        let rel = self.relative(requested)?;
        let shown = crate::output::escape_display(requested);
        let fd = self.open_beneath(&rel, OFlag::O_RDONLY | OFlag::O_NONBLOCK, &shown)?;
        let st = fstat(&fd).map_err(|e| io_err("inspect", &shown, e))?;
        match kind(&st) {
            SFlag::S_IFREG => Ok((File::from(fd), st)),
            SFlag::S_IFDIR => Err(ConfineError::IsDir { path: shown }),
            _ => Err(ConfineError::NotFile { path: shown }),
        }
    }

    /// Opens a directory for listing.
    pub fn open_dir(&self, requested: &str) -> Result<OwnedFd, ConfineError> {
        let rel = self.relative(requested)?;
        let shown = crate::output::escape_display(requested);
        self.open_beneath(&rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY, &shown)
            .map_err(|e| match e {
                ConfineError::Io { source, .. }
                    if source.raw_os_error() == Some(Errno::ENOTDIR as i32) =>
                {
                    ConfineError::NotDir {
                        path: shown.clone(),
                    }
                }
                e => e,
            })
    }

    /// The parent of `requested`, opened beneath the root, and its last component. With
    /// `create_dirs`, missing directories on the way are made (owned like the sandbox's own).
    pub fn entry(&self, requested: &str, create_dirs: bool) -> Result<Entry, ConfineError> {
        let rel = self.relative(requested)?;
        let shown = crate::output::escape_display(requested);
        let name = match rel.components().next_back() {
            Some(Component::Normal(n)) => n.to_os_string(),
            _ => {
                return Err(ConfineError::Invalid {
                    path: shown,
                    reason: "it does not name a file (it ends in `.`, `..` or `/`)",
                })
            }
        };
        if requested.ends_with('/') {
            return Err(ConfineError::Invalid {
                path: shown,
                reason: "it does not name a file (it ends in `.`, `..` or `/`)",
            });
        }
        let parent_rel = rel.parent().unwrap_or(Path::new(""));
        let parent_rel = if parent_rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent_rel
        };
        self.check_creatable_here(parent_rel, &name, &shown)?;
        if create_dirs {
            self.make_dirs(parent_rel, &shown)?;
        }
        let parent = self.open_beneath(parent_rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY, &shown)?;
        self.check_writable(&parent, Path::new(&name), &shown)?;
        Ok(Entry {
            parent,
            name,
            shown,
        })
    }

    /// Checks, without changing anything, that `requested` could be written with
    /// `createDirs`: the part of its parent that exists opens beneath the root, and the
    /// missing rest is plain names (no `..`), so making it cannot lead out. `apply_patch`
    /// asks this before it writes anything, so a path refused here fails the whole patch.
    pub fn check_creatable(&self, requested: &str) -> Result<(), ConfineError> {
        let rel = self.relative(requested)?;
        let shown = crate::output::escape_display(requested);
        let parent = rel.parent().unwrap_or(Path::new(""));
        self.missing_tail(parent, &shown).map(|_| ())
    }

    /// The components of `rel` that do not exist yet, after checking that the existing part
    /// opens beneath the root and the rest are plain names.
    fn missing_tail<'a>(&self, rel: &'a Path, shown: &str) -> Result<Vec<&'a OsStr>, ConfineError> {
        let comps: Vec<Component<'a>> = rel.components().collect();
        let mut exists = comps.len();
        loop {
            let prefix: PathBuf = comps[..exists].iter().collect();
            let prefix = if prefix.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                prefix
            };
            match self.open_beneath(&prefix, OFlag::O_PATH | OFlag::O_DIRECTORY, shown) {
                Ok(_) => break,
                Err(ConfineError::Missing { .. }) if exists > 0 => exists -= 1,
                Err(e) => return Err(e),
            }
        }
        comps[exists..]
            .iter()
            .map(|c| match c {
                Component::Normal(n) => Ok(*n),
                _ => Err(ConfineError::Escapes {
                    path: shown.to_string(),
                }),
            })
            .collect()
    }

    /// Makes each missing directory of `rel` (see [`Self::missing_tail`]), one component at
    /// a time, each parent looked up again beneath the root before the next is made in it.
    fn make_dirs(&self, rel: &Path, shown: &str) -> Result<(), ConfineError> {
        let missing = self.missing_tail(rel, shown)?;
        let existing = rel.components().count() - missing.len();
        let mut so_far: PathBuf = rel.components().take(existing).collect();
        for n in missing {
            let here = if so_far.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                so_far.clone()
            };
            let dir = self.open_beneath(&here, OFlag::O_RDONLY | OFlag::O_DIRECTORY, shown)?;
            match mkdirat(&dir, n, Mode::from_bits_truncate(0o755)) {
                Ok(()) => {
                    if let Some((uid, gid)) = self.owner {
                        let made = openat(
                            &dir,
                            n,
                            OFlag::O_RDONLY
                                | OFlag::O_DIRECTORY
                                | OFlag::O_NOFOLLOW
                                | OFlag::O_CLOEXEC,
                            Mode::empty(),
                        )
                        .map_err(|e| io_err("open the new directory of", shown, e))?;
                        fchown(&made, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                            .map_err(|e| io_err("give the new directory of", shown, e))?;
                    }
                }
                Err(Errno::EEXIST) => {}
                Err(e) => return Err(io_err("create the directories of", shown, e)),
            }
            so_far.push(n);
        }
        Ok(())
    }

    /// Makes the directory `requested` and any missing parents beneath the root (as
    /// `createDirs` makes a file's parents): `moat cp` unpacking a directory entry.
    pub fn make_dir(&self, requested: &str) -> Result<(), ConfineError> {
        let rel = self.relative(requested)?;
        let shown = crate::output::escape_display(requested);
        self.make_dirs(&rel, &shown)
    }

    /// uid:gid new files get; see the field.
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }
}

impl Entry {
    /// The entry's own metadata (a symlink is not followed); `None` when nothing is there.
    pub fn stat(&self) -> Result<Option<FileStat>, ConfineError> {
        match fstatat(
            &self.parent,
            self.name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(io_err("inspect", &self.shown, e)),
        }
    }

    /// The metadata of a regular file that is there, `None` when nothing is; a symlink, a
    /// directory or a special file is refused.
    pub fn regular(&self) -> Result<Option<FileStat>, ConfineError> {
        let Some(st) = self.stat()? else {
            return Ok(None);
        };
        match kind(&st) {
            SFlag::S_IFREG => Ok(Some(st)),
            SFlag::S_IFLNK => Err(ConfineError::Symlink {
                path: self.shown.clone(),
            }),
            SFlag::S_IFDIR => Err(ConfineError::IsDir {
                path: self.shown.clone(),
            }),
            _ => Err(ConfineError::NotFile {
                path: self.shown.clone(),
            }),
        }
    }

    /// Reads the regular file here, at most `max` bytes (`Ok(Err(size))` when it is larger);
    /// `None` when there is none.
    pub fn read(&self, max: u64) -> Result<Option<Result<Vec<u8>, u64>>, ConfineError> {
        let fd = match openat(
            &self.parent,
            self.name.as_os_str(),
            OFlag::O_RDONLY
                | OFlag::O_NOFOLLOW
                | OFlag::O_NONBLOCK
                | OFlag::O_CLOEXEC
                | OFlag::O_NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(None),
            Err(Errno::ELOOP) => {
                return Err(ConfineError::Symlink {
                    path: self.shown.clone(),
                })
            }
            Err(e) => return Err(io_err("open", &self.shown, e)),
        };
        let st = fstat(&fd).map_err(|e| io_err("inspect", &self.shown, e))?;
        match kind(&st) {
            SFlag::S_IFREG => {}
            SFlag::S_IFDIR => {
                return Err(ConfineError::IsDir {
                    path: self.shown.clone(),
                })
            }
            _ => {
                return Err(ConfineError::NotFile {
                    path: self.shown.clone(),
                })
            }
        }
        let size = st.st_size.max(0) as u64;
        if size > max {
            return Ok(Some(Err(size)));
        }
        let mut buf = Vec::new();
        // The file may grow between the stat and the read: one byte past the bound tells.
        File::from(fd)
            .take(max + 1)
            .read_to_end(&mut buf)
            .map_err(|source| ConfineError::Io {
                action: "read",
                path: self.shown.clone(),
                source,
            })?;
        if buf.len() as u64 > max {
            return Ok(Some(Err(buf.len() as u64)));
        }
        Ok(Some(Ok(buf)))
    }

    /// Replaces the file here with `data` atomically: a new file in the same directory,
    /// written, given its owner and mode, synced, then renamed over the name. A file that was
    /// there keeps its permission bits (set-id bits dropped); a new one is 0644.
    pub fn write(&self, data: &[u8], owner: Option<(u32, u32)>) -> Result<(), ConfineError> {
        self.write_from(&mut &data[..], u64::MAX, owner, &[])
            .map(|_| ())
    }

    /// [`Self::write`] of what `src` yields, streamed (memory stays one buffer's worth
    /// whatever the size), at most `max` bytes: past it nothing is replaced and the error is
    /// [`ConfineError::TooLarge`]. The new file gets the extended attributes `attrs` (name,
    /// value) and no others. Returns the bytes written.
    pub fn write_from(
        &self,
        src: &mut dyn Read,
        max: u64,
        owner: Option<(u32, u32)>,
        attrs: &[(String, Vec<u8>)],
    ) -> Result<u64, ConfineError> {
        let mode = match self.regular()? {
            Some(st) => st.st_mode & 0o777,
            None => 0o644,
        };
        let tmp = temp_name();
        let fd = openat(
            &self.parent,
            tmp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| io_err("create a temporary file next to", &self.shown, e))?;
        let result = (|| {
            let mut file = File::from(fd);
            let written =
                io::copy(&mut src.take(max.saturating_add(1)), &mut file).map_err(|source| {
                    ConfineError::Io {
                        action: "write",
                        path: self.shown.clone(),
                        source,
                    }
                })?;
            if written > max {
                return Err(ConfineError::TooLarge {
                    path: self.shown.clone(),
                    max,
                });
            }
            if let Some((uid, gid)) = owner {
                fchown(&file, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                    .map_err(|e| io_err("give the sandbox user", &self.shown, e))?;
            }
            fchmod(&file, Mode::from_bits_truncate(mode))
                .map_err(|e| io_err("set the mode of", &self.shown, e))?;
            for (name, value) in attrs {
                super::xattr::set(&file, name, value).map_err(|source| ConfineError::Io {
                    action: "set the extended attributes of",
                    path: self.shown.clone(),
                    source,
                })?;
            }
            file.sync_all().map_err(|source| ConfineError::Io {
                action: "sync",
                path: self.shown.clone(),
                source,
            })?;
            renameat(
                &self.parent,
                tmp.as_os_str(),
                &self.parent,
                self.name.as_os_str(),
            )
            .map_err(|e| io_err("replace", &self.shown, e))?;
            Ok(written)
        })();
        if result.is_err() {
            let _ = unlinkat(&self.parent, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        result
    }

    /// Removes the regular file here (never a directory, never through a symlink).
    pub fn remove(&self) -> Result<(), ConfineError> {
        if self.regular()?.is_none() {
            return Err(ConfineError::Missing {
                path: self.shown.clone(),
            });
        }
        unlinkat(
            &self.parent,
            self.name.as_os_str(),
            UnlinkatFlags::NoRemoveDir,
        )
        .map_err(|e| io_err("delete", &self.shown, e))
    }
}

/// A name for the temporary file of an atomic write: short (any target name fits beside it),
/// hidden, and unlikely to exist; `O_EXCL` refuses it if it does.
fn temp_name() -> OsString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    OsStr::from_bytes(format!(".moat-write-{}-{n}-{nanos}.tmp", std::process::id()).as_bytes())
        .to_os_string()
}

fn io_err(action: &'static str, shown: &str, e: Errno) -> ConfineError {
    ConfineError::Io {
        action,
        path: shown.to_string(),
        source: io::Error::from(e),
    }
}

mod in_place;
mod tree;

pub use tree::{Found, Link, ListBound};

#[cfg(test)]
mod tests;
