//! What an MCP connection runs its tools on. Inside `moat serve` (MCP over HTTP) that is the
//! daemon's own [`App`]; in `moat mcp` (stdio) it is the home's daemon, reached over its
//! socket, so a stdio server never becomes a second owner of the home's state
//! (docs/ARCHITECTURE.md, "Daemon"). Both give the same results: the daemon's HTTP answers
//! are the tool results the in-process call returns.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::Method;
use tokio::sync::broadcast;

use crate::app::App;
use crate::contract::ToolResult;
use crate::daemon::{ClientError, DaemonClient, CALLER_HEADER, WAIT_HEADER};
use crate::error_chain::error_chain;
use crate::process::SessionEvent;
use crate::tools::FileCall;
use crate::tools::ProcessRequest;
use crate::tools::{Caller, ExecRequest};

/// How often an idle event follower checks whether anyone still listens.
const FOLLOWER_CHECK: Duration = Duration::from_secs(30);

#[async_trait]
pub trait Backend: Send + Sync {
    /// One `exec` call with the yield window, or to its end when `to_end` (a server without
    /// the process tool, docs/mcp.md). `Err` is the text of a failed result, ready for the
    /// model.
    async fn exec(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        to_end: bool,
    ) -> Result<ToolResult, String>;
    /// One `process` call.
    async fn process(&self, session: &str, req: &ProcessRequest) -> ToolResult;
    /// One file-tool call (`read_file`, `write_file`, `list_dir`, `apply_patch`).
    async fn files(&self, session: &str, call: &FileCall) -> ToolResult;
    /// The session events (background exits, approvals) from now on.
    fn events(&self, session: &str) -> broadcast::Receiver<SessionEvent>;
}

/// The tools in this process (`moat serve`).
pub struct Local {
    pub app: Arc<App>,
}

#[async_trait]
impl Backend for Local {
    async fn exec(
        &self,
        caller: &Caller,
        session: &str,
        req: &ExecRequest,
        to_end: bool,
    ) -> Result<ToolResult, String> {
        self.app
            .exec
            .run_for(caller, session, req, to_end)
            .await
            .map_err(|e| failure_text(&error_chain(&e)))
    }

    async fn process(&self, session: &str, req: &ProcessRequest) -> ToolResult {
        self.app.process.run(session, req).await
    }

    async fn files(&self, session: &str, call: &FileCall) -> ToolResult {
        match self.app.files.call(session, call).await {
            Ok(r) => r,
            Err(e) => failed(failure_text(&error_chain(&e))),
        }
    }

    fn events(&self, _session: &str) -> broadcast::Receiver<SessionEvent> {
        self.app.registry.events().subscribe()
    }
}

/// The tools of the home's daemon (`moat mcp`), acting as the stdio client of `session`.
pub struct Remote {
    pub client: DaemonClient,
}

#[async_trait]
impl Backend for Remote {
    async fn exec(
        &self,
        _caller: &Caller,
        session: &str,
        req: &ExecRequest,
        to_end: bool,
    ) -> Result<ToolResult, String> {
        // The tool's own sentences for a request it would refuse ("Provide a command to
        // start."), as the in-process tool answers them; the daemon's HTTP words are for HTTP.
        if let Err(e) = req.validate() {
            return Err(failure_text(&e.to_string()));
        }
        // The daemon derives the caller from the header (the stdio identity); a dropped call
        // closes the connection, which ends the command there.
        let body = serde_json::to_value(req).map_err(|e| failure_text(&e.to_string()))?;
        let path = format!("/v1/sessions/{session}/exec");
        let headers = [(CALLER_HEADER, "mcp".to_string())];
        if to_end {
            return self.exec_to_end(&path, &body).await;
        }
        match self
            .client
            .call(Method::POST, &path, Some(&body), &headers)
            .await
        {
            Ok(v) => serde_json::from_value(v)
                .map_err(|e| failure_text(&format!("parse the answer of moat serve: {e}"))),
            Err(ClientError::Refused { message, .. }) => Err(failure_text(
                message.strip_prefix("failed to ").unwrap_or(&message),
            )),
            Err(e) => Err(failure_text(&error_chain(&e))),
        }
    }

    async fn process(&self, session: &str, req: &ProcessRequest) -> ToolResult {
        // A call the tool cannot parse gets the tool's own sentence, as in-process: the
        // daemon's 400 says it in HTTP's words.
        if let Err(e) = req.parse() {
            return failed(e.to_string());
        }
        let body = match serde_json::to_value(req) {
            Ok(b) => b,
            Err(e) => return failed(format!("Invalid process arguments: {e}")),
        };
        let path = format!("/v1/sessions/{session}/process");
        self.tool_call(&path, &body).await
    }

