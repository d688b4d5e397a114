//! Setting up a session's workspace and run directory on the host, by descriptor.
//!
//! Both are bind-mounted into the sandbox, so their contents are hostile. Their parents
//! (`$MOAT_HOME/run`, the workspace root) are the operator's; each directory itself is made
//! with `mkdirat`, opened with `O_NOFOLLOW|O_DIRECTORY`, and its owner and mode changed on the
//! open descriptor (docs/security.md, "Run directory and workspace files").
//!
//! - The run directory belongs to moat, mode 0755: the sandbox can read and traverse it and
//!   write the files moat created for it, but cannot create, rename or unlink entries.
//! - The workspace belongs to the sandbox user (as root), or is opened to everyone (0777)
//!   when moat runs as a normal user; the parent `$MOAT_HOME` (0700) keeps other host users
//!   out of the default location.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::sys::stat::{fchmod, fstat, mkdirat, Mode};
use nix::unistd::{fchown, Gid, Uid};

use crate::descriptors::open_dir;

/// Creates (if needed) and opens `dir`, whose parent is created by path (it is not shared
/// with any sandbox) and whose last component must not be a symlink.
fn make_and_open(dir: &Path) -> io::Result<OwnedFd> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} has no parent directory", dir.display()),
        ));
    };
    std::fs::create_dir_all(parent)?;
    let parent_fd = open_dir(parent)?;
    match mkdirat(&parent_fd, name, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let fd = nix::fcntl::openat(
        &parent_fd,
        name,
        nix::fcntl::OFlag::O_RDONLY
            | nix::fcntl::OFlag::O_DIRECTORY
            | nix::fcntl::OFlag::O_NOFOLLOW
            | nix::fcntl::OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory (a symbolic link or another file)",
                dir.display()
            ),
        ),
        e => e.into(),
    })?;
    Ok(fd)
}

/// The run directory: moat's own, 0755 (see the module docs). A directory left by an older
/// moat (owned by the sandbox user, 0777) is taken back.
pub fn prepare_run_dir(dir: &Path) -> io::Result<()> {
    let fd = make_and_open(dir)?;
    let me = nix::unistd::geteuid();
    if me.is_root() {
        fchown(&fd, Some(me), Some(nix::unistd::getegid()))?;
    } else if fstat(&fd)?.st_uid != me.as_raw() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "run directory {} belongs to another user; remove it so moat can recreate it",
                dir.display()
            ),
        ));
    }
    fchmod(&fd, Mode::from_bits_truncate(0o755))?;
    Ok(())
}

/// The workspace: the sandbox user's as root, else open to all (see the module docs).
pub fn prepare_workspace(dir: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let fd = make_and_open(dir)?;
    if nix::unistd::geteuid().is_root() {
        fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))?;
    } else {
        fchmod(&fd, Mode::from_bits_truncate(0o777))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn run_dir_is_moats_and_closed() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("run/slug");
        prepare_run_dir(&dir).unwrap();
        let m = std::fs::metadata(&dir).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o755);
        assert_eq!(m.uid(), nix::unistd::geteuid().as_raw());
        // An open one (older moat) is closed again.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        prepare_run_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o7777, 0o755);
    }

    #[test]
    fn symlinked_dirs_are_refused_and_their_targets_untouched() {
        let home = tempfile::tempdir().unwrap();
        let target = home.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir(home.path().join("run")).unwrap();
        std::os::unix::fs::symlink(&target, home.path().join("run/slug")).unwrap();
        std::os::unix::fs::symlink(&target, home.path().join("ws")).unwrap();
        let err = prepare_run_dir(&home.path().join("run/slug")).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        let err = prepare_workspace(&home.path().join("ws"), 4242, 4242).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        let m = std::fs::metadata(&target).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o700);
        assert_eq!(m.uid(), nix::unistd::geteuid().as_raw());
    }

    #[test]
    fn workspace_is_handed_over() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("workspaces/slug");
        prepare_workspace(&dir, 4242, 4242).unwrap();
        let m = std::fs::metadata(&dir).unwrap();
        if nix::unistd::geteuid().is_root() {
            assert_eq!((m.uid(), m.gid()), (4242, 4242));
        } else {
            assert_eq!(m.mode() & 0o7777, 0o777);
        }
    }
}
