//! Whole entries and trees beneath the workspace, as E2B's filesystem service asks for them
//! (docs/e2b.md, "Files"): what is at a path without following its last component (and
//! where a symbolic link leads while it stays beneath the root), a directory listed to a
//! depth, a tree removed, an entry moved. Every lookup goes through [`super::super::beneath`];
//! below a directory already opened, only plain names from its own listing are opened, never
//! following a symbolic link, so a swap of any entry at any moment leads nowhere outside.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{readlinkat, renameat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::{io_err, kind, ConfineError, Workspace, MAX_PATH_BYTES};
use crate::files::beneath;

/// How deep a removal or a listing goes below its start: each level holds a descriptor.
pub const MAX_DEPTH: usize = 128;
/// How many times a directory is listed again while it is emptied: the sandbox may add
/// entries as fast as moat removes them, and the removal must end.
const REMOVE_PASSES: usize = 8;

/// What is at a path, its last component not followed.
#[derive(Debug)]
pub struct Found {
    /// The path relative to the root (`.` for the root itself).
    pub rel: PathBuf,
    /// The entry's own metadata (`lstat`).
    pub st: FileStat,
    /// For a symbolic link: its text, and what it leads to.
    pub link: Option<Link>,
}

/// A symbolic link's text and, when it resolves beneath the root, what it leads to.
#[derive(Debug)]
pub struct Link {
    /// What the link holds, as written (it may name anything; it is only text).
    pub text: OsString,
    /// The metadata of what it leads to and that path relative to the root; `None` when it
    /// leads nowhere, or out of the root.
    pub target: Option<(FileStat, PathBuf)>,
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW
}

impl Workspace {
    /// What is at `requested` ([`Found`]); [`ConfineError::Missing`] when nothing is.
    pub fn lookup(&self, requested: &str) -> Result<Found, ConfineError> {
        let rel = self.relative(requested)?;
        let shown = crate::output::escape_display(requested);
        let fd = self.open_beneath(&rel, OFlag::O_PATH | OFlag::O_NOFOLLOW, &shown)?;
        let st = fstat(&fd).map_err(|e| io_err("inspect", &shown, e))?;
        let link = if kind(&st) == SFlag::S_IFLNK {
            // An `O_PATH | O_NOFOLLOW` descriptor of a link: an empty path reads the link.
            let text = readlinkat(&fd, "").map_err(|e| io_err("read the link", &shown, e))?;
            Some(Link {
                text,
                target: self.follow(&rel),
            })
        } else {
            None
        };
        Ok(Found { rel, st, link })
    }

    /// The extended attributes of the entry at `rel` (not followed) whose names start with
    /// `prefix`, keyed by the rest ([`crate::files::xattr::read_prefixed`]); none when it is
    /// gone, leads out, or is a symbolic link (whose `/proc/self/fd` link could lead on).
    pub fn attrs(&self, rel: &Path, prefix: &str) -> std::collections::BTreeMap<String, String> {
        let Ok(fd) = beneath::open(&self.root, rel, OFlag::O_PATH | OFlag::O_NOFOLLOW) else {
            return Default::default();
        };
        match fstat(&fd) {
            Ok(st) if kind(&st) != SFlag::S_IFLNK => {
                crate::files::xattr::read_prefixed(&fd, prefix)
            }
            _ => Default::default(),
        }
    }

