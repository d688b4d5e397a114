//! The helper binary: built by build.rs, embedded in moat, written into each run directory.
//!
//! It lives in the run directory (moat's own, 0755, already mounted at `/run/moat`) rather
//! than a mount of its own, so containers made by an older moat get it too and the container
//! spec does not change. The sandbox's user cannot replace it there (it creates no entries in
//! the run directory), but root in a sandbox that may become root can (uid 0 owns the
//! directory), and gains nothing by it: the helper runs with the sandbox user's rights. So
//! moat checks the bytes by hash before each start, replacing a stale, damaged or planted
//! copy rather than trusting it, and opens the name without blocking: a FIFO planted there
//! would otherwise hold a daemon thread until someone wrote to it (docs/helper.md, "The
//! binary"; docs/security.md, "Run directory and workspace files").

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::OnceLock;

use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fstat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};
use sha2::{Digest, Sha256};

use super::HelperError;

/// The helper's bytes.
static HELPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/moat-helper"));
/// Its name in the run directory.
pub const FILE_NAME: &str = "moat-helper";
/// Written first, then renamed over [`FILE_NAME`], so a helper starting meanwhile never runs
/// half a file.
const TEMP_NAME: &str = ".moat-helper.new";

fn digest() -> &'static [u8; 32] {
    static DIGEST: OnceLock<[u8; 32]> = OnceLock::new();
    DIGEST.get_or_init(|| Sha256::digest(HELPER).into())
}

/// Whether the open file holds exactly the embedded helper (and is moat's regular file).
fn is_current(fd: OwnedFd) -> bool {
    let Ok(st) = fstat(&fd) else { return false };
    let regular = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG;
    if !regular
        || st.st_uid != nix::unistd::geteuid().as_raw()
        || st.st_size as usize != HELPER.len()
    {
        return false;
    }
    let mut bytes = Vec::with_capacity(HELPER.len());
    let mut file = std::fs::File::from(fd);
    if file.read_to_end(&mut bytes).is_err() {
        return false;
    }
    Sha256::digest(&bytes).as_slice() == digest()
}

/// Makes sure the run directory (open as `dir`) holds the current helper, read-only.
pub fn install(dir: &OwnedFd) -> Result<(), HelperError> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
    if let Ok(fd) = openat(dir, FILE_NAME, flags, Mode::empty()) {
        if is_current(fd) {
            return Ok(());
        }
    }
    let _ = unlinkat(dir, TEMP_NAME, UnlinkatFlags::NoRemoveDir);
    let fd = openat(
        dir,
        TEMP_NAME,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o555),
    )
    .map_err(|e| HelperError::io("create the helper binary")(e.into()))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(HELPER)
        .map_err(HelperError::io("write the helper binary"))?;
    drop(file);
    renameat(dir.as_fd(), TEMP_NAME, dir.as_fd(), FILE_NAME)
        .map_err(|e| HelperError::io("put the helper binary in place")(e.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_embedded_helper_is_a_static_executable() {
        assert_eq!(&HELPER[..4], b"\x7fELF");
        assert_eq!(HELPER[4], 2, "a 64-bit ELF");
        // A dynamically linked program names its loader in a PT_INTERP program header; a
        // static one (what runs in any image) has none.
        let u16_at = |o: usize| u16::from_le_bytes([HELPER[o], HELPER[o + 1]]) as usize;
        let phoff = u64::from_le_bytes(HELPER[0x20..0x28].try_into().unwrap()) as usize;
        let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
        assert!(phnum > 0);
        const PT_INTERP: u32 = 3;
        for i in 0..phnum {
            let at = phoff + i * phentsize;
            let p_type = u32::from_le_bytes(HELPER[at..at + 4].try_into().unwrap());
            assert_ne!(
                p_type, PT_INTERP,
                "moat-helper must not need the dynamic loader"
            );
        }
    }

    #[test]
    fn install_writes_replaces_and_keeps_the_helper() {
        let dir = tempfile::tempdir().unwrap();
        let fd = crate::descriptors::open_dir(dir.path()).unwrap();
        install(&fd).unwrap();
        let path = dir.path().join(FILE_NAME);
        assert_eq!(std::fs::read(&path).unwrap(), HELPER);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o555
        );
        // A damaged copy is replaced, not trusted.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"#!/bin/sh\necho pwned\n").unwrap();
        install(&fd).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), HELPER);
        // A symlink in its place is replaced, and its target left alone.
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        install(&fd).unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    /// The attack a root sandbox made: a FIFO in the helper's place held the daemon's threads
    /// in `open` until someone wrote to it. Now it is a file that is not the helper, replaced.
    #[test]
    fn a_fifo_in_its_place_does_not_block_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fd = crate::descriptors::open_dir(dir.path()).unwrap();
        let path = dir.path().join(FILE_NAME);
        nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o644)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(install(&fd).is_ok()).unwrap());
        let done = rx.recv_timeout(std::time::Duration::from_secs(5));
        if done.is_err() {
            // Let the stuck thread go before failing.
            let _ = std::fs::OpenOptions::new().write(true).open(&path);
        }
        assert_eq!(done, Ok(true), "install blocked on the FIFO");
        assert_eq!(std::fs::read(&path).unwrap(), HELPER);
    }
}
