//! The tool result object (docs/mcp.md, "Results"): `{content: [{type: "text", text}], details}`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::process::{ExitInfo, LimitHit};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolResult {
    pub content: Vec<Content>,
    pub details: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Content {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

impl ToolResult {
    pub fn new(text: String, details: Value) -> Self {
        Self {
            content: vec![Content {
                kind: "text".into(),
                text,
            }],
            details,
        }
    }

    pub fn text(&self) -> &str {
        self.content.first().map(|c| c.text.as_str()).unwrap_or("")
    }

    pub fn status(&self) -> &str {
        self.details
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// Failed statuses map to MCP `isError` and a non-zero CLI exit.
    pub fn is_error(&self) -> bool {
        self.status() == "failed"
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
        "completed"
    } else {
        "failed"
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
        json!({
            "status": status,
            "exitCode": exit.code,
            "exitSignal": exit.signal,
            "durationMs": duration_ms,
            "aggregated": aggregated,
            "cwd": cwd,
            "timedOut": exit.timed_out,
            "truncated": truncated,
        }),
    )
}

/// Adds a sandbox limit that cut the command short to its result: the sentence after the
/// text, `details.limit`, and status `failed` whatever its exit status (docs/mcp.md, "Limits
/// in results"). Every other field stays as it was.
pub fn with_limit(mut result: ToolResult, hit: &LimitHit) -> ToolResult {
    result = with_note(result, &hit.sentence());
    if let Some(d) = result.details.as_object_mut() {
        d.insert("status".into(), json!("failed"));
        d.insert("limit".into(), json!(hit.kind.as_str()));
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
    result.details["sessionId"] = json!(id);
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
        json!({
            "status": "running",
            "sessionId": id,
            "pid": pid,
            "startedAt": started_at_ms,
            "cwd": cwd,
            "tail": tail,
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
            (exit(Some(0), None, false), "hi\n", "completed", "hi"),
            (exit(Some(0), None, false), "", "completed", "(no output)"),
            (
                exit(Some(3), None, false),
                "hi\n",
                "failed",
                "hi\n\nCommand exited with code 3",
            ),
            (
                exit(None, Some("SIGKILL"), false),
                "x",
                "failed",
                "x\n\nCommand aborted by signal SIGKILL",
            ),
        ];
        for (e, out, status, text) in rows {
            let r = finished_result(&e, out.into(), false, 5, "/workspace", Some(10));
            assert_eq!(r.status(), status);
            assert_eq!(r.text(), text);
            assert_eq!(r.details["cwd"], "/workspace");
            assert_eq!(r.details["exitSignal"].as_str(), e.signal.as_deref());
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
        assert_eq!(r.details["timedOut"], true);
        assert!(r.is_error());
    }

    #[test]
    fn running_shape() {
        let r = running_result("warm-river", Some(7), 123, "/workspace", "tail".into());
        assert_eq!(r.status(), "running");
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
            kind: crate::process::LimitKind::Memory,
            value: Some(2 << 30),
        };
        let r = with_limit(plain.clone(), &hit);
        assert_eq!(
            r.text(),
            "x\n\nCommand aborted by signal SIGKILL\n\nThe sandbox's memory limit (2 GiB) was reached: the kernel killed a process of this command to stay under it (sandbox.memory)."
        );
        assert_eq!(r.details["limit"], "memory");
        let mut rest = r.details.clone();
        rest.as_object_mut().unwrap().remove("limit");
        assert_eq!(rest, plain.details, "the other fields stay as they were");
        // A command that exited 0 but hit a limit reads as failed.
        let ok = ExitInfo {
            code: Some(0),
            signal: None,
            ..exit
        };
        let r = with_limit(
            finished_result(&ok, String::new(), false, 1, "/w", None),
            &LimitHit {
                kind: crate::process::LimitKind::Pids,
                value: Some(512),
            },
        );
        assert_eq!(r.status(), "failed");
        assert!(r.is_error());
        assert_eq!(r.details["exitCode"], 0);
    }
}
