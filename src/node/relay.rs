//! A node's events on the gateway (docs/nodes.md, "Events"): while a gateway's session waits
//! on something of a node's — a background process to end, an approval to be decided — one
//! owner task per node and session holds the node's event stream for that session open and
//! publishes each event on the gateway's own bus, so the gateway's event stream and MCP
//! notifications carry it as they carry a local one.
//!
//! A relay ends when nothing it waits on is left, when the node refuses the pairing, or after
//! [`MAX_LIFETIME`]. A node that goes away is called again with a growing pause; each time the
//! stream opens, the node's process list is read once, so a process that ended while no
//! stream was open still gets its exit event. Everything that comes from the node is another
//! machine's: texts are sanitized again and cut, ids escaped and cut, lines bounded.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::json;

use super::nodes::Nodes;
use super::wire::{ForwardedEvents, NodeEvent, EVENTS_PATH, KEEPALIVE_SECS, MAX_EVENT_LINE};
use super::{NodeError, PROCESS_PATH};
use crate::contract::{Details, ExitInfo, Status, ToolResult};
use crate::process::{exit_event, EventBus, EventKind, EventOutcome};
use crate::store::NodeRow;

/// Relays one gateway daemon runs at once; a wait past it is not followed (the agent still
/// has `process poll` and `list` with `node`).
pub const MAX_RELAYS: usize = 64;
/// Things one relay waits on at once.
const MAX_AWAITED: usize = 256;
/// How long a relay follows at most.
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The longest pause between two calls to a node that went away.
const MAX_PAUSE: Duration = Duration::from_secs(30);
/// The longest text of an event shown on the gateway.
const MAX_TEXT: usize = 2000;
/// The longest id taken from a node's event, and the longest a relay follows: moat's own ids
/// are far shorter, and anything a relay keeps must be bounded whatever a node answers.
const MAX_ID: usize = 128;
/// Events one relay publishes in a burst, and per second after it: a node's session makes a
/// few events a minute, and the gateway's bus is shared by every session (past the rate,
/// events are dropped, so a flooding node cannot push other sessions' events out).
const BURST: u32 = 64;
const PER_SEC: u32 = 8;
/// A stream that lasted this long was healthy: the next call to the node waits only the
/// shortest pause. One that ended sooner makes the pause grow, so a node that answers and
/// hangs up at once cannot make the gateway call it (and audit the catch-up) in a loop.
const HEALTHY: Duration = Duration::from_secs(60);

/// What a gateway's session waits on at a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Awaited {
    /// A background process's end, by the node's process id.
    Process(String),
    /// An approval's outcome, by the node's approval id.
    Approval(String),
}

impl Awaited {
    /// The id, when it is one a relay may keep: at most [`MAX_ID`] characters of letters,
    /// digits, `-`, `_` and `.` (a node's answer is another machine's text).
    fn id(&self) -> &str {
        match self {
            Awaited::Process(id) | Awaited::Approval(id) => id,
        }
    }

    fn is_followable(&self) -> bool {
        let id = self.id();
        !id.is_empty()
            && id.len() <= MAX_ID
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    }
}

/// The gateway's relays, by node and session. See the module docs.
pub struct Relays {
    /// The pairings, for the node's process list and the audit of that call.
    nodes: Arc<Nodes>,
    /// Where the gateway's own events go.
    bus: EventBus,
    /// (node, session) → what its relay still waits on. An entry exists exactly while its
    /// task runs; the task removes it under this lock when nothing is left.
    live: Mutex<HashMap<(String, String), HashSet<Awaited>>>,
}

impl Relays {
    pub fn new(nodes: Arc<Nodes>, bus: EventBus) -> Arc<Self> {
        Arc::new(Self {
            nodes,
            bus,
            live: Mutex::default(),
        })
    }

    /// Follows `what` of `session` on `node` until it is over, starting the relay for that
    /// node and session when none runs. False when it is not followed (a bound).
    pub fn follow(self: &Arc<Self>, node: &NodeRow, session: &str, what: Awaited) -> bool {
        if !what.is_followable() {
            tracing::warn!(node = %node.name, "not following a node's answer: its id is not one");
            return false;
        }
        let key = (node.name.clone(), session.to_string());
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = live.get_mut(&key) {
            if set.len() >= MAX_AWAITED {
                return false;
            }
            set.insert(what);
            return true;
        }
        if live.len() >= MAX_RELAYS {
            tracing::warn!(
                node = %node.name,
                "not following a node's events: {MAX_RELAYS} relays run already"
            );
            return false;
        }
        live.insert(key.clone(), HashSet::from([what]));
        drop(live);
        let (relays, node) = (self.clone(), node.clone());
        tokio::spawn(async move { relays.run(node, key.1).await });
        true
    }

