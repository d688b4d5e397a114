//! Removes containers nobody uses any more (README, "Configuration": `prune_idle_hours`, `prune_max_age_days`): idle longer than
//! `sandbox.prune_idle_hours`, or older than `sandbox.prune_max_age_days` (0 disables either).
//! A container with a running process is never idle. Workspaces stay on disk.

use std::collections::HashSet;

use crate::runtime::Engine;
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
    runtime: &dyn Engine,
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
    prune_egress(runtime, store).await;
    removed
}

/// Removes egress proxies and networks whose sandbox container is gone (pruned above, or
/// removed behind moat's back), when this moat's store knows that container: nothing an
/// egress session made outlives it (docs/security.md, "Network egress").
async fn prune_egress(runtime: &dyn Engine, store: &Store) {
    use crate::egress::container::EGRESS_LABEL;
    let Ok(networks) = runtime.list_networks(EGRESS_LABEL).await else {
        return;
    };
    for network in networks {
        let Some(container) = network.strip_suffix("-net") else {
            continue;
        };
        if !matches!(store.container_last_used(container), Ok(Some(_))) {
            continue;
        }
        if let Ok(None) = runtime.inspect_container(container).await {
            tracing::info!(
                container,
                "removing the egress proxy and network of a removed container"
            );
            let _ = crate::egress::lifecycle::remove(runtime, container).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn egress_parts_of_a_gone_container_are_swept() {
        use crate::egress::container::{EgressNames, EGRESS_LABEL};
        use crate::runtime::fake::{Call, FakeRuntime};
        let fake = FakeRuntime::new();
        let store = Store::in_memory().unwrap();
        let labels =
            |c: &str| std::collections::BTreeMap::from([(EGRESS_LABEL.to_string(), c.to_string())]);
        // Ours and gone; ours and still there; gone but another home's (unknown to the store).
        for c in ["moat-gone-1", "moat-here-1", "moat-other-1"] {
            let n = EgressNames::for_container(c);
            fake.ensure_network(&n.network, &labels(c)).await.unwrap();
        }
        store
            .touch_session("gone", "moat-gone-1", now_ms())
            .unwrap();
        store
            .touch_session("here", "moat-here-1", now_ms())
            .unwrap();
        let spec = crate::session::build_spec(
            &crate::config::SandboxConfig::default(),
            "moat-here-1",
            "here",
            std::path::Path::new("/w"),
            std::path::Path::new("/r"),
            now_ms(),
        );
        fake.create_container(&spec).await.unwrap();
        prune_egress(&fake, &store).await;
        let calls = fake.calls();
        assert!(
            calls.contains(&Call::RemoveNetwork("moat-gone-1-net".into())),
            "{calls:?}"
        );
        assert!(
            calls.contains(&Call::Remove("moat-gone-1-proxy".into())),
            "{calls:?}"
        );
        assert!(!calls.contains(&Call::RemoveNetwork("moat-here-1-net".into())));
        assert!(!calls.contains(&Call::RemoveNetwork("moat-other-1-net".into())));
    }

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
