//! Reading one directory for `list_dir`: names sorted, each with its type and size, bounded
//! (docs/mcp.md, "list_dir"): only the names shown are held while it is read. Names come from the sandbox and are escaped before display.

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
    // Only the first `limit` names by order are held, whatever the directory holds: the
    // greatest of them on top, replaced by any smaller name read later.
    let mut kept: std::collections::BinaryHeap<std::ffi::CString> = Default::default();
    let mut total = 0;
    let mut truncated_scan = false;
    for entry in stream.iter() {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        if total == max_scan {
            truncated_scan = true;
            break;
        }
        total += 1;
        if kept.len() < limit {
            kept.push(name.to_owned());
        } else if kept.peek().is_some_and(|top| name < top.as_c_str()) {
            kept.pop();
            kept.push(name.to_owned());
        }
    }
    let names = kept.into_sorted_vec();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_names_by_order_are_kept_and_the_rest_counted() {
        let dir = tempfile::tempdir().unwrap();
        for i in [7, 3, 49, 0, 12, 5, 30, 1, 44, 2] {
            std::fs::write(dir.path().join(format!("f{i:02}")), "x").unwrap();
        }
        let fd: OwnedFd = std::fs::File::open(dir.path()).unwrap().into();
        let l = list(&fd, 4, 1000).unwrap();
        let names: Vec<_> = l.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["f00", "f01", "f02", "f03"]);
        assert_eq!((l.total, l.truncated_scan), (10, false));
        assert_eq!(l.entries[0].size, 1);
        let l = list(&fd, 100, 6).unwrap();
        assert_eq!((l.entries.len(), l.total, l.truncated_scan), (6, 6, true));
    }
}
