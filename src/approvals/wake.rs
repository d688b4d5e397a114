//! Wakes approval waiters when their approval changes, instead of each one polling the store
//! (docs/approvals.md, "How waiters wake"). A decision written through [`Approvals`] in this
//! process wakes its waiter at once; a decision written by another process (the CLI deciding
//! on the database while no daemon runs, or a second moat) is found by one shared check every
//! [`FALLBACK`], a single query for all waiters.
//!
//! [`Approvals`]: super::Approvals

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use crate::store::Store;

/// How often the shared task looks for decisions written by other processes.
pub const FALLBACK: Duration = Duration::from_secs(2);

/// The waiters of this process, by approval id.
#[derive(Default)]
pub struct Wakeups {
    /// One `Notify` per waited-on approval; `notify_one` keeps a permit when the waiter is not
    /// parked yet, so a wake between its read of the row and its wait is never lost.
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
    /// Whether the shared fallback task runs (started with the first waiter).
    fallback_started: Mutex<bool>,
}

impl Wakeups {
    /// The handle the waiter of `id` parks on; starts the fallback task on first use.
    pub fn register(self: &Arc<Self>, id: &str, store: &Arc<Store>) -> Arc<Notify> {
        self.start_fallback(store);
        self.waiters
            .lock()
            .unwrap()
            .entry(id.to_string())
            .or_default()
            .clone()
    }

    /// The waiter of `id` stops waiting.
    pub fn unregister(&self, id: &str) {
        self.waiters.lock().unwrap().remove(id);
    }

    /// Wakes the waiter of `id`, if this process has one.
    pub fn wake(&self, id: &str) {
        if let Some(n) = self.waiters.lock().unwrap().get(id) {
            n.notify_one();
        }
    }

    /// Waiters registered now.
    pub fn waiting(&self) -> usize {
        self.waiters.lock().unwrap().len()
    }

    fn start_fallback(self: &Arc<Self>, store: &Arc<Store>) {
        let mut started = self.fallback_started.lock().unwrap();
        if *started {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        *started = true;
        rt.spawn(fallback(Arc::downgrade(self), store.clone()));
    }
}

/// Every [`FALLBACK`]: one query for the pending ids, and a wake for each waiter whose
/// approval is no longer among them. Ends when the [`Wakeups`] are gone.
async fn fallback(wakeups: Weak<Wakeups>, store: Arc<Store>) {
    loop {
        tokio::time::sleep(FALLBACK).await;
        let Some(w) = wakeups.upgrade() else { return };
        let waiting: Vec<(String, Arc<Notify>)> = w
            .waiters
            .lock()
            .unwrap()
            .iter()
            .map(|(id, n)| (id.clone(), n.clone()))
            .collect();
        if waiting.is_empty() {
            continue;
        }
        let pending = match store.pending_approval_ids() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "failed to check approvals for outside decisions");
                continue;
            }
        };
        for (id, n) in waiting {
            if !pending.contains(&id) {
                n.notify_one();
            }
        }
    }
}
