//! MCP over stdio: `moat mcp`. The client owns our stdin and stdout, so nothing but protocol
//! messages may be written to stdout (logs go to stderr).

use std::sync::Arc;

use rmcp::ServiceExt;

use super::server::{McpContext, MoatMcp};
use crate::session::{validate_key, KeyError};
use line_transport::LineTransport;

mod framing;
mod line_transport;

#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("start the MCP session over stdio: {0}")]
    Start(String),
    #[error("serve MCP over stdio: {0}")]
    Serve(#[from] tokio::task::JoinError),
}

/// The transport `moat mcp` serves on: stdin and stdout, one JSON-RPC message per line, with
/// malformed lines answered instead of dropped (docs/mcp.md, "Malformed input"). Whatever
/// serves MCP over stdio hands this to rmcp's `serve`.
pub fn stdio_transport() -> LineTransport<rmcp::transport::StdioReader> {
    let (input, output) = rmcp::transport::stdio_pipes();
    LineTransport::new(input, output)
}

/// Serves `session` on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(ctx: Arc<McpContext>, session: String) -> Result<(), StdioError> {
    validate_key(&session)?;
    let running = MoatMcp::for_session(ctx, session)
        .serve(stdio_transport())
        .await
        .map_err(|e| StdioError::Start(e.to_string()))?;
    running.waiting().await?;
    Ok(())
}
