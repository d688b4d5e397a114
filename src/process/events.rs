//! Session event stream: notify-on-exit and (later) approval events, fanned out to SSE and
//! MCP subscribers. A broadcast channel: slow subscribers lose old events, never block moat.

use tokio::sync::broadcast;

use crate::contract::ExitInfo;

/// One event for one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub session: String,
    /// The sentence subscribers show (the SSE and MCP wire carry it as it is).
    pub text: String,
    /// What the sentence says, as data, for clients that act on it (`moat exec` waiting on an
    /// approval takes its exit code from here). `None` for events relayed from another daemon's
    /// stream, which carries only the text.
    pub outcome: Option<EventOutcome>,
}

impl SessionEvent {
    /// Whether this is a background process's exit (what `exec.notify_on_exit` switches; an
    /// event relayed without its data was already filtered by the daemon that sent it).
    pub fn is_background_exit(&self) -> bool {
        self.outcome
            .as_ref()
            .is_some_and(|o| matches!(o.kind, EventKind::Completed | EventKind::Failed))
    }
}

/// What happened, as an event reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// A background process ended with code 0.
    Completed,
    /// A background process ended otherwise (code, signal, timeout).
    Failed,
    /// An approved plan is still running after `approvals.running_notice_secs`.
    Running,
    /// An approved plan ended.
    Finished,
    /// An approval was denied (by an operator, the fallback, or a plan that changed).
    Denied,
}

/// The data of one event.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventOutcome {
    pub kind: EventKind,
    /// The approval the event is about (approval events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// The process that ran (not for a denial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// The exit code, when the command reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// `SIGKILL`, … when a signal ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_signal: Option<String>,
    #[serde(default)]
    pub timed_out: bool,
}

impl EventOutcome {
    /// An event about `approval` with no process data (running notices, denials).
    pub fn approval(kind: EventKind, approval: &str, process: Option<&str>) -> Self {
        Self {
            kind,
            approval_id: Some(approval.to_string()),
            process_id: process.map(str::to_string),
            exit_code: None,
            exit_signal: None,
            timed_out: false,
        }
    }

    /// How `process` ended; `approval` when an approved plan ran it.
    pub fn ended(kind: EventKind, process: &str, exit: &ExitInfo, approval: Option<&str>) -> Self {
        Self {
            kind,
            approval_id: approval.map(str::to_string),
            process_id: Some(process.to_string()),
            exit_code: exit.code,
            exit_signal: exit.signal.clone(),
            timed_out: exit.timed_out,
        }
    }
}

#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<SessionEvent>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(1024).0,
        }
    }
}

impl EventBus {
    pub fn publish(&self, session: &str, text: String, outcome: EventOutcome) {
        let _ = self.tx.send(SessionEvent {
            session: session.to_string(),
            text,
            outcome: Some(outcome),
        });
    }

    /// An event that carries only its sentence (relayed from a node whose event had no data).
    pub fn publish_text(&self, session: &str, text: String) {
        let _ = self.tx.send(SessionEvent {
            session: session.to_string(),
            text,
            outcome: None,
        });
    }

    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.tx.subscribe()
    }
}

/// `Exec completed (<id8>, code N) :: <tail>` / `Exec failed (<id8>, signal S) :: <tail>`.
pub fn exit_event(id: &str, exit: &ExitInfo, tail: &str) -> String {
    let id8: String = id.chars().take(8).collect();
    let verdict = if exit.success() {
        "completed"
    } else {
        "failed"
    };
    let how = match (&exit.signal, exit.code) {
        (Some(sig), _) => format!("signal {sig}"),
        (None, Some(code)) => format!("code {code}"),
        (None, None) => "code ?".to_string(),
    };
    let compact = compact(tail);
    if compact.is_empty() {
        format!("Exec {verdict} ({id8}, {how})")
    } else {
        format!("Exec {verdict} ({id8}, {how}) :: {compact}")
    }
}

/// Collapses whitespace runs so a multi-line tail reads as one line.
fn compact(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: Option<i64>, signal: Option<&str>) -> ExitInfo {
        ExitInfo {
            code,
            signal: signal.map(str::to_string),
            timed_out: false,
            finished_at_ms: 0,
        }
    }

    #[test]
    fn event_texts() {
        let rows = [
            (
                exit(Some(0), None),
                "a\n b\n",
                "Exec completed (warm-riv, code 0) :: a b",
            ),
            (exit(Some(3), None), "", "Exec failed (warm-riv, code 3)"),
            (
                exit(None, Some("SIGTERM")),
                "x",
                "Exec failed (warm-riv, signal SIGTERM) :: x",
            ),
        ];
        for (e, tail, want) in rows {
            assert_eq!(exit_event("warm-river", &e, tail), want);
        }
    }
}
