//! What agents and session streams are told about approvals (docs/approvals.md, "Approvals").

use super::ApprovalDecision;
use crate::contract::ExitInfo;
use crate::contract::{Decision, Details, Machine, Pending, Status, ToolResult};
use crate::store::ApprovalRow;

/// The decision as `details.allowedDecisions` spells it: the same three words.
impl From<ApprovalDecision> for Decision {
    fn from(d: ApprovalDecision) -> Self {
        match d {
            ApprovalDecision::AllowOnce => Decision::AllowOnce,
            ApprovalDecision::AllowAlways => Decision::AllowAlways,
            ApprovalDecision::Deny => Decision::Deny,
        }
    }
}

/// The `approval-pending` result, returned at once. `display` is the command as shown
/// (escaped, secrets replaced, never truncated).
pub fn pending_result(row: &ApprovalRow, display: &str, cwd: &str) -> ToolResult {
    let slug: String = row.id.chars().take(8).collect();
    let host = Machine::from(row.target);
    // The service stored the words `ApprovalDecision::as_str` wrote; one it cannot read (a
    // damaged row) could not be decided either, so it is not offered.
    let allowed = row
        .allowed
        .split(',')
        .filter_map(|d| ApprovalDecision::parse(d).ok())
        .map(Decision::from)
        .collect();
    let text = format!(
        "Approval required (id {slug}). Approve to run; updates will arrive after completion.\n\
         Host: {host}\nCWD: {}\nCommand: {display}\nReason: {}\n\
         An operator decides with `moat approvals approve {slug}` (or `deny`); this tool cannot.",
        crate::output::escape_display(cwd),
        crate::output::escape_display(&row.reason),
    );
    ToolResult::new(
        text,
        Details::Pending(Pending {
            allowed_decisions: allowed,
            approval_id: row.id.clone(),
            approval_slug: slug,
            command: display.to_string(),
            cwd: cwd.to_string(),
            expires_at_ms: row.expires_at_ms,
            host,
            reason: row.reason.clone(),
            status: Status::ApprovalPending,
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
