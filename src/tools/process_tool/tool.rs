//! [`ProcessTool`]: runs one parsed `process` call, one method per action.

use std::sync::Arc;
use std::time::Duration;

use super::log::read_log;
use super::request::{ProcessAction, ProcessCall, ProcessRequest};
use super::shape::{exit_line, failed, runtime_text, status_of};
use crate::contract::{Details, Killed, Poll, ProcessList, ProcessRow, Sent, Status, ToolResult};
use crate::output::escape_display;
use crate::process::{Proc, Registry};
use crate::store::now_ms;

/// Empty-poll back-off (docs/mcp.md, "Tools": `process`): 5 s → 10 s → 30 s → 60 s, reset by output.
const RETRY_MS: [u64; 4] = [5_000, 10_000, 30_000, 60_000];

/// See the module docs.
pub struct ProcessTool {
    /// Every process of this moat: the tool finds, reads, feeds and ends them through it.
    pub registry: Arc<Registry>,
    /// The nodes this moat paired with, for calls that name a `node` (docs/nodes.md).
    pub nodes: Arc<crate::node::Nodes>,
}

/// The result of a call that fed the process's stdin.
fn fed(text: String, id: &str) -> ToolResult {
    ToolResult::new(text, Details::Sent(Sent::new(id)))
}

impl ProcessTool {
    /// Runs one `process` request for `session`; one that names nothing to do is a failed
    /// result with the parser's text.
    pub async fn run(&self, session: &str, req: &ProcessRequest) -> ToolResult {
        if req.node.is_some() {
            return self.forward(session, req).await;
        }
        match req.parse() {
            Ok(call) => self.call(session, call).await,
            Err(e) => failed(e.to_string()),
        }
    }

    /// Runs one parsed call for `session`. `id` below is the process id as the request named
    /// it (trimmed): the texts quote it back.
    pub async fn call(&self, session: &str, call: ProcessCall) -> ToolResult {
        let (id, action) = match call {
            ProcessCall::List => return self.list(session),
            ProcessCall::On { id, action } => (id, action),
        };
        let Some(p) = self.registry.get(session, &id) else {
            // Texts that quote the request show its control and bidi characters escaped.
            return failed(format!("No session found for {}", escape_display(&id)));
        };
        match action {
            ProcessAction::Poll { wait_ms } => self.poll(&p, wait_ms).await,
            ProcessAction::Log {
                offset,
                limit,
                char_offset,
            } => self.log(&p, &id, (offset, limit, char_offset)).await,
            ProcessAction::Write { data, eof } => self.write(&p, &id, data, eof).await,
            ProcessAction::SendKeys { literal, hex, keys } => {
                self.send_keys(&p, &id, literal, hex, keys).await
            }
            ProcessAction::Submit => self.submit(&p, &id).await,
            ProcessAction::Paste { text, bracketed } => self.paste(&p, &id, &text, bracketed).await,
            ProcessAction::Kill => self.kill(&p, &id).await,
            ProcessAction::Clear => self.clear(&p, &id),
            ProcessAction::Remove => self.remove(&p, &id).await,
        }
    }

    /// `log`: re-reading the record is blocking file I/O over up to spill_max_bytes, so it
    /// runs off the async workers.
    async fn log(
        &self,
        p: &Arc<Proc>,
        id: &str,
        (offset, limit, char_offset): (Option<usize>, Option<usize>, Option<usize>),
    ) -> ToolResult {
        let proc = p.clone();
        tokio::task::spawn_blocking(move || read_log(&proc, offset, limit, char_offset))
            .await
            .unwrap_or_else(|e| failed(format!("Failed to read the log of {id}: {e}")))
    }

    /// `write`: `data` to stdin, then closes it when `eof`.
    async fn write(&self, p: &Proc, id: &str, data: String, eof: bool) -> ToolResult {
        let len = data.chars().count();
        if let Some(r) = self.input(p, data.into_bytes()).await {
            return r;
        }
        if eof {
            p.close_stdin().await;
        }
        let suffix = if eof { " (stdin closed)" } else { "" };
        fed(format!("Wrote {len} bytes to session {id}{suffix}."), id)
    }

    /// `send-keys`: literal text, then hex bytes, then key names (encoded for the terminal's
    /// cursor mode), as one write.
    async fn send_keys(
        &self,
        p: &Proc,
        id: &str,
        literal: Option<String>,
        hex: Option<Vec<String>>,
        keys: Option<Vec<String>>,
    ) -> ToolResult {
        let mut bytes = Vec::new();
        if let Some(l) = &literal {
            bytes.extend_from_slice(l.as_bytes());
        }
        if let Some(h) = &hex {
            match crate::terminal_keys::decode_hex(h) {
                Ok(b) => bytes.extend(b),
                Err(e) => return failed(format!("Failed to {e}")),
            }
        }
        if let Some(k) = &keys {
            let app = p.lock().term.app_cursor();
            match crate::terminal_keys::encode_keys(k, app) {
                Ok(b) => bytes.extend(b),
                Err(e) => return failed(format!("Failed to {e}")),
            }
        }
        if bytes.is_empty() {
            return failed("No key data provided.");
        }
        let n = bytes.len();
        if let Some(r) = self.input(p, bytes).await {
            return r;
        }
        fed(format!("Sent {n} bytes to session {id}."), id)
    }

    /// `submit`: a carriage return.
    async fn submit(&self, p: &Proc, id: &str) -> ToolResult {
        if let Some(r) = self.input(p, b"\r".to_vec()).await {
            return r;
        }
        fed(format!("Submitted session {id} (sent CR)."), id)
    }

