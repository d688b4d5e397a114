//! Reading one directory for `list_dir`: names sorted, each with its type and size, bounded
//! (docs/mcp.md, "list_dir"). Names come from the sandbox and are escaped before display.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use nix::dir::Dir;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, SFlag};

/// One entry as shown.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListEntry {
    /// The name, escaped (control, bidi and invisible characters shown as `\u{…}`).
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Bytes, for files (and the link text's length for symlinks).
    pub size: u64,
}

/// What was listed.
#[derive(Debug)]
pub struct Listing {
    /// The first `limit` entries by name.
    pub entries: Vec<ListEntry>,
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
                        SFlag::S_IFREG => "file",
                        SFlag::S_IFDIR => "dir",
                        SFlag::S_IFLNK => "symlink",
                        _ => "other",
                    };
                    let size = if kind == "dir" {
                        0
                    } else {
                        st.st_size.max(0) as u64
                    };
                    (kind, size)
                }
                Err(_) => ("other", 0),
            };
            ListEntry {
                name: crate::policy::escape_display(&String::from_utf8_lossy(name.to_bytes())),
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