    async fn files(&self, session: &str, call: &FileCall) -> ToolResult {
        let body = match call.body() {
            Ok(b) => b,
            Err(e) => return failed(format!("Invalid file tool arguments: {e}")),
        };
        let path = format!("/v1/sessions/{session}/files/{}", call.endpoint());
        self.tool_call(&path, &body).await
    }

    fn events(&self, session: &str) -> broadcast::Receiver<SessionEvent> {
        let (tx, rx) = broadcast::channel(256);
        let client = self.client.clone();
        let session = session.to_string();
        tokio::spawn(async move {
            let path = format!("/v1/sessions/{session}/events");
            let headers = [(
                http::header::ACCEPT.as_str(),
                "text/event-stream".to_string(),
            )];
            let mut stream = match client.lines(Method::GET, &path, None, &headers).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(
                        "failed to follow the events of session {session}: {}",
                        error_chain(&e)
                    );
                    return;
                }
            };
            loop {
                tokio::select! {
                    ev = stream.next_event() => match ev {
                        Ok(Some(text)) => {
                            let _ = tx.send(SessionEvent { session: session.clone(), text, outcome: None });
                        }
                        _ => return,
                    },
                    _ = tokio::time::sleep(FOLLOWER_CHECK) => {
                        if tx.receiver_count() == 0 {
                            return;
                        }
                    }
                }
            }
        });
        rx
    }
}

impl Remote {
    /// An exec that waits for its command's end (the CLI's `X-Moat-Wait: end` answer, read
    /// up to its result; an approval's later outcome reaches the agent as an event).
    async fn exec_to_end(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<ToolResult, String> {
        let headers = [
            (CALLER_HEADER, "mcp".to_string()),
            (WAIT_HEADER, "end".to_string()),
        ];
        let mut lines = match self
            .client
            .lines(Method::POST, path, Some(body), &headers)
            .await
        {
            Ok(l) => l,
            Err(ClientError::Refused { message, .. }) => {
                return Err(failure_text(
                    message.strip_prefix("failed to ").unwrap_or(&message),
                ))
            }
            Err(e) => return Err(failure_text(&error_chain(&e))),
        };
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => {
                    return Err(failure_text(
                        "read the answer of moat serve: it ended without a result",
                    ))
                }
                Err(e) => return Err(failure_text(&error_chain(&e))),
            };
            let v: serde_json::Value = serde_json::from_str(&line)
                .map_err(|e| failure_text(&format!("parse the answer of moat serve: {e}")))?;
            if let Some(result) = v.get("result") {
                return serde_json::from_value(result.clone())
                    .map_err(|e| failure_text(&format!("parse the answer of moat serve: {e}")));
            }
            if let Some(message) = v["error"].as_str() {
                return Err(failure_text(
                    message.strip_prefix("failed to ").unwrap_or(message),
                ));
            }
        }
    }

    /// One tool call on the daemon whose answer is a tool result. The daemon's refusals (400s:
    /// "sessionId is required …", "failed to use path …") are the tool's own texts.
    async fn tool_call(&self, path: &str, body: &serde_json::Value) -> ToolResult {
        match self.client.call(Method::POST, path, Some(body), &[]).await {
            Ok(v) => serde_json::from_value(v).unwrap_or_else(|e| {
                failed(failure_text(&format!(
                    "parse the answer of moat serve: {e}"
                )))
            }),
            Err(ClientError::Refused { message, .. }) => failed(failure_text(
                message.strip_prefix("failed to ").unwrap_or(&message),
            )),
            Err(e) => failed(failure_text(&error_chain(&e))),
        }
    }
}

/// A failure as the model reads it: contract texts ("Provide a command to start.") are whole
/// sentences and stay as they are; the rest are "failed to …" fragments.
fn failure_text(text: &str) -> String {
    let first = text.chars().next().unwrap_or(' ');
    if first.is_uppercase() {
        text.to_string()
    } else {
        format!("Failed to {text}")
    }
}

pub fn failed(text: String) -> ToolResult {
    ToolResult::failed(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_stay_and_fragments_complete_failed_to() {
        assert_eq!(
            failure_text("Provide a command to start."),
            "Provide a command to start."
        );
        assert_eq!(
            failure_text("create container x"),
            "Failed to create container x"
        );
    }
}
