use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use moat::app::App;
use moat::home::Home;
use moat::mcp::{serve_stdio, McpContext};

use super::args::McpArgs;

pub async fn run(home: Home, a: McpArgs) -> anyhow::Result<ExitCode> {
    let app = App::open(home).await.context("start moat")?;
    serve_stdio(McpContext::new(Arc::new(app)), a.session).await?;
    Ok(ExitCode::SUCCESS)
}
