//! Session event stream: notify-on-exit and (later) approval events, fanned out to SSE and
//! MCP subscribers. A broadcast channel: slow subscribers lose old events, never block moat.

use tokio::sync::broadcast;

use super::proc::ExitInfo;

/// One event for one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub session: String,
    pub text: String,
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
    pub fn publish(&self, session: &str, text: String) {
        let _ = self.tx.send(SessionEvent {
            session: session.to_string(),
            text,
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
