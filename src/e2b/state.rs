//! What every E2B handler shares: the app, the sandbox table and the keys; and the one way a
//! sandbox ends (a kill, its lifetime, the serving moat's end).

use std::sync::Arc;
use std::time::Duration;

use super::auth::Keys;
use super::sandboxes::{Sandbox, Sandboxes};
use crate::app::App;
use crate::store::now_ms;

/// How often lifetimes are checked: a sandbox ends within this of its `endAt`.
const REAP_EVERY: Duration = Duration::from_millis(250);
/// How long after a failed removal of a sandbox's session the next try comes.
const REMOVE_RETRY: Duration = Duration::from_secs(5);
/// Tries at the serving moat's end for a sandbox whose removal keeps failing.
const LAST_TRIES: usize = 3;

pub struct E2bState {
    pub app: Arc<App>,
    pub sandboxes: Sandboxes,
    /// Snapshots of sandboxes, for creates and forks (docs/e2b.md, "Snapshots and forks").
    pub snapshots: Arc<super::snapshot_table::Snapshots>,
    /// Watches of directories (docs/e2b.md, "Watching").
    pub watches: super::watch_table::Watches,
    pub keys: Keys,
    /// The daemon's connection caps, which this listener's connections count against.
    pub tracker: Arc<crate::server::limits::Tracker>,
}

impl E2bState {
    pub fn new(app: Arc<App>, tracker: Arc<crate::server::limits::Tracker>) -> Arc<Self> {
        let keys = Keys::new(&app.config.e2b.api_keys);
        Arc::new(Self {
            app,
            sandboxes: Sandboxes::default(),
            snapshots: Default::default(),
            watches: Default::default(),
            keys,
            tracker,
        })
    }

    /// Ends sandbox `id`: hidden from the API and its streams cut at once, then its session
    /// removed with everything moat made for it, and only then out of the table. A removal
    /// that fails leaves it in the table, counted against its key, and the reaper tries again
    /// ([`REMOVE_RETRY`] later) until it is gone. Whether it was there.
    pub async fn kill(&self, id: &str, why: &str) -> bool {
        let Some(sandbox) = self.sandboxes.any(id) else {
            return false;
        };
        self.end(&sandbox, why).await;
        true
    }

    /// [`kill`](Self::kill) of a sandbox in hand, whether or not the table still holds it (a
    /// creation that finished after the sandbox was killed removes what it made).
    pub async fn end(&self, sandbox: &Arc<Sandbox>, why: &str) {
        sandbox.killed.cancel();
        match self
            .app
            .remove_session(&sandbox.session, true, &format!("e2b:{why}"))
            .await
        {
            Ok(_) => {
                self.sandboxes.remove(&sandbox.id);
                // A deleted snapshot's image may have waited for this sandbox.
                self.snapshots.retry_doomed(&self.app).await;
            }
            Err(e) => {
                tracing::warn!(sandbox = %sandbox.id, "failed to remove the sandbox's session (tried again in {} s): {e}", REMOVE_RETRY.as_secs());
                sandbox.retry_removal_at(now_ms() + REMOVE_RETRY.as_millis() as i64);
                self.sandboxes.keep(sandbox.clone());
            }
        }
    }

    /// Ends sandboxes whose lifetime is over, until `stop`; then every sandbox this moat
    /// served, since their E2B identity ends with it (docs/e2b.md, "What is not served").
    pub async fn reap(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(REAP_EVERY) => {}
            }
            for id in self.sandboxes.expired(now_ms()) {
                self.kill(&id, "timeout").await;
            }
        }
        for _ in 0..LAST_TRIES {
            for id in self.sandboxes.ids() {
                self.kill(&id, "shutdown").await;
            }
            if self.sandboxes.ids().is_empty() {
                break;
            }
        }
        self.snapshots.remove_all(&self.app).await;
    }
}
