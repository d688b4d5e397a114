//! A session container's state against its limits: whether it runs, memory and processes
//! against their limits, what its tmpfs mounts hold, and whether it is wedged — so full that
//! no new command can run (docs/security.md, "Sandbox limits"). `moat doctor --session`
//! reports it, and `exec` adds the wedge and its fix to a result that a limit cut short.

use crate::runtime::Runtime;

use super::cgroup::{CgroupDirs, Counters, Usage};
use crate::output::human_bytes;

/// Room a new command needs below the memory limit: a login shell and the wrapper take a few
/// MiB; less than this left means the next one is likely OOM-killed as it starts.
const MEMORY_HEADROOM: u64 = 32 << 20;
/// Processes a new command needs at once: the wrapper and its login shell.
const PIDS_HEADROOM: u64 = 2;

/// Why no new command can run in a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wedge {
    /// The memory cgroup is (nearly) full of memory that cannot be reclaimed.
    Memory {
        /// Bytes in use that page cache reclaim cannot free.
        working_set: u64,
        /// The limit.
        limit: u64,
        /// How much of it tmpfs and shared memory hold.
        shmem: u64,
    },
    /// The pids cgroup is (nearly) full.
    Pids {
        /// Processes in the container.
        pids: u64,
        /// The limit.
        limit: u64,
    },
}

/// Whether a container using `u` is wedged.
pub fn wedge_of(u: &Usage) -> Option<Wedge> {
    if let Some(limit) = u.pids_limit {
        if u.pids + PIDS_HEADROOM > limit {
            return Some(Wedge::Pids {
                pids: u.pids,
                limit,
            });
        }
    }
    let limit = u.memory_limit?;
    (u.working_set + MEMORY_HEADROOM.min(limit / 8) >= limit).then_some(Wedge::Memory {
        working_set: u.working_set,
        limit,
        shmem: u.shmem,
    })
}

impl Wedge {
    /// The limit it is at, as `details.limit` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Wedge::Memory { .. } => "memory",
            Wedge::Pids { .. } => "pids",
        }
    }

    /// What a result or `moat doctor` says: the state, what it means, and the fix.
    pub fn sentence(&self, session: &str) -> String {
        let rm = format!(
            "or have the operator run `moat sessions rm {session}`, which removes the container (the workspace stays) so the next command starts a fresh one"
        );
        match self {
            Wedge::Pids { pids, limit } => format!(
                "The session's container is still at its process limit ({pids} of {limit} processes), so new commands cannot start. End what fills it (process list, then process kill), {rm}."
            ),
            Wedge::Memory {
                working_set,
                limit,
                shmem,
            } => format!(
                "The session's container is still at its memory limit ({} of {} in use, {} of it in tmpfs files and shared memory), so new commands are killed as they start. Free memory (delete files under /tmp, /var/tmp or /dev/shm; end background processes with process kill), {rm}.",
                human_bytes(*working_set),
                human_bytes(*limit),
                human_bytes(*shmem)
            ),
        }
    }
}

/// What one tmpfs holds, as `df` inside the container reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpfsUse {
    /// Mount point.
    pub path: String,
    /// Bytes used.
    pub used: u64,
    /// Size of the mount.
    pub size: u64,
}

/// Parses `df -P -k` output; lines that do not parse are skipped (the text comes from inside
/// the sandbox).
pub fn parse_df(text: &str) -> Vec<TmpfsUse> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 6 {
                return None;
            }
            Some(TmpfsUse {
                path: f[5].to_string(),
                size: f[1].parse::<u64>().ok()?.checked_mul(1024)?,
                used: f[2].parse::<u64>().ok()?.checked_mul(1024)?,
            })
        })
        .take(64)
        .collect()
}

/// One session container's state against its limits.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// The container's name.
    pub container: String,
    /// The engine's state (`running`, `exited`, …); `None` when it does not exist.
    pub state: Option<String>,
    /// Use against the limits, when this moat can read the cgroups.
    pub usage: Option<Usage>,
    /// The limit counters since the container started.
    pub counters: Option<Counters>,
    /// What each tmpfs holds; empty when it could not be measured.
    pub tmpfs: Vec<TmpfsUse>,
    /// Why the tmpfs could not be measured.
    pub tmpfs_error: Option<String>,
}

