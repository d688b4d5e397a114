//! Keeps every session within `sandbox.workspace_max_bytes` (docs/security.md, "Disk bound").
//!
//! The workspace and run directory are host directories on the operator's disk, often the one
//! that holds the state database, and the engine bounds neither (a bind mount has no quota
//! without root-only host features such as project quotas). So one task measures, for each
//! container in use, the allocated bytes of both with a bounded, symlink-safe walk, and ends
//! the container's running commands when the total is over the bound and still growing; the
//! commands' output says why and how to free space. Commands that free space still run.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::process::Registry;
use crate::session::disk::{allocated, must_stop, Usage, WalkLimits};
use crate::session::Sessions;

/// Shortest pause between two measurements; it grows with the walk time (see `pause`).
const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Bounds of one walk: a tree past them is measured as a lower bound.
const WALK: WalkLimits = WalkLimits {
    max_entries: 1_000_000,
    max_time: Duration::from_secs(5),
};

/// Starts the guard on the current tokio runtime (if any); it ends with the app.
pub fn spawn(sessions: &Arc<Sessions>, registry: &Arc<Registry>, limit: u64) {
    if limit == 0 {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    handle.spawn(run(
        Arc::downgrade(sessions),
        Arc::downgrade(registry),
        limit,
    ));
}

async fn run(sessions: Weak<Sessions>, registry: Weak<Registry>, limit: u64) {
    let mut floors: HashMap<String, Option<u64>> = HashMap::new();
    let mut interval = MIN_INTERVAL;
    loop {
        tokio::time::sleep(interval).await;
        let Some(in_use) = sessions.upgrade().map(|s| s.in_use()) else {
            return;
        };
        let started = Instant::now();
        for (name, workspace, run_dir) in in_use {
            let measured = tokio::task::spawn_blocking(move || {
                let ws = allocated(&workspace, WALK).ok();
                let run = allocated(&run_dir, WALK).ok();
                (ws, run)
            })
            .await;
            let Ok((ws, run)) = measured else { continue };
            let total = [ws, run].iter().flatten().map(|u: &Usage| u.bytes).sum();
            let floor = floors.entry(name.clone()).or_default();
            let stop = must_stop(total, limit, floor);
            if let Some(sessions) = sessions.upgrade() {
                sessions.set_over_disk(&name, floor.map(|_| over_warning(total, limit)));
            }
            if stop {
                let Some(registry) = registry.upgrade() else {
                    return;
                };
                let note = stop_note(total, limit);
                let n = registry.stop_container(&name, &note);
                tracing::warn!(container = %name, bytes = total, limit, stopped = n, "session over sandbox.workspace_max_bytes");
            }
        }
        interval = pause(started.elapsed());
    }
}

/// Measuring takes at most about a fifth of the time.
fn pause(walk: Duration) -> Duration {
    (walk * 4).max(MIN_INTERVAL)
}

/// What a stopped command's output ends with.
pub fn stop_note(total: u64, limit: u64) -> String {
    format!(
        "\n[moat] stopped: the session's workspace and run directory hold {}, over sandbox.workspace_max_bytes ({}). Free space (for example `rm` large files under /workspace) and run the command again; while the session is over the limit, any command that makes it grow is stopped.\n",
        human(total),
        human(limit)
    )
}

/// What every command gets while its session is over the bound.
pub fn over_warning(total: u64, limit: u64) -> String {
    format!(
        "the session's workspace and run directory hold {}, over sandbox.workspace_max_bytes ({}): free space (for example `rm` large files under /workspace); until then any command that makes it grow is stopped",
        human(total),
        human(limit)
    )
}

fn human(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{:.1} {unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_name_the_limit_and_the_fix() {
        let n = stop_note(1_300 << 20, 1 << 30);
        assert!(n.contains("1.3 GiB") && n.contains("sandbox.workspace_max_bytes (1.0 GiB)"));
        assert!(n.contains("rm"));
        let w = over_warning(1_300 << 20, 1 << 30);
        assert!(w.contains("sandbox.workspace_max_bytes (1.0 GiB)") && w.contains("rm"));
        assert_eq!(human(512), "512 bytes");
        assert_eq!(pause(Duration::from_millis(10)), MIN_INTERVAL);
        assert_eq!(pause(Duration::from_secs(1)), Duration::from_secs(4));
    }
}
