//! `moat mcp`: the MCP server over stdio for one session, every tool call sent to the daemon.

use std::process::ExitCode;

use moat::home::Home;
use moat::mcp::{serve_stdio, McpContext};

use super::args::McpArgs;

/// The MCP protocol is spoken here; every tool call goes to the home's daemon (started on
/// demand), which owns the commands. A client that goes away closes its calls' connections,
/// and the daemon ends the foreground commands they were waiting on.
pub async fn run(home: Home, a: McpArgs) -> anyhow::Result<ExitCode> {
    let (config, _) = moat::config::load(&home.config_file())?;
    let client = moat::daemon::connect(&home, &config).await?;
    let process_tool = config.exec.process_tool && !a.no_process_tool;
    serve_stdio(McpContext::remote(client, process_tool), a.session).await?;
    Ok(ExitCode::SUCCESS)
}
