//! [`Nodes`]: the gateway's paired nodes (docs/nodes.md): pairing one (checked against the
//! node before it is kept), listing them with whether each answers, and forwarding one call,
//! audited here with the pairing's name.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde_json::Value;

use super::wire::{NodeInfo, INFO_PATH};
use super::NodeError;
use crate::store::{NodeRow, Store};

/// How long `moat nodes add` and `moat nodes list` wait for a node's info.
const INFO_SECS: u64 = 10;

/// Whether a paired node answered.
#[derive(Debug, Clone)]
pub enum Reach {
    /// It answered with its info.
    Up(NodeInfo),
    /// It did not, and why ("failed to …" completed).
    Down(String),
}

/// See the module docs. Reads the pairings from the store on every call, so `moat nodes add`
/// and `rm` take effect without restarting the daemon.
pub struct Nodes {
    /// Where the pairings are kept (`nodes` table) and every forwarded call is audited.
    store: Arc<Store>,
    /// `exec.node`: the node a `host: "node"` call without `node` goes to; empty = none.
    default: String,
}

impl Nodes {
    pub fn new(store: Arc<Store>, default: &str) -> Self {
        Self {
            store,
            default: default.trim().to_string(),
        }
    }

    /// The pairing a call names; when it names none, session `session`'s default node (set
    /// by the operator), else `exec.node` (docs/nodes.md, "Calls").
    pub fn resolve(&self, name: Option<&str>, session: &str) -> Result<NodeRow, NodeError> {
        let of_session;
        let name = match name.map(str::trim).filter(|n| !n.is_empty()) {
            Some(n) => n,
            None => {
                of_session = self.store.session_node(session)?;
                match of_session.as_deref() {
                    Some(n) => n,
                    None if !self.default.is_empty() => self.default.as_str(),
                    None => return Err(NodeError::NoNode),
                }
            }
        };
        super::check_name(name)?;
        self.store
            .node(name)?
            .ok_or_else(|| NodeError::Unknown(name.to_string()))
    }

    /// Sends one call to `node`, audited first on this side (`node-forward`, by `actor`,
    /// naming the node and what was sent) and after with how it ended.
    #[allow(clippy::too_many_arguments)]
    pub async fn forward(
        &self,
        node: &NodeRow,
        session: &str,
        actor: &str,
        what: &str,
        path: &str,
        body: &Value,
        within: Option<Duration>,
    ) -> Result<Value, NodeError> {
        let _ = self.store.audit(
            "node-forward",
            None,
            Some(session),
            actor,
            &format!("node {}: {what}", node.name),
        );
        let answer = super::call(
            &node.name,
            &node.url,
            &node.fingerprint,
            &node.token,
            Method::POST,
            path,
            Some(body),
            within,
        )
        .await;
        if let Err(e) = &answer {
            let _ = self.store.audit(
                "node-failed",
                None,
                Some(session),
                actor,
                &format!("failed to {e}"),
            );
        }
        answer.map(|a| a.value)
    }

    /// The node's info, through the pairing `row` (its URL, pin and token).
    pub async fn info(row: &NodeRow) -> Result<NodeInfo, NodeError> {
        let answer = super::call(
            &row.name,
            &row.url,
            &row.fingerprint,
            &row.token,
            Method::GET,
            INFO_PATH,
            None,
            Some(Duration::from_secs(INFO_SECS)),
        )
        .await?;
        serde_json::from_value(answer.value).map_err(|e| NodeError::BadAnswer {
            node: row.name.clone(),
            why: e.to_string(),
        })
    }

    /// Pairs with a node: the name, URL and fingerprint are checked, then the node must
    /// answer through that pin with that token before the pairing is kept.
    pub async fn add(
        &self,
        name: &str,
        url: &str,
        fingerprint: &str,
        token: &str,
    ) -> Result<NodeInfo, NodeError> {
        super::check_name(name)?;
        super::client::authority(url)?;
        let row = NodeRow {
            name: name.to_string(),
            url: url.trim_end_matches('/').to_string(),
            fingerprint: super::parse_fingerprint(fingerprint)?,
            token: token.trim().to_string(),
            added_at_ms: crate::store::now_ms(),
        };
        let info = Self::info(&row).await?;
        self.store.add_node(&row)?;
        let _ = self.store.audit(
            "node-add",
            None,
            None,
            "operator",
            &format!(
                "node {} at {} pinned {}",
                row.name, row.url, row.fingerprint
            ),
        );
        Ok(info)
    }

    /// Every paired node and whether it answers now (asked all at once).
    pub async fn list(&self) -> Result<Vec<(NodeRow, Reach)>, NodeError> {
        let rows = self.store.nodes()?;
        let asks = rows.iter().map(|row| async move {
            match Self::info(row).await {
                Ok(info) => Reach::Up(info),
                Err(e) => Reach::Down(format!("failed to {e}")),
            }
        });
        let reached = futures::future::join_all(asks).await;
        Ok(rows.into_iter().zip(reached).collect())
    }

    /// Forgets node `name`; `false` when it was not paired.
    pub fn remove(&self, name: &str) -> Result<bool, NodeError> {
        super::check_name(name)?;
        let gone = self.store.remove_node(name)?;
        if gone {
            let _ = self.store.audit(
                "node-remove",
                None,
                None,
                "operator",
                &format!("node {name}"),
            );
        }
        Ok(gone)
    }
}
