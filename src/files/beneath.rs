//! Opening a path beneath a directory the sandbox can change, by descriptor, with the kernel
//! as the judge (docs/security.md, "File tools" and "Run directory and workspace files").
//!
//! The one routine every opener of a workspace path goes through: the file tools
//! (`confine.rs`) and the exec workdir (`tools::exec_tool::workdir`). The root is opened
//! `O_NOFOLLOW`; the path below it is resolved with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)`, so `..` above the
//! root, absolute symbolic links, links whose target climbs out, `/proc` magic links and other
//! mounts are refused by the kernel instead of by checking strings. There is no fallback for a
//! kernel without `openat2` (before 5.6): moat then refuses rather than resolve by name.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};

/// How often a lookup is tried again when the kernel says a rename or mount raced it
/// (`EAGAIN`). Any rename on the machine can cause one while a path goes through `..`.
const RETRIES: u32 = 64;

#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// `..` above the root, an absolute link, a link leading out, a magic link or another
    /// mount (`EXDEV`, `ELOOP`).
    #[error("resolve the path beneath its root: it leads out")]
    Escapes,
    /// Nothing there (`ENOENT`).
    #[error("resolve the path beneath its root: no such file or directory")]
    Missing,
    /// Anything else the kernel said, `EAGAIN` past [`RETRIES`] included.
    #[error("resolve the path beneath its root")]
    Io(#[source] io::Error),
}

impl BeneathError {
    fn from_errno(e: Errno) -> Self {
        match e {
            // EXDEV: `..` above the root, an absolute symlink, a link leading out or another
            // mount; ELOOP: a magic link, or a chain the kernel gave up on.
            Errno::EXDEV | Errno::ELOOP => BeneathError::Escapes,
            Errno::ENOENT => BeneathError::Missing,
            e => BeneathError::Io(io::Error::from(e)),
        }
    }
}

/// Opens the directory `path` to resolve beneath, without following a symlink in its place.
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    crate::descriptors::open_dir(path)
}

/// Opens `rel` beneath `root` with `flags` (`O_CLOEXEC` added; `O_NOCTTY` too unless
/// `O_PATH`, which `openat2` refuses it with). `.` or an empty path is the root itself.
pub fn open(root: &OwnedFd, rel: &Path, flags: OFlag) -> Result<OwnedFd, BeneathError> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let extra = if flags.contains(OFlag::O_PATH) {
        OFlag::O_CLOEXEC
    } else {
        OFlag::O_CLOEXEC | OFlag::O_NOCTTY
    };
    let resolve = ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
        | ResolveFlag::RESOLVE_NO_XDEV;
    retry(|| {
        openat2(
            root,
            rel,
            OpenHow::new().flags(flags | extra).resolve(resolve),
        )
    })
}

/// Runs `attempt` again while it fails with `EAGAIN`, at most [`RETRIES`] more times.
fn retry(mut attempt: impl FnMut() -> Result<OwnedFd, Errno>) -> Result<OwnedFd, BeneathError> {
    let mut tries = 0;
    loop {
        match attempt() {
            Ok(fd) => return Ok(fd),
            Err(Errno::EAGAIN) if tries < RETRIES => tries += 1,
            Err(e) => return Err(BeneathError::from_errno(e)),
        }
    }
}

/// Where an open descriptor is, as the kernel tracks it (`/proc/self/fd`): a rename or a link
/// on the way is seen through.
pub fn real_path(fd: &OwnedFd) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raced_lookup_is_tried_again_and_the_tries_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let fd = || OwnedFd::from(std::fs::File::open(dir.path()).unwrap());
        let mut calls = 0;
        let got = retry(|| {
            calls += 1;
            if calls < 5 {
                Err(Errno::EAGAIN)
            } else {
                Ok(fd())
            }
        });
        assert!(got.is_ok());
        assert_eq!(calls, 5);
        let mut calls = 0;
        let got = retry(|| {
            calls += 1;
            Err(Errno::EAGAIN)
        });
        assert!(matches!(got, Err(BeneathError::Io(_))), "{got:?}");
        assert_eq!(calls, RETRIES + 1);
        for (e, want) in [
            (Errno::EXDEV, "leads out"),
            (Errno::ELOOP, "leads out"),
            (Errno::ENOENT, "no such file"),
            (Errno::EACCES, "beneath its root"),
        ] {
            let got = retry(|| Err(e)).unwrap_err().to_string();
            assert!(got.contains(want), "{e}: {got}");
        }
    }

    #[test]
    fn the_kernel_keeps_lookups_beneath_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::create_dir_all(ws.join("b")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::os::unix::fs::symlink("../b", ws.join("a/up")).unwrap();
        std::os::unix::fs::symlink("a/b", ws.join("rel")).unwrap();
        std::os::unix::fs::symlink(ws.join("a"), ws.join("abs")).unwrap();
        std::os::unix::fs::symlink("../outside", ws.join("out")).unwrap();
        std::os::unix::fs::symlink("/proc/self/root", ws.join("magic")).unwrap();
        let root = open_root(&ws).unwrap();
        let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
        for (rel, want) in [
            ("", Ok("ws")),
            (".", Ok("ws")),
            ("a/b", Ok("ws/a/b")),
            ("rel", Ok("ws/a/b")),
            ("a/b/..", Ok("ws/a")),
            ("a/up", Ok("ws/b")),
            ("a/up/../a", Ok("ws/a")),
            ("abs", Err("leads out")),
            ("out", Err("leads out")),
            ("..", Err("leads out")),
            ("a/../../ws", Err("leads out")),
            ("magic", Err("leads out")),
            ("/etc", Err("leads out")),
            ("nope", Err("no such file")),
        ] {
            match (open(&root, Path::new(rel), dir_flags), want) {
                (Ok(fd), Ok(w)) => {
                    let real = real_path(&fd).unwrap();
                    assert_eq!(real, dir.path().join(w), "{rel}");
                }
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{rel}: {e}"),
                (got, want) => panic!("{rel}: got {got:?}, want {want:?}"),
            }
        }
        // The root itself is never opened through a symlink.
        let err = open_root(&ws.join("rel")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
    }
}
