//! MCP over stdio: `moat mcp`. The client owns our stdin and stdout, so nothing but protocol
//! messages may be written to stdout (logs go to stderr).

use std::sync::Arc;

use rmcp::ServiceExt;

use super::server::{McpContext, MoatMcp};
use crate::session::{validate_key, KeyError};

#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("start the MCP session over stdio: {0}")]
    Start(String),
    #[error("serve MCP over stdio: {0}")]
    Serve(#[from] tokio::task::JoinError),
}

/// Serves `session` on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(ctx: Arc<McpContext>, session: String) -> Result<(), StdioError> {
    validate_key(&session)?;
    let running = MoatMcp::for_session(ctx, session)
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| StdioError::Start(e.to_string()))?;
    running.waiting().await?;
    Ok(())
}