impl Health {
    /// Whether it is wedged, as far as the cgroups tell.
    pub fn wedge(&self) -> Option<Wedge> {
        self.usage.as_ref().and_then(wedge_of)
    }

    /// The report, one `(fine, text)` per line.
    pub fn lines(&self, session: &str) -> Vec<(bool, String)> {
        let mut out = Vec::new();
        let Some(state) = &self.state else {
            out.push((
                true,
                format!(
                    "session {session}: no container ({}); the next command creates it",
                    self.container
                ),
            ));
            return out;
        };
        out.push((
            state == "running",
            format!("session {session}: container {} is {state}", self.container),
        ));
        match &self.usage {
            Some(u) => {
                let limit = u.memory_limit.map_or("no limit".into(), human_bytes);
                out.push((
                    true,
                    format!(
                        "memory {} in use of {limit} ({} charged, {} in tmpfs and shared memory)",
                        human_bytes(u.working_set),
                        human_bytes(u.memory),
                        human_bytes(u.shmem)
                    ),
                ));
                let limit = u.pids_limit.map_or("no limit".into(), |l| l.to_string());
                out.push((true, format!("processes {} of {limit}", u.pids)));
            }
            None if state == "running" => out.push((
                true,
                "memory and processes: this moat cannot read the container's cgroups (it does not share the engine's pid namespace)".into(),
            )),
            None => {}
        }
        if let Some(c) = &self.counters {
            out.push((
                true,
                format!(
                    "limit hits since the container started: {} OOM kill(s), {} fork(s) refused at the process limit",
                    c.oom_kills, c.pids_refused
                ),
            ));
        }
        for t in &self.tmpfs {
            out.push((
                t.used < t.size,
                format!(
                    "tmpfs {} holds {} of {}",
                    t.path,
                    human_bytes(t.used),
                    human_bytes(t.size)
                ),
            ));
        }
        if let Some(e) = &self.tmpfs_error {
            out.push((false, format!("tmpfs use: failed to {e}")));
        }
        match self.wedge() {
            Some(w) => out.push((false, format!("wedged: {}", w.sentence(session)))),
            None if state == "running" && self.usage.is_some() => {
                out.push((true, "not wedged: new commands can start".into()))
            }
            None => {}
        }
        out
    }
}

