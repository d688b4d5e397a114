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

/// How long the usage may keep growing after a stop before the stop is taken for one that did
/// not hold. What the writers wrote between the measurement and their end lands meanwhile
/// (under gVisor the host file can trail the sandbox's writes), so growth is only counted
/// once a measurement shows it quiet.
pub const SETTLE_MAX: Duration = Duration::from_secs(2);
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
/// table-tested; `now` is any monotonic clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watch {
    /// The lowest usage seen while over the limit since the last stop settled.
    floor: Option<u64>,
    /// While a stop settles: the last usage seen, and when the stop from inside was made
    /// (`None` after the engine killed the container: nothing of it runs any more, and the
    /// next measurement, whenever a command starts it again, is the floor).
    settling: Option<(u64, Option<Duration>)>,
    /// A stop was made and the session has not been at or under the limit since: the next
    /// growth is a stop that did not hold.
    stopped_before: bool,
}

impl Watch {
    /// Judges a measurement of `usage` bytes against `limit` (0: no bound) at `now`.
    pub fn judge(&mut self, usage: u64, limit: u64, now: Duration) -> Verdict {
        if limit == 0 || usage <= limit {
            *self = Self::default();
            return Verdict::Within;
        }
        if let Some((last, since)) = self.settling {
            let Some(since) = since.filter(|_| usage > last.saturating_add(SETTLE_QUIET)) else {
                self.settling = None;
                self.floor = Some(usage);
                return Verdict::Over;
            };
            if now.saturating_sub(since) <= SETTLE_MAX {
                self.settling = Some((usage, Some(since)));
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

    /// A stop was carried out at `now`, from inside or (`container_killed`) by the engine;
    /// `usage` is what the guard last measured.
    pub fn stopped(&mut self, usage: u64, now: Duration, container_killed: bool) {
        self.settling = Some((usage, (!container_killed).then_some(now)));
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
        let limit = 100 * M;
        let ms = Duration::from_millis;
        // Each row: a measurement at a time, and the verdict; `Stopped` rows are a stop
        // carried out at that time.
        enum Row {
            At(u64, u64, Verdict),
            Stopped(u64, u64),
            Killed(u64, u64),
        }
        use Row::*;
        let rows = [
            At(0, 50 * M, Within),
            At(25, limit, Within),
            // First time over: stop.
            At(50, limit + 1, Stop),
            Stopped(50, limit + 1),
            // The writer's last writes before it died land: settling, not growth.
            At(150, limit + 60 * M, Over),
            At(175, limit + 60 * M + SETTLE_QUIET, Over),
            // Quiet, then: the floor. A new command's few blocks are within the slack.
            At(200, limit + 60 * M + S, Over),
            // Growing again while still over since the stop: the engine kills the container.
            At(225, limit + 60 * M + SETTLE_QUIET + S + 1, StopContainer),
            Killed(225, limit + 65 * M),
            // The container is started again by a command much later, which writes a
            // little: the floor, not a stop.
            At(60_000, limit + 70 * M, Over),
            At(60_025, limit + 65 * M, Over),
            // Freeing space lowers the floor; still over, growth is still a stop that did not hold.
            At(60_050, limit + 20 * M, Over),
            At(60_075, limit + 20 * M + S + 1, StopContainer),
            Stopped(60_075, limit + 30 * M),
            // A writer that keeps writing through the stop: settling ends after SETTLE_MAX.
            At(60_100, limit + 40 * M, Over),
            At(61_000, limit + 200 * M, Over),
            At(62_075, limit + 300 * M, Over),
            At(62_100, limit + 310 * M, StopContainer),
            // Under the bound: everything is forgotten; over again is a first time.
            At(63_000, 90 * M, Within),
            At(63_025, limit + 1, Stop),
            Stopped(63_025, limit + 1),
            At(63_050, limit + 1, Over),
            At(63_075, limit + 1, Over),
        ];
        let mut w = Watch::default();
        for (i, row) in rows.into_iter().enumerate() {
            match row {
                At(t, u, v) => assert_eq!(w.judge(u, limit, ms(t)), v, "row {i}: {w:?}"),
                Stopped(t, u) => w.stopped(u, ms(t), false),
                Killed(t, u) => w.stopped(u, ms(t), true),
            }
        }
        let mut w = Watch::default();
        assert_eq!(
            w.judge(u64::MAX, 0, ms(0)),
            Within,
            "0 switches the bound off"
        );
    }
}
