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
    let root = crate::descriptors::open_dir(dir)?;
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

/// Measurements after a stop from inside that may still show growth. The stop returns once
/// its writers are dead, so what they wrote has landed by the first measurement after it;
/// one more is allowed for a file system that accounts late. Growth past them is a stop that
/// did not hold (docs/security.md, "Disk bound").
pub const SETTLE_MEASUREMENTS: u32 = 2;
/// Growth between two measurements that still counts as quiet while a stop settles.
pub const SETTLE_QUIET: u64 = 1 << 20;

/// What the guard does about one measurement of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// At or under the bound: nothing, and no warning.
    Within,
    /// Over the bound but not growing (or settling after a stop): commands run, so the agent
    /// can free space, with a warning.
    Over,
    /// Over the bound and growing: every process in the container is ended.
    Stop,
    /// Growing again after a stop, without having been back at or under the bound: a writer
    /// survived the stop, or the agent writes instead of freeing space. The engine kills the
    /// container (docs/security.md, "Disk bound").
    StopContainer,
}

/// One session's state between measurements. Over the limit, growth past the floor (the
/// lowest usage since the last stop settled) by more than [`GROWTH_SLACK`] is stopped, and
/// freeing space lowers the floor; at or under the limit everything is forgotten. So the
/// agent can still free space (`rm`), and the usage never rises more than one measuring
/// interval's writes plus the time to stop (plus the slack) above the limit. Pure,
/// table-tested.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watch {
    /// The lowest usage seen while over the limit since the last stop settled.
    floor: Option<u64>,
    /// While a stop settles: the last usage seen, and how many more measurements may still
    /// show growth (`None` after the engine killed the container: nothing of it runs any
    /// more, and the next measurement, whenever a command starts it again, is the floor).
    settling: Option<(u64, Option<u32>)>,
    /// A stop was made and the session has not been at or under the limit since: the next
    /// growth is a stop that did not hold.
    stopped_before: bool,
}

impl Watch {
    /// Judges a measurement of `usage` bytes against `limit` (0: no bound).
    pub fn judge(&mut self, usage: u64, limit: u64) -> Verdict {
        if limit == 0 || usage <= limit {
            *self = Self::default();
            return Verdict::Within;
        }
        if let Some((last, left)) = self.settling {
            let Some(left) = left.filter(|_| usage > last.saturating_add(SETTLE_QUIET)) else {
                self.settling = None;
                self.floor = Some(usage);
                return Verdict::Over;
            };
            if left > 0 {
                self.settling = Some((usage, Some(left - 1)));
                return Verdict::Over;
            }
            self.settling = None;
            self.floor = Some(usage);
            return Verdict::StopContainer;
        }
        match self.floor {
            Some(f) if usage <= f.saturating_add(GROWTH_SLACK) => {
                self.floor = Some(usage.min(f));
                Verdict::Over
            }
            _ => {
                self.floor = Some(usage);
                if self.stopped_before {
                    Verdict::StopContainer
                } else {
                    Verdict::Stop
                }
            }
        }
    }

    /// A stop was carried out, from inside or (`container_killed`) by the engine; `usage` is
    /// what the guard last measured.
    pub fn stopped(&mut self, usage: u64, container_killed: bool) {
        self.settling = Some((usage, (!container_killed).then_some(SETTLE_MEASUREMENTS)));
        self.stopped_before = true;
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
        use Verdict::*;
        const M: u64 = 1 << 20;
        const S: u64 = GROWTH_SLACK;
        const Q: u64 = SETTLE_QUIET;
        let limit = 100 * M;
        // Each row: a measurement and its verdict, or a stop carried out (`Stopped` from
        // inside, `Killed` by the engine) after the last measurement.
        enum Row {
            At(u64, Verdict),
            Stopped(u64),
            Killed(u64),
        }
        use Row::*;
        let rows = [
            At(50 * M, Within),
            At(limit, Within),
            // First time over: stop.
            At(limit + 1, Stop),
            Stopped(limit + 1),
            // What the writer wrote during the stop has landed: settling, not growth.
            At(limit + 60 * M, Over),
            // Quiet: the floor. A new command's few blocks are within the slack.
            At(limit + 60 * M + Q, Over),
            At(limit + 60 * M + S, Over),
            // Growing again while still over since the stop: the engine kills the container.
            At(limit + 60 * M + Q + S + 1, StopContainer),
            Killed(limit + 65 * M),
            // The container is started again by a command (whenever), which writes a
            // little: the floor, not a stop.
            At(limit + 70 * M, Over),
            At(limit + 65 * M, Over),
            // Freeing space lowers the floor; still over, growth is a stop that did not hold.
            At(limit + 20 * M, Over),
            At(limit + 20 * M + S + 1, StopContainer),
            Stopped(limit + 30 * M),
            // A writer that keeps writing through a stop from inside: past the settling
            // measurements, the engine.
            At(limit + 40 * M, Over),
            At(limit + 40 * M + 2 * Q, Over),
            At(limit + 40 * M + 4 * Q, StopContainer),
            // Under the bound: everything is forgotten; over again is a first time.
            At(90 * M, Within),
            At(limit + 1, Stop),
            Stopped(limit + 1),
            At(limit + 1, Over),
            At(limit + 1, Over),
        ];
        let mut w = Watch::default();
        for (i, row) in rows.into_iter().enumerate() {
            match row {
                At(u, v) => assert_eq!(w.judge(u, limit), v, "row {i}: {w:?}"),
                Stopped(u) => w.stopped(u, false),
                Killed(u) => w.stopped(u, true),
            }
        }
        let mut w = Watch::default();
        assert_eq!(w.judge(u64::MAX, 0), Within, "0 switches the bound off");
    }
}
