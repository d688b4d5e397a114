//! The watches a moat holds for E2B (docs/e2b.md, "Watching"): the polled watchers by id,
//! and the count of live watches per sandbox that the bounds are held against.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::connect::{Code, RpcError};

/// The most watches one sandbox holds at once (streams and polled watchers together).
pub const MAX_PER_SANDBOX: usize = 8;
/// The most watches this moat holds at once: the machine allows moat's user 128 inotify
/// instances in all (`fs.inotify.max_user_instances`), and other programs need theirs.
pub const MAX_PER_MOAT: usize = 32;

/// One poll: where the owner task sends the changes since the last one.
pub type Ask = oneshot::Sender<Result<Vec<Value>, RpcError>>;

/// A polled watcher's owner task, reached through its channel.
pub struct Polled {
    /// The sandbox it watches: only that sandbox's calls reach it.
    pub sandbox: String,
    pub asks: mpsc::Sender<Ask>,
    /// Its place in the counts, given back when it leaves the table.
    pub _slot: Option<Slot>,
}

/// The watches this moat holds.
#[derive(Default)]
pub struct Watches {
    pub polled: Mutex<HashMap<String, Polled>>,
    /// Live watches (streams and polled) per sandbox.
    live: Arc<Mutex<HashMap<String, usize>>>,
}

/// One live watch, counted until dropped.
pub struct Slot {
    live: Arc<Mutex<HashMap<String, usize>>>,
    sandbox: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut live = self.live.lock().unwrap();
        if let Some(n) = live.get_mut(&self.sandbox) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.sandbox);
            }
        }
    }
}

impl Watches {
    /// A place for one more watch of `sandbox`, unless the sandbox or this moat holds its
    /// bound already.
    pub fn take_slot(&self, sandbox: &str) -> Result<Slot, RpcError> {
        let mut live = self.live.lock().unwrap();
        if live.values().sum::<usize>() >= MAX_PER_MOAT {
            return Err(RpcError::new(
                Code::ResourceExhausted,
                format!("failed to watch: this moat holds {MAX_PER_MOAT} watches already"),
            ));
        }
        let n = live.entry(sandbox.to_string()).or_default();
        if *n >= MAX_PER_SANDBOX {
            return Err(RpcError::new(
                Code::ResourceExhausted,
                format!("failed to watch: this sandbox holds {MAX_PER_SANDBOX} watches already; remove one first"),
            ));
        }
        *n += 1;
        Ok(Slot {
            live: self.live.clone(),
            sandbox: sandbox.to_string(),
        })
    }
}
