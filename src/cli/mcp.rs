use std::process::ExitCode;

use moat::home::Home;
use moat::mcp::{serve_stdio, McpContext};

use super::args::McpArgs;

/// The MCP protocol is spoken here; every tool call goes to the home's daemon (started on
/// demand), which owns the commands. A client that goes away closes its calls' connections,
/// and the daemon ends the foreground commands they were waiting on.
pub async fn run(home: Home, a: McpArgs) -> anyhow::Result<ExitCode> {
    let client = super::daemon::client(&home).await?;
    serve_stdio(McpContext::remote(client), a.session).await?;
    Ok(ExitCode::SUCCESS)
}
