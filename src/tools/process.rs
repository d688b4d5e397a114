//! The `process` tool (docs/mcp.md, "Tools": `process`): follow-up on processes started by `exec`.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::exec::ToolResult;
use crate::output::page;
use crate::process::{Proc, Registry};
use crate::store::now_ms;

/// Parameters of one `process` call.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessRequest {
    pub action: String,
    /// The process the action is about. The wire calls it `sessionId` (docs/mcp.md, the
    /// `process` tool), a name kept for the agents already written against it.
    #[serde(default, rename = "sessionId")]
    pub process_id: Option<String>,
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub eof: Option<bool>,
    #[serde(default)]
    pub keys: Option<Vec<String>>,
    #[serde(default)]
    pub hex: Option<Vec<String>>,
    #[serde(default)]
    pub literal: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub bracketed: Option<bool>,
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
    /// Poll wait in ms, at most 120000.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// Every action the tool knows (docs/mcp.md, "Tools": `process`).
pub const ACTIONS: &[&str] = &[
    "list",
    "poll",
    "log",
    "write",
    "send-keys",
    "submit",
    "paste",
    "kill",
    "clear",
    "remove",
];

/// Empty-poll back-off (docs/mcp.md, "Tools": `process`): 5 s → 10 s → 30 s → 60 s, reset by output.
const RETRY_MS: [u64; 4] = [5_000, 10_000, 30_000, 60_000];

pub struct ProcessTool {
    pub registry: Arc<Registry>,
}

fn failed(text: impl Into<String>) -> ToolResult {
    ToolResult::new(text.into(), json!({ "status": "failed" }))
}

fn status_of(p: &Proc) -> &'static str {
    match p.exit() {
        None => "running",
        Some(_) if p.succeeded() => "completed",
        Some(_) => "failed",
    }
}

fn exit_line(p: &Proc) -> String {
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

fn runtime_text(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    }
}

impl ProcessTool {
    /// Runs one `process` call for `session`.
    pub async fn run(&self, session: &str, req: &ProcessRequest) -> ToolResult {
        let action = req.action.trim().to_ascii_lowercase();
        if action == "list" {
            return self.list(session);
        }
        if !ACTIONS.contains(&action.as_str()) {
            // Texts that quote the request show its control and bidi characters escaped.
            return failed(format!(
                "Unknown action {}",
                crate::policy::escape_display(&req.action)
            ));
        }
        let Some(id) = req
            .process_id
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        else {
            return failed("sessionId is required for this action.");
        };
        let Some(p) = self.registry.get(session, id) else {
            return failed(format!(
                "No session found for {}",
                crate::policy::escape_display(id)
            ));
        };
        match action.as_str() {
            "poll" => self.poll(&p, req.timeout.unwrap_or(0)).await,
            "log" => {
                // Re-reading the record is blocking file I/O over up to spill_max_bytes: keep
                // it off the async workers.
                let (proc, offset, limit) = (p.clone(), req.offset, req.limit);
                tokio::task::spawn_blocking(move || log(&proc, offset, limit))
                    .await
                    .unwrap_or_else(|e| failed(format!("Failed to read the log of {id}: {e}")))
            }
            "write" => {
                let data = req.data.clone().unwrap_or_default();
                let len = data.chars().count();
                let closing = req.eof == Some(true);
                if let Some(r) = self.input(&p, data.into_bytes()).await {
                    return r;
                }
                if closing {
                    p.close_stdin().await;
                }
                let suffix = if closing { " (stdin closed)" } else { "" };
                ToolResult::new(
                    format!("Wrote {len} bytes to session {id}{suffix}."),
                    json!({"status": "running", "sessionId": id}),
                )
            }
            "send-keys" => {
                let mut bytes = Vec::new();
                if let Some(l) = &req.literal {
                    bytes.extend_from_slice(l.as_bytes());
                }
                if let Some(h) = &req.hex {
                    match crate::keys::decode_hex(h) {
                        Ok(b) => bytes.extend(b),
                        Err(e) => return failed(format!("Failed to {e}")),
                    }
                }
                if let Some(k) = &req.keys {
                    let app = p.lock().term.app_cursor();
                    match crate::keys::encode_keys(k, app) {
                        Ok(b) => bytes.extend(b),
                        Err(e) => return failed(format!("Failed to {e}")),
                    }
                }
                if bytes.is_empty() {
                    return failed("No key data provided.");
                }
                let n = bytes.len();
                if let Some(r) = self.input(&p, bytes).await {
                    return r;
                }
                ToolResult::new(
                    format!("Sent {n} bytes to session {id}."),
                    json!({"status": "running", "sessionId": id}),
                )
            }
            "submit" => {
                if let Some(r) = self.input(&p, b"\r".to_vec()).await {
                    return r;
                }
                ToolResult::new(
                    format!("Submitted session {id} (sent CR)."),
                    json!({"status": "running", "sessionId": id}),
                )
            }
            "paste" => {
                let text = req.text.clone().unwrap_or_default();
                if text.is_empty() {
                    return failed("No paste text provided.");
                }
                let bytes = crate::keys::paste(&text, req.bracketed != Some(false));
                if let Some(r) = self.input(&p, bytes).await {
                    return r;
                }
                ToolResult::new(
                    format!("Pasted {} chars to session {id}.", text.chars().count()),
                    json!({"status": "running", "sessionId": id}),
                )
            }
            "kill" => {
                if !p.is_running() {
                    return failed(format!("No active session found for {id}"));
                }
                p.kill().await;
                // The kill succeeded: the call is not an error, though the process it ended
                // has failed (its own status says so on `poll` and `list`).
                ToolResult::new(
                    format!("Killed session {id}."),
                    json!({"status": "completed", "sessionId": id, "exitSignal": p.exit().and_then(|e| e.signal)}),
                )
            }
            "clear" => {
                if p.is_running() {
                    return failed(format!("No finished session found for {id}"));
                }
                self.registry.forget(&p);
                ToolResult::new(
                    format!("Cleared session {id}."),
                    json!({"status": "completed"}),
                )
            }
            "remove" => {
                let running = p.is_running();
                if running {
                    p.kill().await;
                }
                self.registry.forget(&p);
                let suffix = if running { " (terminated)" } else { "" };
                ToolResult::new(
                    format!("Removed session {id}{suffix}."),
                    json!({"status": "completed"}),
                )
            }
            _ => unreachable!("checked above"),
        }
    }

