//! The small texts and details the actions and the log pager share.

use crate::contract::{Status, ToolResult};
use crate::process::Proc;

/// A failed call: its text, `details.status = "failed"`.
pub(super) fn failed(text: impl Into<String>) -> ToolResult {
    ToolResult::failed(text)
}

/// `running`, `completed` or `failed`: the status of `p` in every result about it.
pub(super) fn status_of(p: &Proc) -> Status {
    match p.exit() {
        None => Status::Running,
        Some(_) if p.succeeded() => Status::Completed,
        Some(_) => Status::Failed,
    }
}

/// The last line of a poll: how the process ended, or that it still runs.
pub(super) fn exit_line(p: &Proc) -> String {
    match p.exit() {
        None => "Process still running.".into(),
        Some(e) if e.timed_out => format!(
            "Process timed out after {} seconds and was ended ({}).",
            p.info.timeout_secs.unwrap_or(0),
            e.signal.as_deref().unwrap_or("SIGTERM")
        ),
        Some(e) => match (&e.signal, e.code) {
            (Some(s), _) => format!("Process exited with signal {s}."),
            (None, Some(c)) => format!("Process exited with code {c}."),
            (None, None) => "Process exited.".into(),
        },
    }
}

/// `42s`, `3m5s`, `2h10m`: a runtime as `list` shows it.
pub(super) fn runtime_text(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    }
}

/// `64 MiB` for a byte count (whole units only; the exact count otherwise).
pub(super) fn human_bytes(n: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}
