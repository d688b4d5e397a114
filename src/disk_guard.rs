//! Keeps every session within `sandbox.workspace_max_bytes` (docs/security.md, "Disk bound").
//!
//! The workspace and run directory are host directories on the operator's disk, often the one
//! that holds the state database, and the engine bounds neither (a bind mount has no quota
//! without root-only host features such as project quotas). So one task measures, for each
//! container in use, the allocated bytes of both with a bounded, symlink-safe walk, and when
//! the total is over the bound and still growing it ends every process in the container
//! (`session::disk_stop`), not only the commands moat follows: a writer that left its command
//! is stopped too. The commands' output, every later command's result, the audit log and
//! `moat doctor --session` say why and how to free space. Commands that free space still run.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::process::Registry;
use crate::runtime::{Engine, Runtime};
use crate::session::disk::{allocated, Usage, Verdict, WalkLimits, Watch};
use crate::session::disk_image::{DiskImage, DiskUsage};
use crate::session::disk_stop::{self, Stopped};
use crate::session::Sessions;
use crate::store::{AuditRow, Store};

/// Shortest pause between two measurements; it grows with the walk time (see `pause`).
const MIN_INTERVAL: Duration = Duration::from_millis(25);
/// Bounds of one walk: a tree past them is measured as a lower bound.
const WALK: WalkLimits = WalkLimits {
    max_entries: 1_000_000,
    max_time: Duration::from_secs(5),
};
/// The audit log's kind for a stop (docs/security.md, "Disk bound").
pub const AUDIT_KIND: &str = "disk-stop";

