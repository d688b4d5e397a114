//! Opening a directory as a descriptor, never following a symlink in its place: the run
//! directory (which must be moat's own and writable by no one else) and any directory moat
//! then works beneath by descriptor (docs/security.md, "Run directory and workspace files").
//! A leaf: the process registry, the executors, the sessions and the confined-file routines
//! all open their directories here.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{fstat, Mode};

/// Opens the run directory `dir`, which must be a real directory owned by moat's user and
/// writable by no one else: then the sandbox cannot create, rename or unlink entries in it.
pub fn open_run_dir(dir: &Path) -> io::Result<OwnedFd> {
    let fd = open_dir(dir)?;
    let st = fstat(&fd)?;
    if st.st_uid != nix::unistd::geteuid().as_raw() {
        return Err(refused(format!(
            "run directory {} is owned by uid {}, not by moat's user",
            dir.display(),
            st.st_uid
        )));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(refused(format!(
            "run directory {} is writable by other users (mode {:o}); it must be 0755 or stricter",
            dir.display(),
            st.st_mode & 0o7777
        )));
    }
    Ok(fd)
}

/// Opens a directory without following a symlink in its last component.
pub fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => refused(format!(
            "{} is not a directory (a symbolic link or another file)",
            dir.display()
        )),
        e => io::Error::new(
            io::Error::from(e).kind(),
            format!("open {}: {e}", dir.display()),
        ),
    })
}

/// The error for a file or directory moat refuses to use.
pub fn refused(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}
