//! How one exec call ended, as the `outcome` label of `moat_execs_total` names it: a fixed,
//! small set, so no request can grow the series (docs/http-api.md, "Metrics").

use crate::contract::{Details, FailureKind, Status, ToolResult};

/// The outcome of an exec call: its result, or the kind of the error it failed with.
pub fn exec_outcome(result: Result<&ToolResult, FailureKind>) -> &'static str {
    let r = match result {
        Ok(r) => r,
        Err(FailureKind::Invalid) => return "invalid",
        Err(FailureKind::Internal | FailureKind::Unavailable) => return "error",
        Err(_) => return "refused",
    };
    match &r.details {
        Details::Finished(f) if f.timed_out => "timed_out",
        Details::Finished(f) if f.limit.is_some() => "limit",
        Details::Finished(_) if r.status() == Some(Status::Completed) => "completed",
        Details::Finished(_) => "failed",
        Details::Running(_) => "background",
        Details::Pending(_) => "approval_pending",
        Details::Denied(_) => "denied",
        Details::NotStarted(_) => "not_started",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{finished_result, ExitInfo};

    fn finished(code: Option<i64>, signal: Option<&str>, timed_out: bool) -> ToolResult {
        let exit = ExitInfo {
            code,
            signal: signal.map(str::to_string),
            timed_out,
            finished_at_ms: 0,
        };
        finished_result(&exit, "x".into(), false, 1, "/workspace", Some(5))
    }

    #[test]
    fn each_ending_has_its_word() {
        let rows: Vec<(Result<ToolResult, FailureKind>, &str)> = vec![
            (Ok(finished(Some(0), None, false)), "completed"),
            (Ok(finished(Some(3), None, false)), "failed"),
            (Ok(finished(None, Some("SIGKILL"), false)), "failed"),
            (Ok(finished(None, Some("SIGTERM"), true)), "timed_out"),
            (Ok(ToolResult::failed("no")), "error"),
            (Err(FailureKind::Invalid), "invalid"),
            (Err(FailureKind::Refused), "refused"),
            (Err(FailureKind::Internal), "error"),
        ];
        for (result, want) in rows {
            assert_eq!(exec_outcome(result.as_ref().map_err(|k| *k)), want);
        }
    }
}
