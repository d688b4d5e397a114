//! What agents and session streams are told about approvals (docs/approvals.md, "Approvals").

use serde_json::json;

use crate::contract::ToolResult;
use crate::process::ExitInfo;
use crate::store::ApprovalRow;

/// The `approval-pending` result, returned at once. `display` is the command as shown
/// (escaped, secrets replaced, never truncated).
pub fn pending_result(row: &ApprovalRow, display: &str, cwd: &str) -> ToolResult {
    let slug: String = row.id.chars().take(8).collect();
    let host = row.target.machine();
    let allowed: Vec<&str> = row.allowed.split(',').collect();
    let text = format!(
        "Approval required (id {slug}). Approve to run; updates will arrive after completion.\n\
         Host: {host}\nCWD: {}\nCommand: {display}\nReason: {}\n\
         An operator decides with `moat approvals approve {slug}` (or `deny`); this tool cannot.",
        crate::policy::escape_display(cwd),
        crate::policy::escape_display(&row.reason),
    );
    ToolResult::new(
        text,
        json!({
            "status": "approval-pending",
            "approvalId": row.id,
            "approvalSlug": slug,
            "expiresAtMs": row.expires_at_ms,
            "host": host,
            "command": display,
            "cwd": cwd,
            "allowedDecisions": allowed,
            "reason": row.reason,
        }),
    )
}

/// `Exec finished (host id=<id>, session=<pid>, code N)` and the compacted output tail.
pub fn finished_event(row: &ApprovalRow, process: &str, exit: &ExitInfo, tail: &str) -> String {
    let label = if exit.timed_out {
        "timeout".to_string()
    } else if let Some(sig) = &exit.signal {
        format!("signal {sig}")
    } else {
        match exit.code {
            Some(c) => format!("code {c}"),
            None => "code ?".into(),
        }
    };
    let head = format!(
        "Exec finished ({} id={}, session={process}, {label})",
        row.target.machine(),
        row.id
    );
    let tail = tail.split_whitespace().collect::<Vec<_>>().join(" ");
    if tail.is_empty() {
        head
    } else {
        format!("{head}\n{tail}")
    }
}

/// `Exec denied (host id=<id>, <reason>): <command>`.
pub fn denied_event(row: &ApprovalRow, reason: &str, display: &str) -> String {
    format!(
        "Exec denied ({} id={}, {reason}): {display}",
        row.target.machine(),
        row.id
    )
}

/// `Exec running (host id=<id>, session=<pid>, >Ns): <command>`, once.
pub fn running_event(row: &ApprovalRow, process: &str, secs: u64, display: &str) -> String {
    format!(
        "Exec running ({} id={}, session={process}, >{secs}s): {display}",
        row.target.machine(),
        row.id
    )
}