    /// `paste`: `text` as one paste, bracketed unless the agent said not to.
    async fn paste(&self, p: &Proc, id: &str, text: &str, bracketed: bool) -> ToolResult {
        if text.is_empty() {
            return failed("No paste text provided.");
        }
        let bytes = crate::terminal_keys::paste(text, bracketed);
        if let Some(r) = self.input(p, bytes).await {
            return r;
        }
        fed(
            format!("Pasted {} chars to session {id}.", text.chars().count()),
            id,
        )
    }

    /// `kill`: ends a running process's group.
    async fn kill(&self, p: &Proc, id: &str) -> ToolResult {
        if !p.is_running() {
            return failed(format!("No active session found for {id}"));
        }
        if !p.kill().await {
            return failed(kill_failed(id));
        }
        // The kill succeeded: the call is not an error, though the process it ended has
        // failed (its own status says so on `poll` and `list`).
        ToolResult::new(
            format!("Killed session {id}."),
            Details::Killed(Killed {
                exit_signal: p.exit().and_then(|e| e.signal),
                process_id: id.to_string(),
                status: Status::Completed,
            }),
        )
    }

    /// `clear`: forgets a finished process.
    fn clear(&self, p: &Arc<Proc>, id: &str) -> ToolResult {
        if p.is_running() {
            return failed(format!("No finished session found for {id}"));
        }
        self.registry.forget(p);
        ToolResult::completed(format!("Cleared session {id}."))
    }

    /// `remove`: ends the process if it runs, then forgets it.
    async fn remove(&self, p: &Arc<Proc>, id: &str) -> ToolResult {
        let running = p.is_running();
        if running && !p.kill().await {
            return failed(kill_failed(id) + " It was not removed.");
        }
        self.registry.forget(p);
        let suffix = if running { " (terminated)" } else { "" };
        ToolResult::completed(format!("Removed session {id}{suffix}."))
    }

    /// `list`: the session's processes, running and recent, newest state of each.
    fn list(&self, session: &str) -> ToolResult {
        let procs = self.registry.list(session);
        if procs.is_empty() {
            return ToolResult::new(
                "No running or recent sessions.".into(),
                Details::ProcessList(ProcessList {
                    sessions: Vec::new(),
                    status: Status::Completed,
                }),
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
                escape_display(&cmd)
            ));
            rows.push(ProcessRow {
                command: p.info.command.clone(),
                cwd: p.info.cwd.clone(),
                ended_at: exit.as_ref().map(|e| e.finished_at_ms),
                exit_code: exit.as_ref().and_then(|e| e.code),
                exit_signal: exit.as_ref().and_then(|e| e.signal.clone()),
                runtime_ms: runtime,
                process_id: p.info.id.clone(),
                started_at: p.info.started_at_ms,
                status,
            });
        }
        ToolResult::new(
            lines.join("\n"),
            Details::ProcessList(ProcessList {
                sessions: rows,
                status: Status::Completed,
            }),
        )
    }

    /// `poll`: the output since the last poll, after waiting up to `wait_ms` (at most two
    /// minutes) for some, with the back-off hint while the process runs.
    async fn poll(&self, p: &Arc<Proc>, wait_ms: u64) -> ToolResult {
        let wait = Duration::from_millis(wait_ms.min(120_000));
        if wait > Duration::ZERO {
            // Return as soon as there is something new, or the process ended.
            p.wait_for(wait, |s| s.exit.is_some() || s.output.has_pending())
                .await;
        }
        let proc = p.clone();
        let take = move || {
            proc.with_output(|st| {
                let text = st.output.drain();
                let offset = st.output.drained_at;
                if text.trim().is_empty() {
                    st.empty_polls += 1;
                } else {
                    st.empty_polls = 0;
                }
                let retry = RETRY_MS[(st.empty_polls.max(1) - 1).min(RETRY_MS.len() - 1)];
                (text, offset, retry, st.output.aggregated())
            })
        };
        // A finished process's shelved views come back by replaying its log: blocking file
        // I/O, off the async workers like `log`.
        let shelved = p.lock().output.is_shelved();
        let (text, offset, retry, aggregated) = if shelved {
            match tokio::task::spawn_blocking(take).await {
                Ok(taken) => taken,
                Err(e) => {
                    return failed(format!("Failed to read the output of {}: {e}", p.info.id))
                }
            }
        } else {
            take()
        };
        self.registry.record_drain(p, offset);
        let body = if text.trim().is_empty() {
            "(no new output)".to_string()
        } else {
            text.trim_end().to_string()
        };
        let status = status_of(p);
        let exit = p.exit();
        let details = Details::Poll(Poll {
            aggregated,
            exit_code: exit.as_ref().and_then(|e| e.code),
            exit_signal: exit.as_ref().and_then(|e| e.signal.clone()),
            limit: None,
            retry_in_ms: exit.is_none().then_some(retry),
            process_id: p.info.id.clone(),
            status,
            timed_out: exit.as_ref().is_some_and(|e| e.timed_out),
        });
        let result = ToolResult::new(format!("{body}\n\n{}", exit_line(p)), details);
        // A sandbox limit that cut it short says so (docs/mcp.md, "Limits in results").
        match p.limit() {
            Some(hit) => crate::contract::with_limit(result, &hit),
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

/// What `kill` and `remove` say when moat could not end a process: something in the sandbox
/// kept moat's kill helper from finishing (docs/helper.md, "Deadlines").
fn kill_failed(id: &str) -> String {
    format!("Failed to end session {id}: moat's kill helper did not finish (something in the sandbox stopped it), and {id} is still running. Try again, or remove the session's container (`moat sessions rm`).")
}
