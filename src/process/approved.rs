//! Approved copies in the run directory: the bytes an approved sandbox plan runs, where the
//! sandbox cannot change them (docs/security.md, "Files a plan runs: bound by content").
//!
//! moat reads a file a sandbox plan runs out of the container, hashes the bytes it read, and
//! writes exactly those bytes here, as `approved-<approval id>/<n>/<name>`: directories 0755
//! and files 0555, owned by moat, inside the run directory, which moat owns (0755) and the
//! container sees at `/run/moat`. The sandbox user can read and run a copy, but cannot write,
//! rename, replace or remove it, so the plan that runs the copy runs the hashed bytes whatever
//! the sandbox does to its own file meanwhile. As for every run file, nothing here is done by
//! path: the directories are made and opened relative to descriptors, never following a link
//! (docs/security.md, "Run directory and workspace files").

use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::dir::{Dir, Type};
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fchmod, fstat, mkdirat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::files::{at_error, open_run_dir, refused};
use crate::wrapper::RUN_DIR;

/// Copies of one approval's files, being written.
pub struct Copies {
    /// `approved-<approval id>`: the directory's name in the run directory and under
    /// `/run/moat`.
    name: String,
    /// That directory, made by this moat and opened once.
    fd: OwnedFd,
}

/// The directory of an approval's copies; the id must be a plain token (moat's UUIDs are).
fn dir_name(approval_id: &str) -> io::Result<String> {
    let plain = !approval_id.is_empty()
        && approval_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !plain {
        return Err(refused(format!(
            "approval id {approval_id:?} cannot name a directory"
        )));
    }
    Ok(format!("approved-{approval_id}"))
}

fn open_sub(parent: &impl AsFd, name: &str) -> io::Result<OwnedFd> {
    openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| at_error(name, e))
}

/// Makes directory `name` in `parent`, owned by moat, 0755 whatever the umask, and opens it.
fn make_sub(parent: &impl AsFd, name: &str) -> io::Result<OwnedFd> {
    mkdirat(parent, name, Mode::from_bits_truncate(0o700)).map_err(|e| at_error(name, e))?;
    let fd = open_sub(parent, name)?;
    let st = fstat(&fd)?;
    if st.st_uid != nix::unistd::geteuid().as_raw() {
        return Err(refused(format!("{name} is not moat's")));
    }
    fchmod(&fd, Mode::from_bits_truncate(0o755))?;
    Ok(fd)
}

impl Copies {
    /// Makes the approval's directory afresh in the run directory `run_dir`: one left by an
    /// earlier attempt (a moat killed during a run) is removed first.
    pub fn create(run_dir: &Path, approval_id: &str) -> io::Result<Self> {
        let name = dir_name(approval_id)?;
        remove(run_dir, approval_id);
        let run = open_run_dir(run_dir)?;
        let fd = make_sub(&run, &name)?;
        Ok(Self { name, fd })
    }

    /// Writes copy number `n`, called `file`, holding `bytes`: read-only for everyone and
    /// runnable. Returns its path inside the container.
    pub fn add(&self, n: usize, file: &str, bytes: &[u8]) -> io::Result<String> {
        if file.is_empty() || file.contains('/') || file == "." || file == ".." {
            return Err(refused(format!("{file:?} cannot name a copy")));
        }
        let sub = make_sub(&self.fd, &n.to_string())?;
        let fd = openat(
            &sub,
            file,
            OFlag::O_WRONLY
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC
                | OFlag::O_NOCTTY,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| at_error(file, e))?;
        let mut out = std::fs::File::from(fd);
        out.write_all(bytes)?;
        out.sync_all()?;
        fchmod(&out, Mode::from_bits_truncate(0o555))?;
        Ok(format!("{RUN_DIR}/{}/{n}/{file}", self.name))
    }
}