/// Looks at container `name`: engine state, cgroups (from the host), and tmpfs use (from a
/// short `df` inside, which fails when the container is wedged: that is reported too).
pub async fn check(runtime: &dyn Runtime, name: &str, tmpfs_paths: &[String]) -> Health {
    let mut health = Health {
        container: name.to_string(),
        ..Default::default()
    };
    let info = match runtime.inspect_container(name).await {
        Ok(Some(info)) => info,
        Ok(None) => return health,
        Err(e) => {
            health.state = Some(format!("unknown (failed to {e})"));
            return health;
        }
    };
    health.state = Some(info.state.clone());
    if !info.running {
        return health;
    }
    if let Some(cg) = CgroupDirs::of_pid(info.pid) {
        health.usage = cg.usage();
        health.counters = cg.counters();
    }
    let mut argv = vec!["df".to_string(), "-P".into(), "-k".into()];
    argv.extend(tmpfs_paths.iter().cloned());
    argv.push("/dev/shm".into());
    let df = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        runtime.exec_capture(name, argv, None),
    )
    .await;
    match df {
        Ok(Ok((0, out))) => health.tmpfs = parse_df(&String::from_utf8_lossy(&out)),
        Ok(Ok((code, out))) => {
            let text = String::from_utf8_lossy(&out);
            health.tmpfs_error = Some(format!(
                "run df in the container (exit {code}): {}",
                text.trim().chars().take(200).collect::<String>()
            ));
        }
        Ok(Err(e)) => health.tmpfs_error = Some(format!("run df in the container: {e}")),
        Err(_) => health.tmpfs_error = Some("run df in the container: no answer in 5 s".into()),
    }
    health
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn usage(working_set: u64, pids: u64) -> Usage {
        Usage {
            memory: working_set,
            memory_limit: Some(2048 * MIB),
            working_set,
            shmem: 0,
            pids,
            pids_limit: Some(512),
        }
    }

    #[test]
    fn wedges() {
        let rows = [
            (usage(100 * MIB, 5), None),
            // The state: tmpfs filled the memory limit.
            (usage(2040 * MIB, 5), Some("memory")),
            (usage(2016 * MIB, 5), Some("memory")),
            (usage(2000 * MIB, 5), None),
            // A fork bomb holding every slot.
            (usage(100 * MIB, 512), Some("pids")),
            (usage(100 * MIB, 511), Some("pids")),
            (usage(100 * MIB, 510), None),
            (
                Usage {
                    memory_limit: None,
                    pids_limit: None,
                    ..usage(1 << 40, 1 << 20)
                },
                None,
            ),
        ];
        for (u, want) in rows {
            let got = wedge_of(&u).map(|w| w.kind());
            assert_eq!(got, want, "{u:?}");
        }
        // A small limit keeps proportionate headroom.
        let small = Usage {
            memory_limit: Some(64 * MIB),
            ..usage(57 * MIB, 1)
        };
        assert_eq!(wedge_of(&small).map(|_| ()), Some(()));
    }

    #[test]
    fn sentences_give_the_fix() {
        let w = Wedge::Pids {
            pids: 512,
            limit: 512,
        };
        let s = w.sentence("agent1");
        assert!(s.contains("(512 of 512 processes)"), "{s}");
        assert!(s.contains("`moat sessions rm agent1`"), "{s}");
        assert!(s.contains("workspace stays"), "{s}");
        let w = Wedge::Memory {
            working_set: 2 << 30,
            limit: 2 << 30,
            shmem: 1 << 30,
        };
        let s = w.sentence("a");
        assert!(
            s.contains("(2 GiB of 2 GiB in use, 1 GiB of it in tmpfs"),
            "{s}"
        );
    }

    #[test]
    fn df_output() {
        let text = "Filesystem     1024-blocks   Used Available Capacity Mounted on\n\
                    tmpfs               851968 851968         0     100% /tmp\n\
                    shm                  65536      0     65536       0% /dev/shm\n\
                    garbage line\n\
                    tmpfs x y z w /v\n";
        assert_eq!(
            parse_df(text),
            vec![
                TmpfsUse {
                    path: "/tmp".into(),
                    used: 832 * MIB,
                    size: 832 * MIB
                },
                TmpfsUse {
                    path: "/dev/shm".into(),
                    used: 0,
                    size: 64 * MIB
                },
            ]
        );
    }

    #[test]
    fn report_lines() {
        let h = Health {
            container: "moat-a".into(),
            state: Some("running".into()),
            usage: Some(usage(100 * MIB, 512)),
            counters: Some(Counters {
                oom_kills: 0,
                pids_refused: 1801,
            }),
            tmpfs: vec![TmpfsUse {
                path: "/tmp".into(),
                used: MIB,
                size: 832 * MIB,
            }],
            tmpfs_error: None,
        };
        let lines = h.lines("a");
        let text: Vec<&str> = lines.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(text[0], "session a: container moat-a is running");
        assert!(text.contains(&"processes 512 of 512"), "{text:?}");
        assert!(text.iter().any(|t| t.contains("1801 fork(s) refused")));
        assert!(
            text.contains(&"tmpfs /tmp holds 1 MiB of 832 MiB"),
            "{text:?}"
        );
        let last = lines.last().unwrap();
        assert!(!last.0 && last.1.starts_with("wedged: "), "{last:?}");
        let missing = Health {
            container: "moat-b".into(),
            ..Default::default()
        };
        assert_eq!(
            missing.lines("b"),
            vec![(
                true,
                "session b: no container (moat-b); the next command creates it".to_string()
            )]
        );
    }
}
