//! `[node]`: this moat as a remote node that paired gateways forward `exec` and `process`
//! calls to (docs/nodes.md). Off unless `listen` is set.

use serde::{Deserialize, Serialize};

/// See the module docs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// TCP address of the node's TLS listener, such as `0.0.0.0:7879`; empty = not a node.
    /// It serves the forwarded calls only, never the operator's routes (docs/nodes.md,
    /// "What crosses"); `moat serve --node-listen ADDR` overrides it.
    pub listen: String,
    /// Connections the node's listener holds at once, a gateway's or not yet anyone's; past
    /// it the oldest without a token is closed, or the new one when every place is a
    /// gateway's (docs/nodes.md, "Bounds"). 0 = 64.
    pub max_connections: u32,
    /// Calls one gateway may have in flight at once; past it `429`. 0 = half of the
    /// connection cap, so no one gateway takes them all.
    pub max_calls_per_gateway: u32,
}

impl NodeConfig {
    /// Whether this moat serves as a node.
    pub fn enabled(&self) -> bool {
        !self.listen.trim().is_empty()
    }

    /// The connection cap in force.
    pub fn connection_cap(&self) -> usize {
        if self.max_connections == 0 {
            64
        } else {
            self.max_connections as usize
        }
    }

    /// The per-gateway cap in force.
    pub fn calls_per_gateway(&self) -> usize {
        if self.max_calls_per_gateway == 0 {
            (self.connection_cap() / 2).max(1)
        } else {
            self.max_calls_per_gateway as usize
        }
    }

    /// `listen` must be an address (`HOST:PORT`), so a typo fails at load, naming the key.
    pub fn check(&self) -> Result<(), (String, String)> {
        let l = self.listen.trim();
        if !l.is_empty() && l.parse::<std::net::SocketAddr>().is_err() {
            return Err((
                "node.listen".into(),
                format!("`{l}` is not an address such as 0.0.0.0:7879"),
            ));
        }
        if self.max_connections > 4096 {
            return Err((
                "node.max_connections".into(),
                format!("{} is over 4096", self.max_connections),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_is_an_address() {
        let mut c = NodeConfig::default();
        assert!(!c.enabled());
        c.check().unwrap();
        c.listen = "127.0.0.1:7879".into();
        c.check().unwrap();
        assert!(c.enabled());
        c.listen = "localhost".into();
        assert_eq!(c.check().unwrap_err().0, "node.listen");
    }
}