    /// What `rel` leads to, followed beneath the root: its metadata and where it is,
    /// relative to the root; `None` when it leads nowhere or out.
    fn follow(&self, rel: &Path) -> Option<(FileStat, PathBuf)> {
        let fd = beneath::open(&self.root, rel, OFlag::O_PATH).ok()?;
        let st = fstat(&fd).ok()?;
        let real = beneath::real_path(&fd).ok()?;
        let root = beneath::real_path(&self.root).ok()?;
        let inside = real.strip_prefix(&root).ok()?;
        let inside = if inside.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            inside.to_path_buf()
        };
        Some((st, inside))
    }

    /// The entries below the directory `requested` (followed while it stays beneath the
    /// root), `depth` levels down (1: its own entries), in the order of a lexical pre-order
    /// walk without the directory itself; symbolic links to directories are not descended.
    /// Names that are not UTF-8 are left out, with all below them: no request (a `&str`) can
    /// name them back, and a lossy spelling would name another file. Bounded as it is read,
    /// before anything past a bound is held: more than `bound.entries` entries, more than
    /// `bound.bytes` bytes of paths and link texts, or a path longer than [`MAX_PATH_BYTES`]
    /// (which no request could name) is [`ConfineError::ListBound`] naming the bound.
    pub fn list(
        &self,
        requested: &str,
        depth: usize,
        bound: ListBound,
    ) -> Result<Vec<Found>, ConfineError> {
        let rel = self.relative(requested)?;
        let dir = self.open_dir(requested)?;
        let shown = crate::output::escape_display(requested);
        let mut walk = Walk {
            bound,
            entries: 0,
            bytes: 0,
            shown,
            out: Vec::new(),
        };
        self.list_into(&dir, &rel, depth.clamp(1, MAX_DEPTH), &mut walk)?;
        Ok(walk.out)
    }

    fn list_into(
        &self,
        dir: &OwnedFd,
        rel: &Path,
        depth: usize,
        walk: &mut Walk,
    ) -> Result<(), ConfineError> {
        let top = rel == Path::new(".");
        let prefix = if top { 0 } else { rel.as_os_str().len() + 1 };
        let names = names_of(dir, &walk.shown.clone(), |name| {
            if std::str::from_utf8(name).is_err() {
                return Ok(false);
            }
            walk.charge(prefix + name.len())?;
            Ok(true)
        })?;
        for name in names {
            let st = match fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Gone since it was listed: the sandbox removed it.
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(io_err("inspect an entry of", &walk.shown, e)),
            };
            let child = if top {
                PathBuf::from(&name)
            } else {
                rel.join(&name)
            };
            let link = if kind(&st) == SFlag::S_IFLNK {
                match readlinkat(dir, name.as_os_str()) {
                    Ok(text) => {
                        let target = self.follow(&child);
                        let len = target.as_ref().map_or(0, |(_, t)| t.as_os_str().len());
                        walk.charge_bytes(text.len() + len)?;
                        Some(Link { text, target })
                    }
                    Err(_) => None,
                }
            } else {
                None
            };
            let is_dir = kind(&st) == SFlag::S_IFDIR;
            walk.out.push(Found {
                rel: child.clone(),
                st,
                link,
            });
            if is_dir && depth > 1 {
                // A plain name from this directory's own listing, not followed if it became
                // a link since: it cannot lead out.
                match beneath::open(dir, Path::new(&name), dir_flags()) {
                    Ok(sub) => self.list_into(&sub, &child, depth - 1, walk)?,
                    Err(_) => continue,
                }
            }
        }
        Ok(())
    }

    /// Removes what is at `requested`, a directory with everything below it (`rm -rf`),
    /// never following a symbolic link. Whether anything was there. The root itself is
    /// refused.
    pub fn remove_all(&self, requested: &str) -> Result<bool, ConfineError> {
        let entry = self.entry(requested, false)?;
        let Some(st) = entry.stat()? else {
            return Ok(false);
        };
        if kind(&st) == SFlag::S_IFDIR {
            let dir = beneath::open(&entry.parent, Path::new(&entry.name), dir_flags())
                .map_err(|e| io_err("open", &entry.shown, errno_of(e)))?;
            empty_dir(&dir, 0, &entry.shown)?;
            unlink(&entry.parent, &entry.name, true, &entry.shown)?;
        } else {
            unlink(&entry.parent, &entry.name, false, &entry.shown)?;
        }
        Ok(true)
    }

    /// Moves `from` to `to` (replacing a file there, as `rename` does), making `to`'s missing
    /// parents; neither last component is followed.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), ConfineError> {
        let src = self.entry(from, false)?;
        if src.stat()?.is_none() {
            return Err(ConfineError::Missing { path: src.shown });
        }
        let dst = self.entry(to, true)?;
        renameat(
            &src.parent,
            src.name.as_os_str(),
            &dst.parent,
            dst.name.as_os_str(),
        )
        .map_err(|e| io_err("move", &src.shown, e))
    }
}

