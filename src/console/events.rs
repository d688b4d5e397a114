//! `GET /ui/events`: the console's live view (docs/console.md, "Live updates"). The browser
//! cannot send the bearer header the API's event streams need, so the console has its own
//! stream, for the signed-in operator only. It says *that* something changed, never what: the
//! page then fetches its own escaped rendering, so no agent text travels over this stream.
//!
//! A change is a session event (a process ended, an approval ran or was denied) or a new
//! state of the store: a new audit entry (requests, decisions, expiries, allowlist changes,
//! from this daemon, the CLI or another browser), a session used or removed, a process that
//! started or ended.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast::error::RecvError;

use super::sign_in::Operator;
use crate::server::ServerState;

/// How often the store is looked at for changes made by other processes.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A digest of what the pages show; a new value is a change.
fn fingerprint(state: &ServerState) -> [u8; 32] {
    let app = &state.app;
    let mut h = Sha256::new();
    // Listing pending approvals marks the overdue ones expired (and audits that), so an
    // expiry shows up here even when no waiter is left to notice it.
    let pending = app
        .approvals
        .list(Some(crate::store::ApprovalStatus::Pending))
        .map(|r| r.len())
        .unwrap_or(0);
    h.update(pending.to_le_bytes());
    h.update(app.store.audit_head().unwrap_or(0).to_le_bytes());
    for s in app.store.sessions().unwrap_or_default() {
        h.update(s.key.as_bytes());
        h.update([0]);
        h.update(s.container.as_bytes());
        h.update(s.last_used_ms.to_le_bytes());
    }
    h.update(app.registry.running().to_le_bytes());
    h.finalize().into()
}

fn change(what: &'static str) -> Result<Event, Infallible> {
    Ok(Event::default().event("change").data(what))
}

/// See the module docs.
pub async fn events(
    State(state): State<Arc<ServerState>>,
    _op: Operator,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = state.app.registry.events().subscribe();
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let first = fingerprint(&state);
    let shutdown = state.shutdown.clone();
    let stream = futures::stream::unfold(
        (rx, tick, first, state),
        |(mut rx, mut tick, mut last, state)| async move {
            loop {
                tokio::select! {
                    ev = rx.recv() => match ev {
                        Ok(_) => return Some((change("event"), (rx, tick, last, state))),
                        Err(RecvError::Lagged(_)) => return Some((change("event"), (rx, tick, last, state))),
                        Err(RecvError::Closed) => return None,
                    },
                    _ = tick.tick() => {
                        let now = fingerprint(&state);
                        if now != last {
                            last = now;
                            return Some((change("state"), (rx, tick, last, state)));
                        }
                    }
                }
            }
        },
    );
    Sse::new(stream.take_until(shutdown.cancelled_owned())).keep_alive(KeepAlive::default())
}
