//! How much disk a session's host directories hold, measured without trusting their contents
//! (docs/security.md, "Disk bound").
//!
//! The walk is descriptor-based like every other host-side operation on sandbox-written
//! directories: each directory is opened relative to its parent with
//! `O_DIRECTORY|O_NOFOLLOW`, entries are `fstatat`ed with `AT_SYMLINK_NOFOLLOW`, symlinks are
//! counted as themselves and never followed, and other filesystems are not entered. It counts
//! allocated blocks (so holes punched into logs and sparse files cost what they really cost),
//! and it is bounded in entries and time: a tree too large to walk in time gives a lower bound.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::dir::Dir;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, Mode, SFlag};

/// What a walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Allocated bytes of every entry seen.
    pub bytes: u64,
    /// False when the entry or time bound cut the walk short (`bytes` is then a lower bound).
    pub complete: bool,
}

/// Bounds one walk.
#[derive(Debug, Clone, Copy)]
pub struct WalkLimits {
    /// Entries looked at before the walk gives up (a tree of millions of files).
    pub max_entries: usize,
    /// Time before the walk gives up (a slow or contended disk).
    pub max_time: Duration,
}

/// Allocated bytes under `dir` (the directory itself included).
pub fn allocated(dir: &Path, limits: WalkLimits) -> io::Result<Usage> {
    let root = crate::process::open_dir(dir)?;
    let st = fstat(&root)?;
    let dev = st.st_dev;
    let deadline = Instant::now() + limits.max_time;
    let mut bytes = st.st_blocks as u64 * 512;
    let mut seen = 0usize;
    let mut stack: Vec<OwnedFd> = vec![root];
    while let Some(fd) = stack.pop() {
        let children = match list(&fd) {
            Ok(c) => c,
            Err(_) => continue,
        };
        for name in children {
            seen += 1;
            if seen > limits.max_entries || Instant::now() >= deadline {
                return Ok(Usage {
                    bytes,
                    complete: false,
                });
            }
            let Ok(st) = fstatat(&fd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            bytes += st.st_blocks as u64 * 512;
            let is_dir =
                SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR;
            if is_dir && st.st_dev == dev {
                let flags =
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                if let Ok(child) = openat(&fd, name.as_c_str(), flags, Mode::empty()) {
                    stack.push(child);
                }
            }
        }
    }
    Ok(Usage {
        bytes,
        complete: true,
    })
}

/// The names in an open directory (not `.`/`..`); the directory stream works on a duplicate,
/// so `fd` stays usable for the `*at` calls.
fn list(fd: &OwnedFd) -> io::Result<Vec<std::ffi::CString>> {
    let dup = fd.as_fd().try_clone_to_owned()?;
    let mut dir = Dir::from_fd(dup)?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Growth tolerated over the floor: a new command's own files (a few blocks each) and a
/// little output must not count as "still growing".
pub const GROWTH_SLACK: u64 = 4 << 20;

/// Whether the session must be stopped now, given its `usage`, the `limit` and `floor`, the
/// lowest usage since the last stop while still over the limit. Over the limit, growth past
/// the floor by more than [`GROWTH_SLACK`] is stopped, and freeing space lowers the floor; at
/// or under the limit the floor is forgotten. So the agent can still free space (`rm`), and
/// the usage never rises more than one measuring interval's writes (plus the slack) above the
/// limit. Pure, table-tested.
pub fn must_stop(usage: u64, limit: u64, floor: &mut Option<u64>) -> bool {
    if limit == 0 || usage <= limit {
        *floor = None;
        return false;
    }
    match *floor {
        Some(f) if usage <= f.saturating_add(GROWTH_SLACK) => {
            *floor = Some(usage.min(f));
            false
        }
        _ => {
            *floor = Some(usage);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: WalkLimits = WalkLimits {
        max_entries: 10_000,
        max_time: Duration::from_secs(5),
    };

    #[test]
    fn counts_allocated_blocks_and_never_follows_links() {
        let dir = tempfile::tempdir().unwrap();
        let empty = allocated(dir.path(), LIMITS).unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/data"), vec![1u8; 1 << 20]).unwrap();
        // A sparse file costs its blocks, not its length.
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(1 << 30).unwrap();
        // A link to a big tree outside is counted as a link.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("big"), vec![1u8; 4 << 20]).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let u = allocated(dir.path(), LIMITS).unwrap();
        assert!(u.complete);
        let grew = u.bytes - empty.bytes;
        assert!((1 << 20..(1 << 20) + (64 << 10)).contains(&grew), "{grew}");
    }

    #[test]
    fn the_walk_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..50 {
            std::fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
        }
        let u = allocated(
            dir.path(),
            WalkLimits {
                max_entries: 10,
                max_time: Duration::from_secs(5),
            },
        )
        .unwrap();
        assert!(!u.complete);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(
            allocated(&link, LIMITS).is_err(),
            "the root is not followed either"
        );
    }

    #[test]
    fn stop_rules() {
        const M: u64 = 1 << 20;
        const S: u64 = GROWTH_SLACK;
        let limit = 100 * M;
        // (usage, floor before) → (stop?, floor after).
        let rows: &[(u64, Option<u64>, bool, Option<u64>)] = &[
            (50 * M, None, false, None),
            (limit, None, false, None),
            (limit + 1, None, true, Some(limit + 1)),
            // Still over, not growing (the stop is taking effect, or an `rm` runs).
            (limit + 1, Some(limit + 1), false, Some(limit + 1)),
            // A new command's few blocks are within the slack, and do not raise the floor.
            (limit + 1 + S, Some(limit + 1), false, Some(limit + 1)),
            (90 * M, Some(150 * M), false, None),
            (120 * M, Some(150 * M), false, Some(120 * M)),
            // Growing again past the floor while over: stop again.
            (120 * M + S + 1, Some(120 * M), true, Some(120 * M + S + 1)),
        ];
        for &(usage, before, stop, after) in rows {
            let mut floor = before;
            assert_eq!(
                must_stop(usage, limit, &mut floor),
                stop,
                "{usage} {before:?}"
            );
            assert_eq!(floor, after, "{usage} {before:?}");
        }
        let mut floor = None;
        assert!(
            !must_stop(u64::MAX, 0, &mut floor),
            "0 switches the bound off"
        );
    }
}
