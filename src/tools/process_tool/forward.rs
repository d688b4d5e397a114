//! A `process` call with `node` (docs/nodes.md, "Calls"): the process lives on that node, in
//! the node's session for this one; the call goes there whole (less `node`), and the answer
//! comes back sanitized again. A node that does not answer is a failed result naming it, and
//! its processes are still there when it answers again.

use std::time::Duration;

use super::request::ProcessRequest;
use super::shape::failed;
use super::tool::ProcessTool;
use crate::contract::ToolResult;
use crate::node::{ForwardedProcess, NodeError, PROCESS_PATH};

/// What a gateway waits on top of a poll's own wait.
const MARGIN_SECS: u64 = 60;

impl ProcessTool {
    /// Forwards `req` (which names a node) for `session`; every failure is a failed result
    /// whose text completes "failed to …" and names the node.
    pub async fn forward(&self, session: &str, req: &ProcessRequest) -> ToolResult {
        match self.forward_inner(session, req).await {
            Ok(r) => r,
            Err(e) => failed(format!("Failed to {e}")),
        }
    }

    async fn forward_inner(
        &self,
        session: &str,
        req: &ProcessRequest,
    ) -> Result<ToolResult, NodeError> {
        let node = self.nodes.resolve(req.node.as_deref(), session)?;
        let mut sent = req.clone();
        sent.node = None;
        let bad = |e: serde_json::Error| NodeError::BadAnswer {
            node: node.name.clone(),
            why: e.to_string(),
        };
        let body = ForwardedProcess {
            session: session.to_string(),
            request: serde_json::to_value(&sent).map_err(bad)?,
        };
        let body = serde_json::to_value(&body).map_err(bad)?;
        let wait_ms = req.timeout.unwrap_or(0).min(120_000);
        let what = format!(
            "process {} {}",
            crate::output::escape_display(req.action.trim()),
            crate::output::escape_display(req.process_id.as_deref().unwrap_or("")),
        );
        let value = self
            .nodes
            .forward(
                &node,
                session,
                &format!("session:{session}"),
                &what,
                PROCESS_PATH,
                &body,
                Some(Duration::from_millis(wait_ms) + Duration::from_secs(MARGIN_SECS)),
            )
            .await?;
        let result: ToolResult = serde_json::from_value(value).map_err(bad)?;
        Ok(crate::node::resanitized(result))
    }
}