    /// The relay of `node` and `session`: the owner task of its stream.
    async fn run(self: Arc<Self>, node: NodeRow, session: String) {
        let key = (node.name.clone(), session.clone());
        let started = Instant::now();
        let first = Duration::from_secs(1);
        let mut pause = first;
        let mut rate = Rate::new();
        loop {
            if self.done(&key, started.elapsed() >= MAX_LIFETIME) {
                return;
            }
            let opened = Instant::now();
            let deadline = started + MAX_LIFETIME;
            match self
                .stream_once(&node, &session, &key, &mut rate, deadline)
                .await
            {
                Ok(()) => {}
                Err(NodeError::TokenRefused(_)) | Err(NodeError::Certificate { .. }) => {
                    tracing::warn!(node = %node.name, "stopped following a node's events: the pairing is refused");
                    self.done(&key, true);
                    return;
                }
                Err(e) => tracing::debug!(node = %node.name, "node events: {e}"),
            }
            // Every call again waits, however the last one ended.
            if opened.elapsed() >= HEALTHY {
                pause = first;
            }
            if self.done_waiting(&key) {
                continue;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Whether the relay of `key` ends: it removes its entry when nothing is left to wait on
    /// (or `give_up`), under the lock `follow` takes, so a wait added meanwhile keeps it on.
    fn done(&self, key: &(String, String), give_up: bool) -> bool {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let empty = live.get(key).is_none_or(|s| s.is_empty());
        if empty || give_up {
            live.remove(key);
            return true;
        }
        false
    }

    /// Opens the node's stream, catches up on processes that ended before it opened, then
    /// relays lines until the stream ends, goes quiet past two keepalives, or nothing is
    /// left to wait on.
    async fn stream_once(
        &self,
        node: &NodeRow,
        session: &str,
        key: &(String, String),
        rate: &mut Rate,
        deadline: Instant,
    ) -> Result<(), NodeError> {
        let body = serde_json::to_value(ForwardedEvents {
            session: session.to_string(),
        })
        .map_err(|e| bad(node, e.to_string()))?;
        let mut stream = super::open_stream(
            &node.name,
            &node.url,
            &node.fingerprint,
            &node.token,
            EVENTS_PATH,
            &body,
        )
        .await?;
        self.catch_up(node, session, key, rate).await;
        let quiet = Duration::from_secs(2 * KEEPALIVE_SECS + 5);
        let mut line: Vec<u8> = Vec::new();
        loop {
            // A node that keeps its stream alive does not keep the relay past its lifetime.
            if self.done_waiting(key) || Instant::now() >= deadline {
                return Ok(());
            }
            let frame = match tokio::time::timeout(quiet, stream.frame()).await {
                Err(_) | Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => return Err(bad(node, e.to_string())),
                Ok(Some(Ok(f))) => f,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            for &b in data.iter() {
                if b != b'\n' {
                    if line.len() >= MAX_EVENT_LINE {
                        return Err(bad(
                            node,
                            format!("an event line over {MAX_EVENT_LINE} bytes"),
                        ));
                    }
                    line.push(b);
                    continue;
                }
                if !line.is_empty() {
                    match serde_json::from_slice::<NodeEvent>(&line) {
                        Ok(ev) => self.relay(node, key, ev, rate),
                        Err(e) => return Err(bad(node, format!("an event that is not one ({e})"))),
                    }
                    line.clear();
                }
            }
        }
    }

    /// Whether `key` waits on nothing now (its relay may end).
    fn done_waiting(&self, key: &(String, String)) -> bool {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.get(key).is_none_or(|s| s.is_empty())
    }

    /// Publishes one of the node's events on the gateway's bus, for the gateway's session,
    /// and crosses off what it settles.
    fn relay(&self, node: &NodeRow, key: &(String, String), ev: NodeEvent, rate: &mut Rate) {
        let outcome = ev.outcome.map(clean_outcome);
        if let Some(o) = &outcome {
            let settled = match o.kind {
                EventKind::Completed | EventKind::Failed => {
                    o.process_id.clone().map(Awaited::Process)
                }
                EventKind::Finished | EventKind::Denied => {
                    o.approval_id.clone().map(Awaited::Approval)
                }
                EventKind::Running => None,
            };
            if let Some(s) = settled {
                let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(set) = live.get_mut(key) {
                    set.remove(&s);
                }
            }
        }
        if !rate.take() {
            return;
        }
        let text = format!(
            "node {}: {}",
            node.name,
            super::resanitized_text(&ev.text, MAX_TEXT)
        );
        match outcome {
            Some(o) => self.bus.publish(&key.1, text, o),
            None => self.bus.publish_text(&key.1, text),
        }
    }

    /// Reads the node's process list once and publishes the end of every awaited process
    /// that ended (or is gone) while no stream was open.
    async fn catch_up(
        &self,
        node: &NodeRow,
        session: &str,
        key: &(String, String),
        rate: &mut Rate,
    ) {
        let awaited: Vec<String> = {
            let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
            live.get(key)
                .map(|s| {
                    s.iter()
                        .filter_map(|a| match a {
                            Awaited::Process(id) => Some(id.clone()),
                            Awaited::Approval(_) => None,
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        if awaited.is_empty() {
            return;
        }
        let body = json!({"session": session, "request": {"action": "list"}});
        let Ok(value) = self
            .nodes
            .forward(
                node,
                session,
                "node-events",
                "process list (following its events)",
                PROCESS_PATH,
                &body,
                Some(Duration::from_secs(30)),
            )
            .await
        else {
            return;
        };
        let Ok(result) = serde_json::from_value::<ToolResult>(value) else {
            return;
        };
        let Details::ProcessList(list) = super::resanitized(result).details else {
            return;
        };
        for id in awaited {
            let row = list.sessions.iter().find(|r| r.process_id == id);
            if row.is_some_and(|r| r.status == Status::Running) {
                continue;
            }
            let (kind, exit) = match row {
                Some(r) => {
                    let exit = ExitInfo {
                        code: r.exit_code,
                        signal: r.exit_signal.clone(),
                        timed_out: false,
                        finished_at_ms: r.ended_at.unwrap_or_default(),
                    };
                    let kind = if exit.success() {
                        EventKind::Completed
                    } else {
                        EventKind::Failed
                    };
                    (kind, exit)
                }
                // Gone from the node's list: removed there, or the node restarted without it.
                None => (
                    EventKind::Failed,
                    ExitInfo {
                        code: None,
                        signal: None,
                        timed_out: false,
                        finished_at_ms: 0,
                    },
                ),
            };
            let ev = NodeEvent {
                text: exit_event(&id, &exit, ""),
                outcome: Some(EventOutcome::ended(kind, &id, &exit, None)),
            };
            self.relay(node, key, ev, rate);
        }
    }
}

/// A token bucket over the events one relay publishes: [`BURST`] at once, [`PER_SEC`] a
/// second after.
struct Rate {
    tokens: f64,
    at: Instant,
}

impl Rate {
    fn new() -> Self {
        Self {
            tokens: BURST as f64,
            at: Instant::now(),
        }
    }

    /// Whether one more event may go out now.
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * PER_SEC as f64;
        self.tokens = (self.tokens + refill).min(BURST as f64);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A node's outcome with its ids escaped and cut (they reach the gateway's edges as data).
fn clean_outcome(mut o: EventOutcome) -> EventOutcome {
    let clean = |s: String| -> String {
        crate::output::escape_display(&s.chars().take(MAX_ID).collect::<String>())
    };
    o.process_id = o.process_id.map(clean);
    o.approval_id = o.approval_id.map(clean);
    o.exit_signal = o.exit_signal.map(clean);
    o
}

fn bad(node: &NodeRow, why: String) -> NodeError {
    NodeError::BadAnswer {
        node: node.name.clone(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_a_relay_may_keep_are_followed() {
        // (id, followable)
        let rows = [
            ("warm-river", true),
            ("0b7c9d2e-1f3a-4b5c-8d9e-0f1a2b3c4d5e", true),
            ("", false),
            ("a\u{1b}[2J", false),
            ("../x", false),
            ("a b", false),
        ];
        for (id, want) in rows {
            assert_eq!(Awaited::Process(id.into()).is_followable(), want, "{id:?}");
        }
        let long = "p".repeat(MAX_ID + 1);
        assert!(!Awaited::Approval(long).is_followable());
        assert!(Awaited::Approval("p".repeat(MAX_ID)).is_followable());
    }

    #[test]
    fn a_flood_is_cut_to_the_rate() {
        let mut r = Rate::new();
        let sent = (0..10_000).filter(|_| r.take()).count();
        // The burst, and what a few milliseconds of refill give.
        assert!(
            (BURST as usize..BURST as usize + 2).contains(&sent),
            "{sent}"
        );
    }

    #[test]
    fn a_nodes_ids_are_escaped_and_cut() {
        let o = clean_outcome(EventOutcome {
            kind: EventKind::Completed,
            approval_id: Some("a\u{1b}[2J".into()),
            process_id: Some("p".repeat(1000)),
            exit_code: Some(0),
            exit_signal: Some("SIG\u{7}".into()),
            timed_out: false,
        });
        assert!(!o.approval_id.unwrap().contains('\u{1b}'));
        assert_eq!(o.process_id.unwrap().chars().count(), MAX_ID);
        assert!(!o.exit_signal.unwrap().contains('\u{7}'));
    }
}