/// The names in directory `fd`, `.` and `..` left out, with their types when the file system
/// gives them.
fn entries(fd: &OwnedFd) -> Vec<(String, Option<Type>)> {
    let Ok(dup) = fd.try_clone() else {
        return Vec::new();
    };
    let Ok(mut dir) = Dir::from_fd(dup) else {
        return Vec::new();
    };
    dir.iter()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str().ok()?.to_string();
            (name != "." && name != "..").then_some((name, e.file_type()))
        })
        .collect()
}

/// Removes an approval's copies from the run directory `run_dir`, if there are any. Only what
/// the layout holds is removed (files inside the numbered directories, then those, then the
/// approval's directory), each with `unlinkat`, which removes a link and never its target.
pub fn remove(run_dir: &Path, approval_id: &str) {
    let Ok(name) = dir_name(approval_id) else {
        return;
    };
    let Ok(run) = open_run_dir(run_dir) else {
        return;
    };
    if let Ok(top) = open_sub(&run, &name) {
        for (sub, kind) in entries(&top) {
            if kind == Some(Type::Directory) {
                if let Ok(fd) = open_sub(&top, &sub) {
                    for (file, _) in entries(&fd) {
                        let _ = unlinkat(&fd, file.as_str(), UnlinkatFlags::NoRemoveDir);
                    }
                }
                let _ = unlinkat(&top, sub.as_str(), UnlinkatFlags::RemoveDir);
            } else {
                let _ = unlinkat(&top, sub.as_str(), UnlinkatFlags::NoRemoveDir);
            }
        }
    }
    // A link or file planted where the directory would be is removed, never followed.
    if unlinkat(&run, name.as_str(), UnlinkatFlags::RemoveDir) == Err(nix::errno::Errno::ENOTDIR) {
        let _ = unlinkat(&run, name.as_str(), UnlinkatFlags::NoRemoveDir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn run_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    #[test]
    fn copies_are_moats_read_only_and_go_again() {
        let dir = run_dir();
        let id = "0a1b2c3d-0000-4000-8000-000000000000";
        let copies = Copies::create(dir.path(), id).unwrap();
        let p = copies.add(0, "mytool", b"#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(p, format!("/run/moat/approved-{id}/0/mytool"));
        let host = dir.path().join(format!("approved-{id}/0/mytool"));
        let m = std::fs::metadata(&host).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o555);
        assert_eq!(m.uid(), nix::unistd::geteuid().as_raw());
        assert_eq!(std::fs::read(&host).unwrap(), b"#!/bin/sh\necho hi\n");
        for d in [format!("approved-{id}"), format!("approved-{id}/0")] {
            let m = std::fs::metadata(dir.path().join(d)).unwrap();
            assert_eq!(m.mode() & 0o7777, 0o755);
        }
        copies.add(1, "b.sh", b"x").unwrap();
        // The same number twice is refused, as is a name with a slash.
        assert!(copies.add(1, "c", b"x").is_err());
        assert!(copies.add(2, "../x", b"x").is_err());
        // A fresh start removes what an earlier attempt left.
        let again = Copies::create(dir.path(), id).unwrap();
        assert!(!host.exists());
        again.add(0, "mytool", b"2").unwrap();
        remove(dir.path(), id);
        assert!(!dir.path().join(format!("approved-{id}")).exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn removal_never_follows_a_planted_link() {
        let dir = run_dir();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "1").unwrap();
        let id = "feed";
        // Where the approval's directory would be, a link to elsewhere: removed, not followed.
        let planted = dir.path().join("approved-feed");
        std::os::unix::fs::symlink(outside.path(), &planted).unwrap();
        remove(dir.path(), id);
        assert!(std::fs::symlink_metadata(&planted).is_err());
        assert!(outside.path().join("keep").exists());
        // Creating over one makes a real directory of moat's, and writes nothing through it.
        std::os::unix::fs::symlink(outside.path(), &planted).unwrap();
        let copies = Copies::create(dir.path(), id).unwrap();
        copies.add(0, "x", b"1").unwrap();
        assert!(std::fs::symlink_metadata(&planted).unwrap().is_dir());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
        assert!(dir_name("../x").is_err() && dir_name("").is_err());
    }
}