/// The bounds of one listing ([`Workspace::list`]).
#[derive(Debug, Clone, Copy)]
pub struct ListBound {
    /// The most entries.
    pub entries: usize,
    /// The most bytes of paths (relative to the root) and link texts and targets held.
    pub bytes: usize,
}

/// One listing's walk: what it found, and what it has spent of its bound. A name is charged
/// when its directory is read, before it is held, so names waiting on the way down count
/// too.
struct Walk {
    bound: ListBound,
    entries: usize,
    bytes: usize,
    /// The directory listed, escaped for messages.
    shown: String,
    out: Vec<Found>,
}

impl Walk {
    /// One more entry whose path is `path` bytes long.
    fn charge(&mut self, path: usize) -> Result<(), ConfineError> {
        if path > MAX_PATH_BYTES {
            return Err(self.over(format!(
                "a path below it is longer than {MAX_PATH_BYTES} bytes, which no request could name (list less deep)"
            )));
        }
        if self.entries >= self.bound.entries {
            return Err(self.over(format!(
                "it holds more than {} entries, more than may be listed at once (list less deep, or a directory further down)",
                self.bound.entries
            )));
        }
        self.entries += 1;
        self.charge_bytes(path)
    }

    fn charge_bytes(&mut self, n: usize) -> Result<(), ConfineError> {
        self.bytes += n;
        if self.bytes > self.bound.bytes {
            return Err(self.over(format!(
                "its entries' paths come to more than {} bytes, more than may be listed at once (list less deep, or a directory further down)",
                self.bound.bytes
            )));
        }
        Ok(())
    }

    fn over(&self, reason: String) -> ConfineError {
        ConfineError::ListBound {
            path: self.shown.clone(),
            reason,
        }
    }
}

/// The errno behind a lookup's failure, for a message.
fn errno_of(e: beneath::BeneathError) -> Errno {
    match e {
        beneath::BeneathError::Escapes => Errno::EXDEV,
        beneath::BeneathError::Missing => Errno::ENOENT,
        beneath::BeneathError::Io(e) => Errno::from_raw(e.raw_os_error().unwrap_or(0)),
    }
}

/// The names in directory `dir` (without `.` and `..`) that `keep` keeps, sorted bytewise;
/// `keep` sees each as it is read, before it is held, and may stop the reading with an error.
fn names_of(
    dir: &OwnedFd,
    shown: &str,
    mut keep: impl FnMut(&[u8]) -> Result<bool, ConfineError>,
) -> Result<Vec<OsString>, ConfineError> {
    let mut d = Dir::openat(
        dir.as_fd(),
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        Mode::empty(),
    )
    .map_err(|e| io_err("list", shown, e))?;
    let mut names = Vec::new();
    for entry in d.iter() {
        let entry = entry.map_err(|e| io_err("list", shown, e))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." || !keep(name)? {
            continue;
        }
        names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
    }
    names.sort();
    Ok(names)
}

/// Removes everything in `dir`, depth first, listing it again while the sandbox adds to it,
/// at most [`REMOVE_PASSES`] times.
fn empty_dir(dir: &OwnedFd, depth: usize, shown: &str) -> Result<(), ConfineError> {
    if depth >= MAX_DEPTH {
        return Err(ConfineError::Invalid {
            path: shown.to_string(),
            reason: "it is nested deeper than may be removed at once",
        });
    }
    for _ in 0..REMOVE_PASSES {
        let names = names_of(dir, shown, |_| Ok(true))?;
        if names.is_empty() {
            return Ok(());
        }
        for name in names {
            let st = match fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(io_err("inspect an entry of", shown, e)),
            };
            if kind(&st) == SFlag::S_IFDIR {
                match beneath::open(dir, Path::new(&name), dir_flags()) {
                    Ok(sub) => empty_dir(&sub, depth + 1, shown)?,
                    // Swapped for something else since: the next pass sees what it is now.
                    Err(_) => continue,
                }
                unlink(dir, &name, true, shown)?;
            } else {
                unlink(dir, &name, false, shown)?;
            }
        }
    }
    Err(ConfineError::Invalid {
        path: shown.to_string(),
        reason: "entries kept appearing in it while it was removed",
    })
}

