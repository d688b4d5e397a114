//! Which sandbox limit, if any, ended or cut short a command, and how its result says so
//! (docs/mcp.md, "Limits in results"; docs/security.md, "Sandbox limits").
//!
//! A command the OOM killer or a removed container ended looks like any other SIGKILL from
//! the inside, so the evidence comes from outside it: the container cgroup's counters read
//! before and after the command, whether moat had to end processes it left behind, and what
//! the engine says about the container.

use crate::contract::{LimitHit, LimitKind};
use crate::session::cgroup::Counters;

/// What became of the container by the time the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContainerFate {
    /// Still running, or not looked at (the command ended normally).
    #[default]
    Running,
    /// The engine no longer knows it.
    Removed,
    /// It exists but does not run.
    Stopped,
    /// It runs, but started after the command did: it was restarted under it.
    Restarted,
}

/// Everything known about how a command ended, for [`classify`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence {
    /// The container's counters just before the command started (`None`: unknown, e.g. a
    /// process re-attached after a restart, or a moat that cannot see the cgroups).
    pub before: Option<Counters>,
    /// The counters once it ended (and its leftovers were ended).
    pub after: Option<Counters>,
    /// Exit code 0, no signal, no timeout.
    pub succeeded: bool,
    /// moat ended processes the command left running in its group.
    pub leftovers_ended: bool,
    /// What the engine says about the container.
    pub container: ContainerFate,
    /// The memory limit in force, bytes.
    pub memory_limit: Option<u64>,
    /// The pids limit in force.
    pub pids_limit: Option<u64>,
}

/// The limit to report for a command, if any.
///
/// - A container that went away (removed, stopped, restarted) explains everything else, so it
///   comes first.
/// - Memory: the command did not succeed and the OOM killer struck in the container while it
///   ran. A command that succeeded is not blamed: the killer picks the largest process, which
///   may have been another command's.
/// - Pids: forks were refused while it ran, and the command either did not succeed or left
///   processes behind that moat had to end (a fork bomb's first shell exits 0 at once).
pub fn classify(e: &Evidence) -> Option<LimitHit> {
    match e.container {
        ContainerFate::Removed => {
            return Some(LimitHit {
                kind: LimitKind::ContainerRemoved,
                value: None,
            })
        }
        ContainerFate::Stopped => {
            return Some(LimitHit {
                kind: LimitKind::ContainerStopped,
                value: None,
            })
        }
        ContainerFate::Restarted => {
            return Some(LimitHit {
                kind: LimitKind::ContainerRestarted,
                value: None,
            })
        }
        ContainerFate::Running => {}
    }
    let (before, after) = (e.before?, e.after?);
    if !e.succeeded && after.oom_kills > before.oom_kills {
        return Some(LimitHit {
            kind: LimitKind::Memory,
            value: e.memory_limit,
        });
    }
    if (!e.succeeded || e.leftovers_ended) && after.pids_refused > before.pids_refused {
        return Some(LimitHit {
            kind: LimitKind::Pids,
            value: e.pids_limit,
        });
    }
    None
}

/// What a foreground result says when moat ended processes its command left running.
pub const LEFTOVERS_NOTE: &str = "Processes the command left running were ended when it finished; start a command with background=true to keep it running.";

#[cfg(test)]
mod tests {
    use super::*;

    fn c(oom_kills: u64, pids_refused: u64) -> Option<Counters> {
        Some(Counters {
            oom_kills,
            pids_refused,
        })
    }

    #[test]
    fn classification() {
        use ContainerFate::*;
        use LimitKind::*;
        // (before, after, succeeded, leftovers ended, container) → limit
        type Row = (
            Option<Counters>,
            Option<Counters>,
            bool,
            bool,
            ContainerFate,
            Option<LimitKind>,
        );
        let rows: &[Row] = &[
            // Nothing happened.
            (c(0, 0), c(0, 0), true, false, Running, None),
            (c(0, 0), c(0, 0), false, false, Running, None),
            // The OOM killer struck and the command died of it.
            (c(1, 0), c(2, 0), false, false, Running, Some(Memory)),
            // ... but a command that succeeded was not its victim.
            (c(1, 0), c(2, 0), true, false, Running, None),
            // A fork bomb: the first shell exits 0, its copies hit the limit and were ended.
            (c(0, 5), c(0, 900), true, true, Running, Some(Pids)),
            // A command that failed while forks were refused.
            (c(0, 5), c(0, 6), false, false, Running, Some(Pids)),
            // Forks refused, but the command succeeded and left nothing: not blamed.
            (c(0, 5), c(0, 6), true, false, Running, None),
            // Both: memory wins (it killed the command).
            (c(0, 0), c(1, 1), false, false, Running, Some(Memory)),
            // Without a baseline nothing is claimed.
            (None, c(3, 3), false, true, Running, None),
            (c(0, 0), None, false, true, Running, None),
            // A container that went away explains the rest.
            (c(0, 0), None, false, false, Removed, Some(ContainerRemoved)),
            (None, None, false, false, Removed, Some(ContainerRemoved)),
            (
                c(0, 0),
                c(1, 0),
                false,
                false,
                Stopped,
                Some(ContainerStopped),
            ),
            // A restart explains it too, counters or not (the cgroup's counters start again
            // with the container).
            (
                c(0, 0),
                c(0, 0),
                false,
                false,
                Restarted,
                Some(ContainerRestarted),
            ),
            (
                None,
                None,
                false,
                false,
                Restarted,
                Some(ContainerRestarted),
            ),
            (
                c(0, 0),
                c(1, 1),
                false,
                true,
                Restarted,
                Some(ContainerRestarted),
            ),
        ];
        for (i, (before, after, succeeded, leftovers, fate, want)) in rows.iter().enumerate() {
            let e = Evidence {
                before: *before,
                after: *after,
                succeeded: *succeeded,
                leftovers_ended: *leftovers,
                container: *fate,
                memory_limit: Some(2 << 30),
                pids_limit: Some(512),
            };
            assert_eq!(classify(&e).map(|h| h.kind), *want, "row {i}");
        }
    }

    #[test]
    fn sentences_name_the_limit() {
        let rows = [
            (
                LimitKind::Memory,
                Some(2u64 << 30),
                "memory limit (2 GiB) was reached",
            ),
            (LimitKind::Memory, None, "memory limit was reached"),
            (
                LimitKind::Pids,
                Some(512),
                "process limit (512) was reached",
            ),
            (
                LimitKind::ContainerRemoved,
                None,
                "container was removed while the command ran",
            ),
            (LimitKind::ContainerStopped, None, "container stopped"),
            (
                LimitKind::ContainerRestarted,
                None,
                "container was restarted while the command ran",
            ),
        ];
        for (kind, value, needle) in rows {
            let s = LimitHit { kind, value }.sentence();
            assert!(s.contains(needle), "{s}");
            assert!(s.ends_with('.') && s.starts_with("The "), "{s}");
        }
    }
}