    fn list(&self, session: &str) -> ToolResult {
        let procs = self.registry.list(session);
        if procs.is_empty() {
            return ToolResult::new(
                "No running or recent sessions.".into(),
                json!({"status": "completed", "sessions": []}),
            );
        }
        let now = now_ms();
        let mut lines = Vec::new();
        let mut rows = Vec::new();
        for p in &procs {
            let exit = p.exit();
            let end = exit.as_ref().map(|e| e.finished_at_ms).unwrap_or(now);
            let runtime = end - p.info.started_at_ms;
            let status = status_of(p);
            let cmd: String = p.info.command.chars().take(120).collect();
            // The command is the agent's text: shown escaped, like an approval's.
            lines.push(format!(
                "{} {:<9} {} :: {}",
                p.info.id,
                status,
                runtime_text(runtime),
                crate::policy::escape_display(&cmd)
            ));
            rows.push(json!({
                "sessionId": p.info.id,
                "status": status,
                "startedAt": p.info.started_at_ms,
                "endedAt": exit.as_ref().map(|e| e.finished_at_ms),
                "runtimeMs": runtime,
                "cwd": p.info.cwd,
                "command": p.info.command,
                "exitCode": exit.as_ref().and_then(|e| e.code),
                "exitSignal": exit.as_ref().and_then(|e| e.signal.clone()),
            }));
        }
        ToolResult::new(
            lines.join("\n"),
            json!({"status": "completed", "sessions": rows}),
        )
    }

    async fn poll(&self, p: &Arc<Proc>, wait_ms: u64) -> ToolResult {
        let wait = Duration::from_millis(wait_ms.min(120_000));
        if wait > Duration::ZERO {
            // Return as soon as there is something new, or the process ended.
            p.wait_for(wait, |s| s.exit.is_some() || s.output.has_pending())
                .await;
        }
        let (text, offset, retry) = {
            let mut st = p.lock();
            let text = st.output.drain();
            let offset = st.output.drained_at;
            if text.trim().is_empty() {
                st.empty_polls += 1;
            } else {
                st.empty_polls = 0;
            }
            let retry = RETRY_MS[(st.empty_polls.max(1) - 1).min(RETRY_MS.len() - 1)];
            (text, offset, retry)
        };
        self.registry.record_drain(p, offset);
        let body = if text.trim().is_empty() {
            "(no new output)".to_string()
        } else {
            text.trim_end().to_string()
        };
        let status = status_of(p);
        let exit = p.exit();
        let mut details = json!({
            "status": status,
            "sessionId": p.info.id,
            "exitCode": exit.as_ref().and_then(|e| e.code),
            "exitSignal": exit.as_ref().and_then(|e| e.signal.clone()),
            "timedOut": exit.as_ref().is_some_and(|e| e.timed_out),
            "aggregated": p.lock().output.aggregated(),
        });
        if exit.is_none() {
            details["retryInMs"] = json!(retry);
        }
        let result = ToolResult::new(format!("{body}\n\n{}", exit_line(p)), details);
        // A sandbox limit that cut it short says so (docs/mcp.md, "Limits in results").
        match p.limit() {
            Some(hit) => crate::exec::with_limit(result, &hit),
            None => result,
        }
    }

    /// Writes to the process's stdin; `Some(result)` is the error to return.
    async fn input(&self, p: &Proc, bytes: Vec<u8>) -> Option<ToolResult> {
        let id = &p.info.id;
        if !p.is_running() {
            return Some(failed(format!("No active session found for {id}")));
        }
        if !p.lock().stdin_open {
            return Some(failed(format!("Session {id} stdin is not writable.")));
        }
        match p.write(bytes).await {
            Ok(()) => None,
            Err(e) => Some(failed(format!("Session {id} stdin is not writable: {e}"))),
        }
    }
}

