//! A session container's control groups, read from the host: the kernel's own counters of
//! the memory and process limits (how often the OOM killer struck, how often a fork was
//! refused), current use against each limit, and which processes are in a process group.
//!
//! Read from the host rather than through an exec because an exec is exactly what fails when
//! a limit is full: with the memory cgroup full every new process is OOM-killed at start, and
//! with the pids cgroup full none can be created (docs/security.md, "Sandbox limits"). The
//! files are world-readable; moat finds them through the container's init process
//! (`/proc/<pid>/cgroup`), which works whenever moat shares the engine's pid namespace. A moat
//! in a container of its own sees no such process and gets `None` (the callers fall back).
//!
//! Everything here is read as hostile input: the sandbox cannot write these files, but it
//! chooses what its processes are called and how many there are, so every parse is bounded
//! and a malformed value reads as absent.

use std::path::{Path, PathBuf};

/// Where the cgroup file systems are mounted on the host.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// Most processes looked at in one membership scan (the pids limit bounds it anyway).
const MAX_SCAN: usize = 65_536;

/// The kernel's counters for the two limits; they only ever grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Processes the OOM killer ended in the container (`oom_kill`).
    pub oom_kills: u64,
    /// Forks refused because the container was at its pids limit (`pids.events` `max`).
    pub pids_refused: u64,
}

/// What the container uses against its limits now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes charged to the memory cgroup (page cache included).
    pub memory: u64,
    /// The memory limit in bytes; `None` when unlimited.
    pub memory_limit: Option<u64>,
    /// Charged bytes the kernel cannot reclaim by dropping clean page cache: what a new
    /// process competes with (the engine's "working set").
    pub working_set: u64,
    /// Bytes held by tmpfs and shared memory (`shmem`): never reclaimed while the files exist.
    pub shmem: u64,
    /// Processes (tasks) in the container.
    pub pids: u64,
    /// The pids limit; `None` when unlimited.
    pub pids_limit: Option<u64>,
}

/// The memory and pids cgroup directories of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupDirs {
    /// Memory controller directory.
    memory: PathBuf,
    /// Pids controller directory (the same as `memory` on cgroup v2).
    pids: PathBuf,
    /// Unified hierarchy (cgroup v2): other file names.
    v2: bool,
}

impl CgroupDirs {
    /// The cgroups of the process with host pid `pid` (a container's init), if this moat can
    /// see them.
    pub fn of_pid(pid: u32) -> Option<Self> {
        if pid == 0 {
            return None;
        }
        let text = read_small(&Path::new("/proc").join(pid.to_string()).join("cgroup"))?;
        let dirs = Self::from_proc_cgroup(&text, Path::new(CGROUP_ROOT))?;
        dirs.memory.is_dir().then_some(dirs)
    }

    /// Parses `/proc/<pid>/cgroup`: the v1 `memory` and `pids` lines when there are any (a
    /// hybrid host also lists `0::`), else the unified `0::` line.
    fn from_proc_cgroup(text: &str, root: &Path) -> Option<Self> {
        let mut memory = None;
        let mut pids = None;
        let mut unified = None;
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let rel = path.trim_start_matches('/');
            if rel.split('/').any(|c| c == "..") {
                return None;
            }
            if controllers.is_empty() {
                unified = Some(rel.to_string());
                continue;
            }
            // A v1 hierarchy is mounted under the name of its controllers (`cpu,cpuacct`).
            let dir = root.join(controllers).join(rel);
            for c in controllers.split(',') {
                match c {
                    "memory" => memory = Some(dir.clone()),
                    "pids" => pids = Some(dir.clone()),
                    _ => {}
                }
            }
        }
        match (memory, pids, unified) {
            (Some(memory), Some(pids), _) => Some(Self {
                memory,
                pids,
                v2: false,
            }),
            (None, None, Some(u)) => Some(Self {
                memory: root.join(&u),
                pids: root.join(&u),
                v2: true,
            }),
            _ => None,
        }
    }

    /// The limit counters now; `None` when the files are gone (the container was removed).
    pub fn counters(&self) -> Option<Counters> {
        let oom = if self.v2 {
            read_small(&self.memory.join("memory.events"))?
        } else {
            read_small(&self.memory.join("memory.oom_control"))?
        };
        let pids = read_small(&self.pids.join("pids.events"))?;
        Some(Counters {
            oom_kills: keyed(&oom, "oom_kill").unwrap_or(0),
            pids_refused: keyed(&pids, "max").unwrap_or(0),
        })
    }

    /// Use against the limits now; `None` when the files are gone.
    pub fn usage(&self) -> Option<Usage> {
        let (usage, limit, stat, inactive, shmem) = if self.v2 {
            (
                "memory.current",
                "memory.max",
                "memory.stat",
                "inactive_file",
                "shmem",
            )
        } else {
            (
                "memory.usage_in_bytes",
                "memory.limit_in_bytes",
                "memory.stat",
                "total_inactive_file",
                "total_shmem",
            )
        };
        let memory = number(&read_small(&self.memory.join(usage))?)?;
        let stat = read_small(&self.memory.join(stat)).unwrap_or_default();
        let inactive = keyed(&stat, inactive).unwrap_or(0);
        Some(Usage {
            memory,
            memory_limit: limit_value(&read_small(&self.memory.join(limit))?),
            working_set: memory.saturating_sub(inactive),
            shmem: keyed(&stat, shmem).unwrap_or(0),
            pids: number(&read_small(&self.pids.join("pids.current"))?)?,
            pids_limit: limit_value(&read_small(&self.pids.join("pids.max"))?),
        })
    }

    /// The host pids of the processes in the container's cgroup (at most 65 536); `None` when
    /// the file is gone.
    pub fn procs(&self) -> Option<Vec<u32>> {
        let procs = read_whole(&self.pids.join("cgroup.procs"))?;
        Some(
            procs
                .lines()
                .take(MAX_SCAN)
                .filter_map(|p| p.trim().parse().ok())
                .collect(),
        )
    }
}

