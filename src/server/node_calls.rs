//! How many calls each paired gateway has in flight on this node (docs/nodes.md, "Bounds"):
//! one gateway's long waits (a foreground command, a poll) cannot take every connection the
//! node's listener allows from the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Calls in flight, per gateway. A std mutex: held for a map update, never across `.await`.
#[derive(Default)]
pub struct InFlight {
    /// Gateway pairing name → calls it has in flight now.
    counts: Mutex<HashMap<String, usize>>,
}

/// One call's place in the count; given back when dropped (the call ended or was cancelled).
pub struct CallSlot {
    /// The table it counts in.
    table: Arc<InFlight>,
    /// The gateway it counts for.
    gateway: String,
}

impl InFlight {
    /// A place for one more call of `gateway`, or how many it already has when it is at `cap`.
    pub fn take(self: &Arc<Self>, gateway: &str, cap: usize) -> Result<CallSlot, usize> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(gateway.to_string()).or_default();
        if *n >= cap {
            return Err(*n);
        }
        *n += 1;
        Ok(CallSlot {
            table: self.clone(),
            gateway: gateway.to_string(),
        })
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        let mut counts = self.table.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.gateway) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.gateway);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gateway_has_its_own_cap_and_slots_come_back() {
        let t = Arc::new(InFlight::default());
        let a1 = t.take("a", 2).unwrap();
        let _a2 = t.take("a", 2).unwrap();
        assert_eq!(t.take("a", 2).err(), Some(2));
        // Another gateway is not held back by the first one's calls.
        let _b = t.take("b", 2).unwrap();
        drop(a1);
        let _a3 = t.take("a", 2).unwrap();
        assert_eq!(t.take("a", 2).err(), Some(2));
    }
}
