//! When a daemon stops on its own (docs/ARCHITECTURE.md, "Daemon"):
//!
//! - a daemon that a client started on demand (`moat serve --idle-exit N`) stops after N
//!   seconds with nothing to do: no open connection, no running process, no pending approval;
//! - every daemon stops when its socket file is removed or replaced, because no client can
//!   reach it any more (its home was deleted, or another moat took the path).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::limits::Tracker;
use super::routes::ServerState;

/// How often the watcher looks.
const TICK: Duration = Duration::from_secs(1);

/// What keeps a daemon up, counted once per tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub connections: usize,
    pub running: usize,
    pub pending_approvals: usize,
}

impl Load {
    pub fn idle(&self) -> bool {
        self.connections == 0 && self.running == 0 && self.pending_approvals == 0
    }
}

/// Counts what keeps the daemon up right now.
pub fn load(state: &ServerState, tracker: &Tracker) -> Load {
    Load {
        connections: tracker.connections(),
        running: state.app.registry.running(),
        pending_approvals: state
            .app
            .store
            .pending_approval_ids()
            .map(|s| s.len())
            .unwrap_or(0),
    }
}

/// The watcher's owner task; cancels `shutdown` when the daemon should stop.
pub fn spawn(
    state: Arc<ServerState>,
    tracker: Arc<Tracker>,
    socket: PathBuf,
    idle_exit: Option<Duration>,
    shutdown: CancellationToken,
) {
    let bound = std::fs::symlink_metadata(&socket)
        .map(|m| (m.dev(), m.ino()))
        .ok();
    tokio::spawn(async move {
        let mut idle_since: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(TICK) => {}
            }
            let now = std::fs::symlink_metadata(&socket)
                .map(|m| (m.dev(), m.ino()))
                .ok();
            if now.is_none() || now != bound {
                tracing::warn!(
                    socket = %socket.display(),
                    "the socket was removed or replaced; no client can reach this daemon, stopping"
                );
                shutdown.cancel();
                return;
            }
            let Some(limit) = idle_exit else { continue };
            if load(&state, &tracker).idle() {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= limit {
                    tracing::info!(
                        secs = limit.as_secs(),
                        "idle with no process or approval to own, stopping"
                    );
                    shutdown.cancel();
                    return;
                }
            } else {
                idle_since = None;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_connection_process_or_approval_keeps_it_up() {
        let none = Load {
            connections: 0,
            running: 0,
            pending_approvals: 0,
        };
        assert!(none.idle());
        for busy in [
            Load {
                connections: 1,
                ..none
            },
            Load { running: 1, ..none },
            Load {
                pending_approvals: 1,
                ..none
            },
        ] {
            assert!(!busy.idle(), "{busy:?}");
        }
    }
}
