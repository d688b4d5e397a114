//! Extended attributes by descriptor (docs/e2b.md, "Files"): set on a file moat holds open,
//! read from one opened beneath a root (an `O_PATH` descriptor is read through its
//! `/proc/self/fd` link, which is that very inode, never a path the sandbox could swap).
//! Bounded: at most [`MAX_ATTRS`] attributes of [`MAX_VALUE`] bytes each are read.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The most attributes read from one entry.
pub const MAX_ATTRS: usize = 64;
/// The longest value read (longer ones are left out).
pub const MAX_VALUE: usize = 4096;
/// The longest list of names the kernel hands over (its own bound, `XATTR_LIST_MAX`).
const MAX_LIST: usize = 64 << 10;

fn cstring(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Sets attribute `name` of the open file `fd` to `value`.
pub fn set(fd: &impl AsRawFd, name: &str, value: &[u8]) -> io::Result<()> {
    let name = cstring(name)?;
    // SAFETY: `fd` is open for the call; `name` is NUL-terminated and `value` is valid for
    // `value.len()` bytes.
    let r = unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Removes every attribute of the open file `fd` whose name starts with `prefix` (a file
/// written again in place takes only the attributes of its new write).
pub fn remove_prefixed(fd: &impl AsRawFd, prefix: &str) -> io::Result<()> {
    let mut names = vec![0u8; MAX_LIST];
    // SAFETY: `fd` is open for the call; `names` is valid for its length.
    let n = unsafe { libc::flistxattr(fd.as_raw_fd(), names.as_mut_ptr().cast(), names.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        // A filesystem without attributes has none to remove.
        return match e.raw_os_error() {
            Some(libc::ENOTSUP) => Ok(()),
            _ => Err(e),
        };
    }
    names.truncate(n as usize);
    for raw in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        if !raw.starts_with(prefix.as_bytes()) {
            continue;
        }
        let Ok(name) = CString::new(raw) else {
            continue;
        };
        // SAFETY: as above; `name` is NUL-terminated.
        if unsafe { libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENODATA) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The attributes of the entry `fd` (any descriptor, `O_PATH` included) whose names start
/// with `prefix`, keyed by the rest of the name; values that are not UTF-8, or longer than
/// [`MAX_VALUE`], are left out. An entry or filesystem without attributes has none.
pub fn read_prefixed(fd: &OwnedFd, prefix: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(path) = cstring(&format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
        return out;
    };
    let mut names = vec![0u8; MAX_LIST];
    // SAFETY: `path` is NUL-terminated; `names` is valid for its length.
    let n = unsafe { libc::listxattr(path.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return out;
    }
    names.truncate(n as usize);
    let mut value = vec![0u8; MAX_VALUE];
    for raw in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        if out.len() >= MAX_ATTRS {
            break;
        }
        let Ok(name) = std::str::from_utf8(raw) else {
            continue;
        };
        let Some(key) = name.strip_prefix(prefix) else {
            continue;
        };
        let Ok(cname) = cstring(name) else { continue };
        // SAFETY: as above; `value` is valid for its length.
        let len = unsafe {
            libc::getxattr(
                path.as_ptr(),
                cname.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if len < 0 {
            continue;
        }
        if let Ok(v) = std::str::from_utf8(&value[..len as usize]) {
            out.insert(key.to_string(), v.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_set_by_descriptor_read_back_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::File::create(&path).unwrap();
        if set(&file, "user.e2b.author", b"mish").is_err() {
            eprintln!("this filesystem takes no user attributes: nothing to check");
            return;
        }
        set(&file, "user.other", b"x").unwrap();
        set(&file, "user.e2b.bin", &[0xff, 0xfe]).unwrap();
        let fd = nix::fcntl::open(
            &path,
            nix::fcntl::OFlag::O_PATH,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap();
        let got = read_prefixed(&fd, "user.e2b.");
        assert_eq!(
            got,
            BTreeMap::from([("author".to_string(), "mish".to_string())])
        );
        assert!(set(&file, "bad\0name", b"x").is_err());
    }
}