/// The process group of a process as its innermost pid namespace (the container's) numbers
/// it: the last field of `NSpgid` in `/proc/<pid>/status`.
pub fn container_pgid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpgid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// `key N` from a flat-keyed cgroup file.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A limit file: `max` (v2) or a number at or near `i64::MAX` (v1's "unlimited") is none.
fn limit_value(text: &str) -> Option<u64> {
    let n = number(text)?;
    (n < (1u64 << 62)).then_some(n)
}

/// Reads a small kernel file (at most 64 KiB: memory.stat is about 1.5 KiB).
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::with_capacity(KERNEL_READ);
    file.take(64 << 10).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Reads a kernel file whole, however long (`cgroup.procs`).
fn read_whole(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::with_capacity(KERNEL_READ);
    std::fs::File::open(path)
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The buffer a kernel file is read into first. Kernel files report a size of 0, so a buffer
/// that starts empty reads them in several small pieces; each command's end reads about ten
/// of them (its limits, its group's members).
const KERNEL_READ: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_directories() {
        let root = Path::new("/cg");
        type Dirs<'a> = Option<(&'a str, &'a str, bool)>;
        let rows: &[(&str, Dirs)] = &[
            // cgroup v1 with the unified line a hybrid host adds (this machine).
            (
                "9:name=systemd:/docker/abc\n8:pids:/docker/abc\n4:memory:/docker/abc\n0::/docker/abc\n",
                Some(("/cg/memory/docker/abc", "/cg/pids/docker/abc", false)),
            ),
            // cgroup v2, systemd driver.
            (
                "0::/system.slice/docker-abc.scope\n",
                Some((
                    "/cg/system.slice/docker-abc.scope",
                    "/cg/system.slice/docker-abc.scope",
                    true,
                )),
            ),
            // Joined controllers.
            (
                "5:memory,pids:/x\n",
                Some(("/cg/memory,pids/x", "/cg/memory,pids/x", false)),
            ),
            // A path that climbs is not followed.
            ("0::/../../etc\n", None),
            ("garbage", None),
            ("", None),
            // Only one v1 controller: not enough.
            ("4:memory:/docker/abc\n", None),
        ];
        for (text, want) in rows {
            let got = CgroupDirs::from_proc_cgroup(text, root);
            let want = want.map(|(m, p, v2)| CgroupDirs {
                memory: m.into(),
                pids: p.into(),
                v2,
            });
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn reads_counters_and_usage_v1_and_v2() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        );
        write("pids.events", "max 1801\n");
        write("memory.usage_in_bytes", "266964992\n");
        write("memory.limit_in_bytes", "268435456\n");
        write(
            "memory.stat",
            "cache 1\nshmem 2\ntotal_shmem 265785344\ntotal_inactive_file 4096\n",
        );
        write("pids.current", "63\n");
        write("pids.max", "64\n");
        let v1 = CgroupDirs {
            memory: dir.path().into(),
            pids: dir.path().into(),
            v2: false,
        };
        assert_eq!(
            v1.counters(),
            Some(Counters {
                oom_kills: 3,
                pids_refused: 1801
            })
        );
        assert_eq!(
            v1.usage(),
            Some(Usage {
                memory: 266964992,
                memory_limit: Some(268435456),
                working_set: 266964992 - 4096,
                shmem: 265785344,
                pids: 63,
                pids_limit: Some(64),
            })
        );
        write(
            "memory.events",
            "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 0\n",
        );
        write("memory.current", "100\n");
        write("memory.max", "max\n");
        write("pids.max", "max\n");
        write("memory.stat", "inactive_file 10\nshmem 7\n");
        let v2 = CgroupDirs { v2: true, ..v1 };
        assert_eq!(v2.counters().unwrap().oom_kills, 2);
        let u = v2.usage().unwrap();
        assert_eq!(
            (u.memory_limit, u.pids_limit, u.working_set, u.shmem),
            (None, None, 90, 7)
        );
        // v1's "unlimited" is a huge number.
        write("memory.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(
            CgroupDirs {
                v2: false,
                ..v2.clone()
            }
            .usage()
            .unwrap()
            .memory_limit,
            None
        );
        // Gone (the container was removed): nothing, not zeros.
        let gone = CgroupDirs {
            memory: dir.path().join("nope"),
            pids: dir.path().join("nope"),
            v2: false,
        };
        assert_eq!(gone.counters(), None);
        assert_eq!(gone.usage(), None);
    }

    #[test]
    fn process_group_as_the_container_numbers_it() {
        let rows = [
            ("Name:\tsh\nNSpgid:\t27715\t1\n", Some(1)),
            ("NSpgid:\t5\n", Some(5)),
            ("NSpgid:\t5\t9\t12\n", Some(12)),
            ("Name:\tNSpgid:\t7\n", None),
            ("NSpgid:\tx\n", None),
            ("", None),
        ];
        for (status, want) in rows {
            assert_eq!(container_pgid(status), want, "{status:?}");
        }
    }
}
