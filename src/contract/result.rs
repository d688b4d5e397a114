//! The tool result object (docs/mcp.md, "Results"): `{content: [{type: "text", text}], details}`,
//! `details` typed ([`Details`]) until an edge turns it into JSON.

use serde::{Deserialize, Serialize};

use super::details::{Details, Finished, Running};
use super::exit::{ExitInfo, LimitHit};
use super::status::{Limit, Status};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolResult {
    /// One text block: what the model (and the CLI) reads.
    pub content: Vec<Content>,
    /// The same outcome as data, for the edges and for clients that read fields.
    pub details: Details,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Content {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text itself.
    pub text: String,
}

impl ToolResult {
    pub fn new(text: String, details: Details) -> Self {
        Self {
            content: vec![Content {
                kind: "text".into(),
                text,
            }],
            details,
        }
    }

    /// A call that failed with `text` and nothing more to say (`{"status": "failed"}`).
    pub fn failed(text: impl Into<String>) -> Self {
        Self::new(text.into(), Details::bare(Status::Failed))
    }

    /// A call that did what it was asked, with nothing more to say.
    pub fn completed(text: impl Into<String>) -> Self {
        Self::new(text.into(), Details::bare(Status::Completed))
    }

    pub fn text(&self) -> &str {
        self.content.first().map(|c| c.text.as_str()).unwrap_or("")
    }

    /// `details.status`; `None` only for a result from a build with statuses this one does
    /// not know.
    pub fn status(&self) -> Option<Status> {
        self.details.status()
    }

    /// Failed statuses map to MCP `isError` and a non-zero CLI exit.
    pub fn is_error(&self) -> bool {
        matches!(self.status(), Some(Status::Failed))
    }

    /// Puts warnings in front of the text (docs/mcp.md, "Results").
    pub fn with_warnings(mut self, warnings: &[String]) -> Self {
        if !warnings.is_empty() {
            if let Some(c) = self.content.first_mut() {
                let prefix: String = warnings.iter().map(|w| format!("Warning: {w}\n")).collect();
                c.text = format!("{prefix}{}", c.text);
            }
        }
        self
    }
}

/// The result of a command that ended within the call.
pub fn finished_result(
    exit: &ExitInfo,
    aggregated: String,
    truncated: bool,
    duration_ms: i64,
    cwd: &str,
    timeout_secs: Option<u64>,
) -> ToolResult {
    let body = if aggregated.trim().is_empty() {
        "(no output)".to_string()
    } else {
        aggregated.trim_end_matches('\n').to_string()
    };
    let status = if exit.success() {
        Status::Completed
    } else {
        Status::Failed
    };
    let text = if exit.timed_out {
        let secs = timeout_secs.unwrap_or(0);
        format!(
            "{body}\n\nCommand timed out after {secs} seconds. If it needs longer, re-run with a higher timeout (e.g. timeout={}), or start it with background=true and follow it with the process tool.",
            (secs * 2).max(60)
        )
    } else if let Some(sig) = &exit.signal {
        format!("{body}\n\nCommand aborted by signal {sig}")
    } else {
        match exit.code {
            Some(0) => body,
            Some(code) => format!("{body}\n\nCommand exited with code {code}"),
            None => format!("{body}\n\nCommand aborted before exit code was captured"),
        }
    };
    ToolResult::new(
        text,
        Details::Finished(Finished {
            aggregated,
            cwd: cwd.to_string(),
            duration_ms,
            exit_code: exit.code,
            exit_signal: exit.signal.clone(),
            limit: None,
            process_id: None,
            status,
            timed_out: exit.timed_out,
            truncated,
        }),
    )
}

/// Adds a sandbox limit that cut the command short to its result: the sentence after the
/// text, `details.limit`, and status `failed` whatever its exit status (docs/mcp.md, "Limits
/// in results"). Every other field stays as it was.
pub fn with_limit(mut result: ToolResult, hit: &LimitHit) -> ToolResult {
    result = with_note(result, &hit.sentence());
    let limit = Limit::from(hit.kind);
    match &mut result.details {
        Details::Finished(d) => {
            d.status = Status::Failed;
            d.limit = Some(limit);
        }
        Details::Poll(d) => {
            d.status = Status::Failed;
            d.limit = Some(limit);
        }
        // Only commands and polls are cut short; any other shape keeps its own fields.
        _ => {}
    }
    result
}

/// Adds a sentence after a result's text.
pub fn with_note(mut result: ToolResult, sentence: &str) -> ToolResult {
    if let Some(c) = result.content.first_mut() {
        c.text.push_str("\n\n");
        c.text.push_str(sentence);
    }
    result
}

/// Tells the caller where a result's cut output can be read: the process id whose record
/// `process log` pages (docs/mcp.md, `log`).
pub fn with_record(mut result: ToolResult, id: &str) -> ToolResult {
    if let Some(c) = result.content.first_mut() {
        c.text.push_str(&format!(
            "\n\n[Output truncated: the whole record is kept as session {id}; page it with process log (offset/limit).]"
        ));
    }
    if let Details::Finished(d) = &mut result.details {
        d.process_id = Some(id.to_string());
    }
    result
}

/// The result of a command that moved to the background.
pub fn running_result(
    id: &str,
    pid: Option<u32>,
    started_at_ms: i64,
    cwd: &str,
    tail: String,
) -> ToolResult {
    let pid_text = pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into());
    let text = format!(
        "Command still running (session {id}, pid {pid_text}). Use process (list/poll/log/write/kill/clear/remove) for follow-up."
    );
    ToolResult::new(
        text,
        Details::Running(Running {
            cwd: cwd.to_string(),
            pid,
            process_id: id.to_string(),
            started_at: started_at_ms,
            status: Status::Running,
            tail,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: Option<i64>, signal: Option<&str>, timed_out: bool) -> ExitInfo {
        ExitInfo {
            code,
            signal: signal.map(str::to_string),
            timed_out,
            finished_at_ms: 0,
        }
    }

    #[test]
    fn texts_and_statuses() {
        let rows = [
            (exit(Some(0), None, false), "hi\n", Status::Completed, "hi"),
            (
                exit(Some(0), None, false),
                "",
                Status::Completed,
                "(no output)",
            ),
            (
                exit(Some(3), None, false),
                "hi\n",
                Status::Failed,
                "hi\n\nCommand exited with code 3",
            ),
            (
                exit(None, Some("SIGKILL"), false),
                "x",
                Status::Failed,
                "x\n\nCommand aborted by signal SIGKILL",
            ),
        ];
        for (e, out, status, text) in rows {
            let r = finished_result(&e, out.into(), false, 5, "/workspace", Some(10));
            assert_eq!(r.status(), Some(status));
            assert_eq!(r.text(), text);
            let Details::Finished(d) = &r.details else {
                panic!("{}", r.details)
            };
            assert_eq!(d.cwd, "/workspace");
            assert_eq!(d.exit_signal, e.signal);
        }
        let r = finished_result(
            &exit(None, Some("SIGTERM"), true),
            "".into(),
            false,
            5,
            "/w",
            Some(2),
        );
        assert!(r.text().contains("Command timed out after 2 seconds"));
        assert!(r.details.timed_out());
        assert!(r.is_error());
    }

    #[test]
    fn running_shape() {
        let r = running_result("warm-river", Some(7), 123, "/workspace", "tail".into());
        assert_eq!(r.status(), Some(Status::Running));
        assert_eq!(
            r.text(),
            "Command still running (session warm-river, pid 7). Use process (list/poll/log/write/kill/clear/remove) for follow-up."
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["type"], "text");
        assert_eq!(v["details"]["sessionId"], "warm-river");
    }

    #[test]
    fn warnings_prefix_the_text() {
        let r = finished_result(
            &exit(Some(0), None, false),
            "ok".into(),
            false,
            1,
            "/w",
            None,
        )
        .with_warnings(&["config changed".into()]);
        assert_eq!(r.text(), "Warning: config changed\nok");
    }

    #[test]
    fn a_limit_keeps_every_field_and_adds_its_own() {
        let exit = ExitInfo {
            code: None,
            signal: Some("SIGKILL".into()),
            timed_out: false,
            finished_at_ms: 0,
        };
        let plain = finished_result(&exit, "x\n".into(), false, 7, "/w", None);
        let hit = LimitHit {
            kind: crate::contract::LimitKind::Memory,
            value: Some(2 << 30),
        };
        let r = with_limit(plain.clone(), &hit);
        assert_eq!(
            r.text(),
            "x\n\nCommand aborted by signal SIGKILL\n\nThe sandbox's memory limit (2 GiB) was reached: the kernel killed a process of this command to stay under it (sandbox.memory)."
        );
        let (Details::Finished(cut), Details::Finished(plain)) = (&r.details, &plain.details)
        else {
            panic!("{}", r.details)
        };
        assert_eq!(cut.limit, Some(Limit::Memory));
        let rest = Finished {
            limit: None,
            ..cut.clone()
        };
        assert_eq!(&rest, plain, "the other fields stay as they were");
        // A command that exited 0 but hit a limit reads as failed.
        let ok = ExitInfo {
            code: Some(0),
            signal: None,
            ..exit
        };
        let r = with_limit(
            finished_result(&ok, String::new(), false, 1, "/w", None),
            &LimitHit {
                kind: crate::contract::LimitKind::Pids,
                value: Some(512),
            },
        );
        assert_eq!(r.status(), Some(Status::Failed));
        assert!(r.is_error());
        assert_eq!(r.details.exit_code(), Some(0));
    }
}
