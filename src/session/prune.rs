//! Removes containers nobody uses any more (README, "Configuration": `prune_idle_hours`, `prune_max_age_days`): idle longer than
//! `sandbox.prune_idle_hours`, or older than `sandbox.prune_max_age_days` (0 disables either).
//! A container with a running process is never idle. Workspaces stay on disk.

use std::collections::HashSet;

use crate::runtime::Runtime;
use crate::store::{now_ms, Store};

use super::spec::{CREATED_LABEL, MOAT_LABEL};

/// Why a container goes, or `None` when it stays. Pure, so every rule is table-tested.
pub fn prune_reason(
    created_ms: i64,
    last_used_ms: i64,
    has_running_process: bool,
    now_ms: i64,
    idle_hours: u64,
    max_age_days: u64,
) -> Option<&'static str> {
    let hour = 3_600_000i64;
    if max_age_days > 0 && created_ms > 0 && now_ms - created_ms > max_age_days as i64 * 24 * hour {
        return Some("older than sandbox.prune_max_age_days");
    }
    if idle_hours > 0 && !has_running_process && now_ms - last_used_ms > idle_hours as i64 * hour {
        return Some("idle longer than sandbox.prune_idle_hours");
    }
    None
}

/// One pass over this moat's containers; returns the names removed.
pub async fn prune_once(
    runtime: &dyn Runtime,
    store: &Store,
    idle_hours: u64,
    max_age_days: u64,
) -> Vec<String> {
    let Ok(containers) = runtime.list_containers(MOAT_LABEL).await else {
        return Vec::new();
    };
    let busy: HashSet<String> = store
        .running_processes()
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.container)
        .collect();
    let now = now_ms();
    let mut removed = Vec::new();
    for c in containers {
        let created: i64 = c
            .labels
            .get(CREATED_LABEL)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        // Only containers this moat's store knows are ours: another moat home on the same
        // engine keeps its own.
        let Some(last_used) = store.container_last_used(&c.name).ok().flatten() else {
            continue;
        };
        let Some(reason) = prune_reason(
            created,
            last_used,
            busy.contains(&c.name),
            now,
            idle_hours,
            max_age_days,
        ) else {
            continue;
        };
        tracing::info!(container = %c.name, reason, "pruning container");
        if runtime.remove_container(&c.id).await.is_ok() {
            removed.push(c.name);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        let h = 3_600_000i64;
        let now = 1000 * 24 * h;
        // (created ago, idle for, running, idle_hours, max_age_days) → pruned?
        let rows: &[(i64, i64, bool, u64, u64, bool)] = &[
            (h, h, false, 24, 7, false),
            (30 * h, 25 * h, false, 24, 7, true),
            (30 * h, 25 * h, true, 24, 7, false),
            (30 * h, 25 * h, false, 0, 7, false),
            (8 * 24 * h, h, false, 24, 7, true),
            (8 * 24 * h, h, true, 24, 7, true),
            (8 * 24 * h, h, false, 24, 0, false),
            (6 * 24 * h, 23 * h, false, 24, 7, false),
        ];
        for &(age, idle, running, ih, md, want) in rows {
            let got = prune_reason(now - age, now - idle, running, now, ih, md).is_some();
            assert_eq!(
                got, want,
                "age {age} idle {idle} running {running} {ih} {md}"
            );
        }
    }
}
