//! Reading one directory for `list_dir`: names sorted, each with its type and size, bounded
//! (docs/mcp.md, "list_dir"). Names come from the sandbox and are escaped before display.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use nix::dir::Dir;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, SFlag};

use crate::contract::{DirEntry, EntryKind};

/// What was listed.
#[derive(Debug)]
pub struct Listing {
    /// The first `limit` entries by name.
    pub entries: Vec<DirEntry>,
    /// Entries in the directory (counted up to the scan bound).
    pub total: usize,
    /// The scan bound stopped the count: `total` is a lower bound.
    pub truncated_scan: bool,
}

/// Lists `dir`, at most `limit` entries, reading at most `max_scan` names.
pub fn list(dir: &OwnedFd, limit: usize, max_scan: usize) -> io::Result<Listing> {
    let dup = dir.as_fd().try_clone_to_owned()?;
    let mut stream = Dir::from_fd(dup)?;
    let mut names = Vec::new();
    let mut truncated_scan = false;
    for entry in stream.iter() {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        if names.len() == max_scan {
            truncated_scan = true;
            break;
        }
        names.push(name.to_owned());
    }
    names.sort();
    let total = names.len();
    let entries = names
        .iter()
        .take(limit)
        .map(|name| {
            // The entry may be gone by now: the sandbox changes the workspace as it likes.
            let (kind, size) = match fstatat(dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => {
                    let kind = match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
                        SFlag::S_IFREG => EntryKind::File,
                        SFlag::S_IFDIR => EntryKind::Dir,
                        SFlag::S_IFLNK => EntryKind::Symlink,
                        _ => EntryKind::Other,
                    };
                    let size = if kind == EntryKind::Dir {
                        0
                    } else {
                        st.st_size.max(0) as u64
                    };
                    (kind, size)
                }
                Err(_) => (EntryKind::Other, 0),
            };
            DirEntry {
                name: crate::output::escape_display(&String::from_utf8_lossy(name.to_bytes())),
                kind,
                size,
            }
        })
        .collect();
    Ok(Listing {
        entries,
        total,
        truncated_scan,
    })
}
