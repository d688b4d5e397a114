//! One table from how a command ended to the exit code of the moat command that waited for it
//! (README, "Exit codes of `moat exec`"): `moat exec` (a result, or an approval's outcome) and
//! `moat run` take it from here, so no path has a code of its own.

use moat::contract::{Status, ToolResult};
use moat::process::{EventKind, EventOutcome};

/// A command moat refused to run: the policy said no, an operator denied the approval, a
/// `Security Violation`, or failing elevated gates. 77 is sysexits' EX_NOPERM, apart from
/// moat's own failure (2), the shell's 126/127 and the signal codes 128 + N, so a script can
/// tell "not allowed" from "ran and failed".
pub const REFUSED: u8 = 77;

/// A command that ran out of time: what coreutils' `timeout` exits with.
pub const TIMED_OUT: u8 = 124;

/// How a command ended, whichever way the CLI learned it.
#[derive(Debug, Clone, Copy, Default)]
pub struct End<'a> {
    /// moat did not run it.
    pub refused: bool,
    /// It runs on in the background.
    pub running: bool,
    /// Its time ran out and moat ended it.
    pub timed_out: bool,
    /// It completed: exit 0 with no limit reached.
    pub completed: bool,
    /// Its own exit code, when it reported one.
    pub code: Option<i64>,
    /// `SIGKILL`, … when a signal ended it.
    pub signal: Option<&'a str>,
}

/// The exit code for `end`.
pub fn code(end: End<'_>) -> u8 {
    if end.refused {
        return REFUSED;
    }
    if end.running || end.completed {
        return 0;
    }
    if end.timed_out {
        return TIMED_OUT;
    }
    shell_status(end.code, end.signal)
}

/// A finished command's status as a shell reports it: its code, or 128 + N for a signal; 1
/// when it reported neither, or reported 0 but did not complete (a limit cut it short).
pub fn shell_status(code: Option<i64>, signal: Option<&str>) -> u8 {
    code.or_else(|| moat::process::signal_number(signal?).map(|n| 128 + n))
        .map(|c| c.clamp(1, 255))
        .unwrap_or(1) as u8
}

/// The end a tool result describes.
pub fn of_result(result: &ToolResult) -> End<'_> {
    let d = &result.details;
    End {
        refused: d.is_denied() || result.status() == Some(Status::ApprovalPending),
        running: result.status() == Some(Status::Running),
        timed_out: d.timed_out(),
        completed: result.status() == Some(Status::Completed),
        code: d.exit_code(),
        signal: d.exit_signal(),
    }
}

/// The end an approval's outcome describes; `None` while it is not an end (a running notice).
pub fn of_outcome(outcome: &EventOutcome) -> Option<End<'_>> {
    match outcome.kind {
        EventKind::Denied => Some(End {
            refused: true,
            ..End::default()
        }),
        EventKind::Finished => Some(End {
            timed_out: outcome.timed_out,
            completed: outcome.exit_code == Some(0)
                && outcome.exit_signal.is_none()
                && !outcome.timed_out,
            code: outcome.exit_code,
            signal: outcome.exit_signal.as_deref(),
            ..End::default()
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path's ends, side by side: a result and an approval's outcome that say the same
    /// thing give the same code.
    #[test]
    fn one_code_per_end_on_every_path() {
        let outcome = |code: Option<i64>, signal: Option<&str>, timed_out: bool| EventOutcome {
            kind: EventKind::Finished,
            approval_id: Some("a".into()),
            process_id: Some("p".into()),
            exit_code: code,
            exit_signal: signal.map(str::to_string),
            timed_out,
        };
        // (name, outcome of an approved command, the code)
        let rows: Vec<(&str, EventOutcome, u8)> = vec![
            ("exit 0", outcome(Some(0), None, false), 0),
            ("exit 3", outcome(Some(3), None, false), 3),
            ("signal", outcome(None, Some("SIGKILL"), false), 137),
            (
                "timeout",
                outcome(Some(143), Some("SIGTERM"), true),
                TIMED_OUT,
            ),
            ("nothing reported", outcome(None, None, false), 1),
            (
                "denied",
                EventOutcome {
                    kind: EventKind::Denied,
                    ..outcome(None, None, false)
                },
                REFUSED,
            ),
        ];
        for (name, o, want) in rows {
            assert_eq!(code(of_outcome(&o).unwrap()), want, "{name}");
        }
        let running = EventOutcome {
            kind: EventKind::Running,
            ..outcome(None, None, false)
        };
        assert!(of_outcome(&running).is_none());
        assert_eq!(shell_status(Some(0), None), 1, "0 that did not complete");
        assert_eq!(shell_status(Some(300), None), 255);
    }
}