/// Pages the whole recorded output by line numbers of the whole output (docs/mcp.md,
/// `process log`), read again from the log; the capped view is the fallback only when the
/// process has no log descriptor (its run directory could not be opened).
fn log(p: &Proc, offset: Option<usize>, limit: Option<usize>) -> ToolResult {
    let status = status_of(p);
    let exit = p.exit();
    let (log, start, redactor, budget, spill_max, total_chars) = {
        let st = p.lock();
        (
            st.log.clone(),
            st.output.record_start.unwrap_or(crate::process::LineMark {
                offset: 0,
                lines_before: Some(0),
                at_line_start: true,
            }),
            st.output.fresh_redactor(),
            st.output.max_chars(),
            st.output.spill_max,
            st.output.total_chars(),
        )
    };
    let Some(log) = log else {
        return capped_log(p, offset, limit);
    };
    let end = log.metadata().map(|m| m.len()).unwrap_or(0);
    let src = crate::process::LogSource {
        log: &log,
        start,
        end,
        redactor: &redactor,
        finished: exit.is_some(),
    };
    let pg = match crate::process::page_log(
        &src,
        offset.map(|o| o as u64),
        limit.map(|l| l as u64),
        budget,
    ) {
        Ok(pg) => pg,
        Err(e) => return failed(format!("Failed to read the log of {}: {e}", p.info.id)),
    };
    let mut notes = Vec::new();
    let record_cut = start.offset > 0;
    if record_cut {
        let keeps = human_bytes(spill_max);
        notes.push(match start.lines_before {
            Some(_) if pg.first > 1 => format!(
                "lines 1-{} were dropped: the record keeps the last {keeps} of output (exec.spill_max_bytes)",
                pg.first - 1
            ),
            Some(_) => format!("the record keeps the last {keeps} of output (exec.spill_max_bytes)"),
            None => format!(
                "the first {} bytes of output were dropped before this moat attached (the record keeps the last {keeps}, exec.spill_max_bytes); lines are numbered from the first one kept",
                start.offset
            ),
        });
    }
    let shown_all = pg.start <= pg.first && pg.end > pg.last;
    if pg.last >= pg.first && !shown_all {
        if pg.start < pg.end {
            notes.push(format!(
                "showing lines {}-{} of {}; pass offset/limit to page",
                pg.start,
                pg.end - 1,
                pg.last
            ));
        } else {
            notes.push(format!(
                "no lines at offset {}; the record holds lines {}-{}",
                offset.unwrap_or(0),
                pg.first,
                pg.last
            ));
        }
    }
    if pg.cut {
        notes.push(format!("page cut at {budget} bytes; pass a smaller limit"));
    }
    let mut text = if pg.last < pg.first {
        if status == "running" {
            "(no output yet)".to_string()
        } else {
            "(no output recorded)".to_string()
        }
    } else {
        pg.text
    };
    if !notes.is_empty() {
        text = format!("{text}\n\n[{}]", notes.join("; "));
    }
    let lines = |a: u64, b: u64| {
        if b > a {
            json!([a, b - 1])
        } else {
            json!(null)
        }
    };
    ToolResult::new(
        text,
        json!({
            "status": status,
            "sessionId": p.info.id,
            "total": pg.last,
            "totalLines": pg.last,
            "firstLine": pg.first,
            "lines": lines(pg.start, pg.end),
            "totalChars": total_chars,
            "recordCut": record_cut,
            "truncated": record_cut || pg.cut,
            "exitCode": exit.as_ref().and_then(|e| e.code),
            "exitSignal": exit.as_ref().and_then(|e| e.signal.clone()),
        }),
    )
}

/// `64 MiB` for a byte count (whole units only; the exact count otherwise).
fn human_bytes(n: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// The capped view by lines: only for a process without a log descriptor.
fn capped_log(p: &Proc, offset: Option<usize>, limit: Option<usize>) -> ToolResult {
    let (aggregated, total_chars, truncated) = {
        let st = p.lock();
        (
            st.output.aggregated(),
            st.output.total_chars(),
            st.output.truncated(),
        )
    };
    let status = status_of(p);
    if aggregated.is_empty() {
        let text = if status == "running" {
            "(no output yet)"
        } else {
            "(no output recorded)"
        };
        return ToolResult::new(
            text.into(),
            json!({"status": status, "totalLines": 0, "totalChars": 0}),
        );
    }
    let pg = page(&aggregated, offset.map(|o| o.saturating_sub(1)), limit);
    let exit = p.exit();
    ToolResult::new(
        pg.render(),
        json!({
            "status": status,
            "sessionId": p.info.id,
            "total": pg.total_lines,
            "totalLines": pg.total_lines,
            "totalChars": total_chars,
            "truncated": truncated,
            "exitCode": exit.as_ref().and_then(|e| e.code),
            "exitSignal": exit.as_ref().and_then(|e| e.signal.clone()),
        }),
    )
}
