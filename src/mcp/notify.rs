//! Session events (background exits, approvals) to the connected client, as MCP logging
//! notifications (`notifications/message`, level `notice`, logger `moat`, `data` the event
//! text). Logging is the one server-to-client notification every MCP client surfaces; the
//! newest protocol revision deprecates it, but the handshake revisions clients speak today
//! all carry it.

#![allow(deprecated)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::process::SessionEvent;

/// The logger name on every event notification.
pub const LOGGER: &str = "moat";

/// MCP log levels in order, for comparing against the client's `logging/setLevel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl Level {
    pub fn from_mcp(level: LoggingLevel) -> Self {
        match level {
            LoggingLevel::Debug => Level::Debug,
            LoggingLevel::Info => Level::Info,
            LoggingLevel::Notice => Level::Notice,
            LoggingLevel::Warning => Level::Warning,
            LoggingLevel::Error => Level::Error,
            LoggingLevel::Critical => Level::Critical,
            LoggingLevel::Alert => Level::Alert,
            LoggingLevel::Emergency => Level::Emergency,
        }
    }
}

/// Events are "normal but significant": a client that asked for warnings only hears none.
const EVENT_LEVEL: Level = Level::Notice;

/// How often an idle forwarder checks whether its client is still there.
const LIVENESS_CHECK: Duration = Duration::from_secs(30);

/// The notification for one event.
pub fn event_message(event: &SessionEvent) -> LoggingMessageNotificationParam {
    LoggingMessageNotificationParam::new(
        LoggingLevel::Notice,
        serde_json::Value::String(event.text.clone()),
    )
    .with_logger(LOGGER)
}

/// Sends `session`'s events to `peer` until `stop` fires or the client goes away.
pub fn forward(
    mut events: broadcast::Receiver<SessionEvent>,
    session: String,
    peer: Peer<RoleServer>,
    min_level: Arc<AtomicU8>,
    notify_on_exit: bool,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(LIVENESS_CHECK) => {
                    if peer.is_transport_closed() {
                        break;
                    }
                    continue;
                }
                event = events.recv() => event,
            };
            match event {
                Ok(event) if event.session == session => {
                    if (EVENT_LEVEL as u8) < min_level.load(Ordering::Relaxed) {
                        continue;
                    }
                    // `exec.notify_on_exit = false` (docs/mcp.md, "Notifications").
                    if !notify_on_exit && event.is_background_exit() {
                        continue;
                    }
                    if let Err(e) = peer.notify_logging_message(event_message(&event)).await {
                        if peer.is_transport_closed() {
                            break;
                        }
                        tracing::warn!("failed to send an event notification: {e}");
                    }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("event notifications: {n} events were dropped (slow client)");
                }
                Err(RecvError::Closed) => break,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_like_mcp() {
        assert!(Level::from_mcp(LoggingLevel::Warning) > EVENT_LEVEL);
        assert!(Level::from_mcp(LoggingLevel::Info) < EVENT_LEVEL);
        assert_eq!(Level::from_mcp(LoggingLevel::Notice), EVENT_LEVEL);
    }

    #[test]
    fn event_message_shape() {
        let m = event_message(&SessionEvent {
            session: "s".into(),
            text: "Exec completed (warm-riv, code 0) :: hi".into(),
            outcome: None,
        });
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["level"], "notice");
        assert_eq!(v["logger"], "moat");
        assert_eq!(v["data"], "Exec completed (warm-riv, code 0) :: hi");
    }
}
