//! What every E2B handler shares: the app, the sandbox table and the keys; and the one way a
//! sandbox ends (a kill, its lifetime, the serving moat's end).

use std::sync::Arc;
use std::time::Duration;

use super::auth::Keys;
use super::sandboxes::Sandboxes;
use crate::app::App;
use crate::store::now_ms;

/// How often lifetimes are checked: a sandbox ends within this of its `endAt`.
const REAP_EVERY: Duration = Duration::from_millis(250);

pub struct E2bState {
    pub app: Arc<App>,
    pub sandboxes: Sandboxes,
    pub keys: Keys,
}

impl E2bState {
    pub fn new(app: Arc<App>) -> Arc<Self> {
        let keys = Keys::new(&app.config.e2b.api_keys);
        Arc::new(Self {
            app,
            sandboxes: Sandboxes::default(),
            keys,
        })
    }

    /// Ends sandbox `id`: out of the table first (no new call finds it), its streams cut,
    /// then its session removed with everything moat made for it. Whether it was there.
    pub async fn kill(&self, id: &str, why: &str) -> bool {
        let Some(sandbox) = self.sandboxes.take(id) else {
            return false;
        };
        sandbox.killed.cancel();
        if let Err(e) = self
            .app
            .remove_session(&sandbox.session, true, &format!("e2b:{why}"))
            .await
        {
            tracing::warn!(sandbox = %id, "failed to remove the sandbox's session: {e}");
        }
        true
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
        for id in self.sandboxes.ids() {
            self.kill(&id, "shutdown").await;
        }
    }
}