/// Starts the guard on the current tokio runtime (if any); it ends with the app. `engine`
/// runs the stop: its own exec, never the helper the sandbox can trace.
pub fn spawn(
    sessions: &Arc<Sessions>,
    registry: &Arc<Registry>,
    engine: &Arc<dyn Runtime>,
    limit: u64,
) {
    if limit == 0 {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    handle.spawn(run(
        Arc::downgrade(sessions),
        Arc::downgrade(registry),
        engine.clone(),
        limit,
    ));
}

/// One container's state between measurements.
#[derive(Default)]
struct Guarded {
    /// When to stop it (`session::disk::Watch`).
    watch: Watch,
    /// How the last stop went, for the warning every command gets while it stays over.
    last_stop: Option<String>,
}

async fn run(
    sessions: Weak<Sessions>,
    registry: Weak<Registry>,
    engine: Arc<dyn Runtime>,
    limit: u64,
) {
    let mut guarded: HashMap<String, Guarded> = HashMap::new();
    let mut interval = MIN_INTERVAL;
    loop {
        tokio::time::sleep(interval).await;
        let Some(in_use) = sessions.upgrade().map(|s| s.in_use()) else {
            return;
        };
        // Only the walks count for the pause: a stop's engine round trips must not slow the
        // next measurement (the one that sees whether the stop held).
        let mut walking = Duration::ZERO;
        for c in in_use {
            if let Some(disk) = &c.disk {
                // The kernel holds this one; say so when it is full.
                let warning = disk
                    .usage()
                    .filter(|u| u.available < FULL_MARGIN)
                    .map(full_warning);
                if let Some(sessions) = sessions.upgrade() {
                    sessions.set_over_disk(&c.name, warning);
                }
                continue;
            }
            let (workspace, run_dir) = (c.workspace.clone(), c.run_dir.clone());
            let walk_began = Instant::now();
            let measured = tokio::task::spawn_blocking(move || {
                let ws = allocated(&workspace, WALK).ok();
                let run = allocated(&run_dir, WALK).ok();
                (ws, run)
            })
            .await;
            walking += walk_began.elapsed();
            let Ok((ws, run)) = measured else { continue };
            let total = [ws, run].iter().flatten().map(|u: &Usage| u.bytes).sum();
            let g = guarded.entry(c.name.clone()).or_default();
            let verdict = g.watch.judge(total, limit);
            if matches!(verdict, Verdict::Stop | Verdict::StopContainer) {
                let (Some(registry), Some(sessions)) = (registry.upgrade(), sessions.upgrade())
                else {
                    return;
                };
                let began = Instant::now();
                // Noted first, so each command's output says why before its end is recorded.
                let procs = registry.note_running(&c.name, &stop_note(total, limit));
                let stopped = match verdict {
                    Verdict::Stop => disk_stop::stop_all(engine.as_ref(), &c.name).await,
                    _ => {
                        let why = "it grew again after every process in it was ended, without having been back at or under the bound".to_string();
                        disk_stop::kill_container(engine.as_ref(), &c.name, why).await
                    }
                };
                let killed = matches!(stopped, Ok(Stopped::Container { .. }));
                g.watch.stopped(total, killed);
                if killed {
                    // Stopped: the next command starts it again (`Sessions::ensure`).
                    sessions.forget_container(&c.name);
                }
                // moat's own commands also get the kill they would get from `process kill`,
                // so they end even if the stop above could not be carried out.
                registry.end(&procs);
                let took = began.elapsed();
                match stopped {
                    Ok(how) => {
                        let said = how.describe();
                        tracing::warn!(container = %c.name, bytes = total, limit, commands = procs.len(), took_ms = took.as_millis() as u64, "session over sandbox.workspace_max_bytes: {said}");
                        let detail = audit_detail(&c.name, total, limit, &said);
                        let _ =
                            sessions
                                .store()
                                .audit(AUDIT_KIND, None, Some(&c.key), "moat", &detail);
                        g.last_stop = Some(said);
                    }
                    Err(e) => {
                        tracing::error!(container = %c.name, bytes = total, limit, error = %e, "session over sandbox.workspace_max_bytes: failed to stop it");
                    }
                }
            }
            if verdict == Verdict::Within {
                g.last_stop = None;
            }
            if let Some(sessions) = sessions.upgrade() {
                let warning = (verdict != Verdict::Within)
                    .then(|| over_warning(total, limit, g.last_stop.as_deref()));
                sessions.set_over_disk(&c.name, warning);
            }
        }
        interval = pause(walking);
    }
}

/// Measuring takes at most about a fifth of the time.
fn pause(walk: Duration) -> Duration {
    (walk * 4).max(MIN_INTERVAL)
}

/// What a stopped command's output ends with.
pub fn stop_note(total: u64, limit: u64) -> String {
    format!(
        "\n[moat] stopped: the session's workspace and run directory hold {}, over sandbox.workspace_max_bytes ({}), and were still growing, so every process in the session's container was ended. Free space (for example `rm` large files under /workspace; commands that free space run) and run the command again; while the session is over the limit, any command that makes it grow ends every process in the container again.\n",
        human(total),
        human(limit)
    )
}

/// What every command gets while its session is over the bound; `last_stop` says how the
/// last stop went (`Stopped::describe`).
pub fn over_warning(total: u64, limit: u64, last_stop: Option<&str>) -> String {
    let stop = last_stop
        .map(|s| format!("; when it grew past it, {s}"))
        .unwrap_or_default();
    format!(
        "the session's workspace and run directory hold {}, over sandbox.workspace_max_bytes ({}){stop}. Free space (for example `rm` large files under /workspace; commands that free space run); until then any command that makes it grow ends every process in the session's container",
        human(total),
        human(limit)
    )
}

/// What every command gets while its session's own filesystem is full.
pub fn full_warning(u: DiskUsage) -> String {
    format!(
        "the session's own filesystem is full ({} of {}, sandbox.workspace_max_bytes): writes under /workspace fail with \"No space left on device\". Free space (for example `rm` large files under /workspace)",
        human(u.used),
        human(u.size)
    )
}

/// The audit log's detail of a stop.
fn audit_detail(container: &str, total: u64, limit: u64, how: &str) -> String {
    format!(
        "container {container}: the workspace and run directory held {}, over sandbox.workspace_max_bytes ({}), and grew: {how}",
        human(total),
        human(limit)
    )
}

/// `moat doctor --session`: the session's disk use against the bound now, and the last stop
/// the bound made (from the audit log), one `(fine, line)` each.
pub async fn doctor_report(
    engine: &dyn Engine,
    store: &Store,
    disk: &DiskImage,
    (container, key, session): (&str, &str, &str),
    limit: u64,
) -> Vec<(bool, String)> {
    if limit == 0 {
        return vec![(
            true,
            "disk bound: off (sandbox.workspace_max_bytes = 0)".into(),
        )];
    }
    if let Some(u) = disk.usage() {
        return vec![disk_line(session, u)];
    }
    let mut dirs = Vec::new();
    if let Ok(Some(info)) = engine.inspect_container(container).await {
        if let Ok(Some(mounts)) = engine.host_mounts(&info.id).await {
            dirs = mounts
                .into_iter()
                .filter(|m| m.kind == "bind")
                .filter(|m| {
                    m.target == crate::contract::WORKSPACE_MOUNT
                        || m.target == crate::session::RUN_MOUNT
                })
                .map(|m| std::path::PathBuf::from(m.source))
                .collect();
        }
    }
    let usage = (!dirs.is_empty()).then(|| {
        dirs.iter().filter_map(|d| allocated(d, WALK).ok()).fold(
            Usage {
                bytes: 0,
                complete: true,
            },
            |a, u| Usage {
                bytes: a.bytes + u.bytes,
                complete: a.complete && u.complete,
            },
        )
    });
    let last = store
        .audit_filtered(Some(key), Some(AUDIT_KIND), 1)
        .ok()
        .and_then(|rows| rows.into_iter().next());
    doctor_lines(session, usage, limit, last.as_ref(), crate::store::now_ms())
}

/// [`doctor_report`] for a session with its own filesystem: the kernel's account. Pure.
fn disk_line(session: &str, u: DiskUsage) -> (bool, String) {
    let full = u.available < FULL_MARGIN;
    let line = format!(
        "disk: the session's own filesystem holds {} of {} (sandbox.workspace_max_bytes, made when the session's disk was; the kernel refuses writes past it)",
        human(u.used),
        human(u.size)
    );
    if full {
        (false, format!("{line}: it is full, so commands that write fail with \"No space left on device\". Free space: `moat exec --session {session} -- rm /workspace/BIG-FILE`"))
    } else {
        (true, line)
    }
}

/// A disk with less than this left counts as full.
const FULL_MARGIN: u64 = 1 << 20;

/// The lines of [`doctor_report`]. Pure.
fn doctor_lines(
    session: &str,
    usage: Option<Usage>,
    limit: u64,
    last: Option<&AuditRow>,
    now_ms: i64,
) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let over = match usage {
        None => {
            out.push((
                true,
                "disk: no workspace or run directory of the session's container to measure"
                    .to_string(),
            ));
            false
        }
        Some(u) => {
            let at_least = if u.complete { "" } else { "at least " };
            if u.bytes <= limit {
                out.push((
                    true,
                    format!(
                        "disk: the workspace and run directory hold {at_least}{} of sandbox.workspace_max_bytes ({})",
                        human(u.bytes),
                        human(limit)
                    ),
                ));
                false
            } else {
                out.push((
                    false,
                    format!(
                        "disk: the workspace and run directory hold {at_least}{}, over sandbox.workspace_max_bytes ({}): any command that makes it grow ends every process in the session's container. Free space: commands that free space run, for example `moat exec --session {session} -- rm /workspace/BIG-FILE`; the session is back to normal once it is at or under the bound",
                        human(u.bytes),
                        human(limit)
                    ),
                ));
                true
            }
        }
    };
    if let Some(row) = last {
        let ago = (now_ms - row.at_ms).max(0) / 1000;
        out.push((
            !over,
            format!(
                "disk bound: stopped the session {ago} s ago: {}",
                crate::output::escape_display(&row.detail)
            ),
        ));
    }
    out
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
        assert!(n.contains("every process in the session's container was ended"));
        let w = over_warning(1_300 << 20, 1 << 30, None);
        assert!(w.contains("sandbox.workspace_max_bytes (1.0 GiB)") && w.contains("rm"));
        let how = Stopped::Inside { ended: 4 }.describe();
        let w = over_warning(1_300 << 20, 1 << 30, Some(&how));
        assert!(w.contains("when it grew past it, moat ended every process in the session's container (4 ended"), "{w}");
        assert_eq!(human(512), "512 bytes");
        assert_eq!(pause(Duration::from_millis(1)), MIN_INTERVAL);
        assert_eq!(pause(Duration::from_secs(1)), Duration::from_secs(4));
    }

    #[test]
    fn doctor_names_the_stop_and_the_way_out() {
        const M: u64 = 1 << 20;
        let row = AuditRow {
            id: 1,
            at_ms: 10_000,
            kind: AUDIT_KIND.into(),
            approval_id: None,
            session: Some("s".into()),
            actor: "moat".into(),
            detail: audit_detail(
                "moat-s-1",
                300 * M,
                64 * M,
                &Stopped::Inside { ended: 2 }.describe(),
            ),
        };
        let over = Usage {
            bytes: 300 * M,
            complete: true,
        };
        let lines = doctor_lines("s", Some(over), 64 * M, Some(&row), 70_000);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            !lines[0].0
                && lines[0]
                    .1
                    .contains("over sandbox.workspace_max_bytes (64.0 MiB)")
        );
        assert!(
            lines[0].1.contains("moat exec --session s -- rm"),
            "{}",
            lines[0].1
        );
        assert!(
            !lines[1].0
                && lines[1]
                    .1
                    .starts_with("disk bound: stopped the session 60 s ago: container moat-s-1"),
            "{}",
            lines[1].1
        );
        assert!(lines[1].1.contains("2 ended"), "{}", lines[1].1);
        // Under the bound again: fine, the stop stays as history.
        let under = Usage {
            bytes: 10 * M,
            complete: false,
        };
        let lines = doctor_lines("s", Some(under), 64 * M, Some(&row), 70_000);
        assert!(lines.iter().all(|(fine, _)| *fine), "{lines:?}");
        assert!(
            lines[0].1.contains("at least 10.0 MiB of"),
            "{}",
            lines[0].1
        );
        assert_eq!(doctor_lines("s", Some(under), 64 * M, None, 0).len(), 1);
    }
}