/// `unlinkat` of a plain name; one already gone is no error, nor is one that changed kind
/// since it was looked at (the caller's next pass sees it).
fn unlink(dir: &OwnedFd, name: &OsString, is_dir: bool, shown: &str) -> Result<(), ConfineError> {
    let how = if is_dir {
        UnlinkatFlags::RemoveDir
    } else {
        UnlinkatFlags::NoRemoveDir
    };
    match unlinkat(dir, name.as_os_str(), how) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(Errno::EISDIR | Errno::ENOTDIR) => Ok(()),
        Err(e) => Err(io_err("delete", shown, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        for d in ["d/b", "d/a/x", "d/c"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("outside/o")).unwrap();
        std::fs::write(dir.path().join("outside/secret"), "s").unwrap();
        std::fs::write(ws.join("d/f.txt"), "f").unwrap();
        std::fs::write(ws.join("d/a/x/deep"), "deep").unwrap();
        std::os::unix::fs::symlink("f.txt", ws.join("d/in-link")).unwrap();
        std::os::unix::fs::symlink("../../outside", ws.join("d/out-link")).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("d/abs-link")).unwrap();
        nix::unistd::mkfifo(&ws.join("d/fifo"), Mode::from_bits_truncate(0o644)).unwrap();
        let w = Workspace::open(&ws, (1000, 1000)).unwrap();
        (dir, ws, w)
    }

    fn rels(found: &[Found]) -> Vec<String> {
        found.iter().map(|f| f.rel.display().to_string()).collect()
    }

    #[test]
    fn lookups_report_links_and_follow_them_only_beneath_the_root() {
        let (_dir, _ws, w) = setup();
        let f = w.lookup("d/in-link").unwrap();
        let link = f.link.unwrap();
        assert_eq!(link.text, "f.txt");
        let (st, at) = link.target.unwrap();
        assert_eq!(kind(&st), SFlag::S_IFREG);
        assert_eq!(at, PathBuf::from("d/f.txt"));
        for out in ["d/out-link", "d/abs-link"] {
            let f = w.lookup(out).unwrap();
            assert!(
                f.link.unwrap().target.is_none(),
                "{out} is not followed out"
            );
        }
        assert_eq!(kind(&w.lookup("d/fifo").unwrap().st), SFlag::S_IFIFO);
        assert_eq!(w.lookup(".").unwrap().rel, PathBuf::from("."));
        assert!(matches!(
            w.lookup("nope"),
            Err(ConfineError::Missing { .. })
        ));
        assert!(matches!(
            w.lookup("d/out-link/secret"),
            Err(ConfineError::Escapes { .. })
        ));
    }

    fn bound(entries: usize) -> ListBound {
        ListBound {
            entries,
            bytes: 1 << 20,
        }
    }

    #[test]
    fn listings_walk_lexically_to_their_depth_within_their_bound() {
        let (_dir, _ws, w) = setup();
        let one = w.list("d", 1, bound(100)).unwrap();
        assert_eq!(
            rels(&one),
            [
                "d/a",
                "d/abs-link",
                "d/b",
                "d/c",
                "d/f.txt",
                "d/fifo",
                "d/in-link",
                "d/out-link"
            ]
        );
        let all = w.list("d", 5, bound(100)).unwrap();
        assert_eq!(
            &rels(&all)[..4],
            ["d/a", "d/a/x", "d/a/x/deep", "d/abs-link"]
        );
        // A link to a directory outside is listed, never descended.
        assert!(!rels(&all).iter().any(|r| r.contains("out-link/")));
        let err = w.list("d", 5, bound(3)).unwrap_err().to_string();
        assert!(err.contains("more than 3 entries"), "{err}");
        assert!(matches!(
            w.list("d/f.txt", 1, bound(10)),
            Err(ConfineError::NotDir { .. })
        ));
        assert!(matches!(
            w.list("d/out-link", 1, bound(10)),
            Err(ConfineError::Escapes { .. })
        ));
        assert_eq!(rels(&w.list(".", 1, bound(10)).unwrap()), ["d"]);
    }

    #[test]
    fn listings_are_bounded_in_bytes_and_build_no_path_past_path_max() {
        let (_dir, ws, w) = setup();
        // 20 levels of 250-byte names: 5,020 bytes at the bottom.
        // Made one level at a time from the one above: the whole path is past PATH_MAX.
        std::fs::create_dir(ws.join("deep")).unwrap();
        let mut at: OwnedFd = std::fs::File::open(ws.join("deep")).unwrap().into();
        for i in 0..20 {
            let name = format!("{i:02}{}", "d".repeat(248));
            nix::sys::stat::mkdirat(&at, name.as_str(), Mode::from_bits_truncate(0o755)).unwrap();
            at = nix::fcntl::openat(&at, name.as_str(), dir_flags(), Mode::empty()).unwrap();
        }
        let err = w.list("deep", 30, bound(1000)).unwrap_err().to_string();
        assert!(err.contains("longer than 4096 bytes"), "{err}");
        assert_eq!(w.list("deep", 16, bound(1000)).unwrap().len(), 16);
        // The bytes of the paths held, not only their number.
        let wide = ws.join("wide");
        std::fs::create_dir(&wide).unwrap();
        for i in 0..100 {
            std::fs::write(wide.join(format!("{i:03}{}", "w".repeat(200))), "").unwrap();
        }
        let small = ListBound {
            entries: 1000,
            bytes: 10_000,
        };
        let err = w.list("wide", 1, small).unwrap_err().to_string();
        assert!(err.contains("more than 10000 bytes"), "{err}");
        assert_eq!(w.list("wide", 1, bound(1000)).unwrap().len(), 100);
    }

    #[test]
    fn names_that_are_not_utf8_are_left_out_with_all_below_them() {
        use std::os::unix::ffi::OsStrExt;
        let (_dir, ws, w) = setup();
        let n = ws.join("n");
        std::fs::create_dir(&n).unwrap();
        std::fs::write(n.join(std::ffi::OsStr::from_bytes(b"a\xff")), "A").unwrap();
        std::fs::write(n.join("a\u{fffd}"), "B").unwrap();
        std::fs::create_dir(n.join(std::ffi::OsStr::from_bytes(b"d\xfe"))).unwrap();
        std::fs::write(n.join(std::ffi::OsStr::from_bytes(b"d\xfe/inner")), "").unwrap();
        assert_eq!(rels(&w.list("n", 3, bound(10)).unwrap()), ["n/a\u{fffd}"]);
        // What is listed opens the file listed.
        let (mut f, _) = w.open_file("n/a\u{fffd}").unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut f, &mut got).unwrap();
        assert_eq!(got, "B");
    }

    #[test]
    fn removals_never_follow_links_out() {
        let (dir, ws, w) = setup();
        assert!(w.remove_all("d/out-link").unwrap());
        assert!(dir.path().join("outside/secret").exists());
        assert!(w.remove_all("d").unwrap());
        assert!(!ws.join("d").exists());
        assert!(
            dir.path().join("outside/secret").exists(),
            "the target outside stays"
        );
        assert!(dir.path().join("outside/o").exists());
        assert!(!w.remove_all("d").unwrap(), "a missing path is no error");
        assert!(w.remove_all(".").is_err(), "the root itself is refused");
        assert!(w.remove_all("../outside").is_err());
    }

    #[test]
    fn moves_make_parents_and_refuse_leaving() {
        let (dir, ws, w) = setup();
        w.rename("d/f.txt", "new/place/g.txt").unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.join("new/place/g.txt")).unwrap(),
            "f"
        );
        // The link moves as a link: its target is not touched.
        w.rename("d/out-link", "moved-link").unwrap();
        assert!(std::fs::symlink_metadata(ws.join("moved-link"))
            .unwrap()
            .is_symlink());
        assert!(matches!(
            w.rename("nope", "x"),
            Err(ConfineError::Missing { .. })
        ));
        assert!(w.rename("d/c", "../outside/c").is_err());
        assert!(w.rename("moved-link/secret", "stolen").is_err());
        assert!(dir.path().join("outside/secret").exists());
    }
}
