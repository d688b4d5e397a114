//! An `exec` call with `host: "node"` (docs/nodes.md, "Calls"): nothing of it runs here. The
//! request goes to the paired node less where it runs (that is `nodeHost`) and less anything
//! of this session's (its sticky directory and variables, the configured env): only the env
//! the call passes crosses. The node's answer is hostile input like a sandbox's output: its
//! texts are sanitized again here before any edge shows them.

use std::time::Duration;

use super::elevated::Caller;
use super::error::ExecError;
use super::request::ExecRequest;
use super::tool::ExecTool;
use crate::contract::{validate_env, Details, ToolResult};
use crate::node::{resanitized, Awaited, ForwardedExec, NodeError, EXEC_PATH};

/// What a gateway waits on top of the call's own time: the node's approval bookkeeping,
/// a container's start, the network.
const MARGIN_SECS: u64 = 60;

impl ExecTool {
    /// Forwards one call to its node and answers the node's result.
    pub(super) async fn forward(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        wait_to_end: bool,
    ) -> Result<ToolResult, ExecError> {
        validate_env(&req.env)?;
        let node_host = req.node_host()?;
        let node = self.nodes.resolve(req.node.as_deref(), session)?;
        let mut sent = req.clone();
        sent.host = None;
        sent.elevated = None;
        sent.node = None;
        sent.node_host = None;
        let body = ForwardedExec {
            session: session.to_string(),
            request: serde_json::to_value(&sent).map_err(|e| bad_answer(&node.name, e))?,
            node_host: node_host.as_str().to_string(),
            wait: wait_to_end,
        };
        let body = serde_json::to_value(&body).map_err(|e| bad_answer(&node.name, e))?;
        let what = format!(
            "exec on its {}: {}",
            node_host.as_str(),
            self.approvals.display(&req.command)
        );
        let value = self
            .nodes
            .forward(
                &node,
                session,
                &caller.label(),
                &what,
                EXEC_PATH,
                &body,
                self.forward_within(req, wait_to_end),
            )
            .await?;
        let mut result =
            resanitized(serde_json::from_value(value).map_err(|e| bad_answer(&node.name, e))?);
        // What is left waiting on the node is followed, so its end or its decision reaches
        // this session's events (docs/nodes.md, "Events"); exits only where they are wanted.
        let awaited = match &result.details {
            Details::Running(r) if self.config.exec.notify_on_exit => {
                Some(Awaited::Process(r.process_id.clone()))
            }
            d => d.approval_id().map(|id| Awaited::Approval(id.to_string())),
        };
        if let Some(what) = awaited {
            self.relays.follow(&node, session, what);
        }
        if result.details.approval_id().is_some() {
            // The node's words say "an operator decides": on this side, which one matters.
            if let Some(c) = result.content.first_mut() {
                c.text.push_str(&format!(
                    "\nThis approval is node `{}`'s: its operator decides it on that node; follow the command there with `process` and node `{}`.",
                    node.name, node.name
                ));
            }
        }
        Ok(result)
    }

    /// How long the gateway waits for a node's answer: the yield window (the node answers
    /// by then with a process id), or the command's timeout when the caller waits for its
    /// end; `None` when it waits without a timeout.
    fn forward_within(&self, req: &ExecRequest, wait_to_end: bool) -> Option<Duration> {
        let exec = &self.config.exec;
        let yield_ms = req.yield_window_ms(exec.yield_ms);
        let run = if wait_to_end || req.background != Some(true) && !exec.process_tool {
            req.timeout_secs(exec.timeout_secs)?
        } else {
            yield_ms.div_ceil(1000)
        };
        Some(Duration::from_secs(run + MARGIN_SECS))
    }
}

fn bad_answer(node: &str, e: serde_json::Error) -> ExecError {
    ExecError::Node(NodeError::BadAnswer {
        node: node.to_string(),
        why: e.to_string(),
    })
}
