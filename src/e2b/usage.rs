//! E2B's metrics of a sandbox (docs/e2b.md, "Metrics"): samples of the engine's stats and of
//! the sandbox's own disk, taken when asked.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::control::{owned, owner, rfc3339, ApiError};
use super::sandboxes::{Sample, Sandbox};
use super::state::E2bState;
use crate::store::now_ms;

/// How old the newest sample may be and still answer a metrics call: E2B collects one every
/// 5 s, and the engine takes a second for each.
const SAMPLE_EVERY_MS: i64 = 5_000;

/// The query of `metrics`: seconds since the epoch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MetricsQuery {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

/// `GET /sandboxes/{id}/metrics?start=&end=`: the samples taken within the range (seconds,
/// both ends included; the sandbox's life by default). A call whose range reaches now takes a
/// new sample unless one is younger than 5 s: moat samples when asked, not in the background,
/// so the series holds the samples callers asked for (docs/e2b.md, "Metrics").
pub async fn metrics(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<MetricsQuery>,
) -> Result<Json<Value>, ApiError> {
    let owner = owner(&state, &headers)?;
    let sandbox = owned(&state, &owner, &id)?;
    let now = now_ms();
    let from_ms = query.start.map_or(i64::MIN, |s| s.saturating_mul(1000));
    // A range's end is a whole second: the samples of that second are in it.
    let to_ms = query
        .end
        .map_or(i64::MAX, |e| e.saturating_mul(1000).saturating_add(999));
    if to_ms >= now - SAMPLE_EVERY_MS && sandbox.sample_since(now - SAMPLE_EVERY_MS).is_none() {
        let sample = take_sample(&state, &sandbox).await?;
        sandbox.add_sample(sample);
    }
    let samples = sandbox
        .samples_within(from_ms, to_ms)
        .iter()
        .map(sample_json)
        .collect();
    Ok(Json(Value::Array(samples)))
}

/// One sample: the engine's figures for the container, the session's disk as the host sees it.
async fn take_sample(state: &E2bState, sandbox: &Sandbox) -> Result<Sample, ApiError> {
    let fail = |e: String| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to read the sandbox's metrics: {e}"),
        )
    };
    let (_, names) = state.app.sessions.names(&sandbox.session);
    let stats = state
        .app
        .engine
        .container_stats(&names.name)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let sandbox_config = &state.app.config.sandbox;
    let cpu_count = sandbox_config.cpus.ceil().max(1.0) as u64;
    let workspace = state.app.sessions.workspace_dir(&names.slug);
    let (disk_used, disk_total) = disk_of(&workspace, sandbox_config.workspace_max());
    Ok(Sample {
        at_ms: now_ms(),
        cpu_count,
        cpu_used_pct: (stats.cpu_pct / cpu_count as f64).clamp(0.0, 100.0),
        mem_used: stats.mem_used,
        mem_total: stats.mem_total,
        mem_cache: stats.mem_cache,
        disk_used,
        disk_total,
    })
}

/// Used and total bytes of the workspace: its own filesystem's (docs/security.md, "Disk
/// bound"), or, where the workspace is a directory of the host's, its bound and what a bounded
/// walk of it finds.
fn disk_of(workspace: &std::path::Path, bound: u64) -> (u64, u64) {
    if let Ok(fs) = nix::sys::statvfs::statvfs(workspace) {
        let unit = fs.fragment_size();
        let total = fs.blocks() * unit;
        let used = total.saturating_sub(fs.blocks_free() * unit);
        if total <= bound.saturating_add(bound / 10) {
            return (used, total);
        }
    }
    let limits = crate::session::disk::WalkLimits {
        max_entries: 100_000,
        max_time: std::time::Duration::from_millis(500),
    };
    let used = crate::session::disk::allocated(workspace, limits).map_or(0, |u| u.bytes);
    (used, bound)
}

/// `SandboxMetric`.
fn sample_json(s: &Sample) -> Value {
    json!({
        "timestamp": rfc3339(s.at_ms),
        "timestampUnix": s.at_ms / 1000,
        "cpuCount": s.cpu_count,
        "cpuUsedPct": s.cpu_used_pct,
        "memUsed": s.mem_used,
        "memTotal": s.mem_total,
        "memCache": s.mem_cache,
        "diskUsed": s.disk_used,
        "diskTotal": s.disk_total,
    })
}
