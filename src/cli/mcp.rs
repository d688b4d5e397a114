use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use moat::app::App;
use moat::home::Home;
use moat::mcp::{serve_stdio, McpContext};

use super::args::McpArgs;

pub async fn run(home: Home, a: McpArgs) -> anyhow::Result<ExitCode> {
    let app = App::open(home).await.context("start moat")?;
    let registry = app.registry.clone();
    serve_stdio(McpContext::new(Arc::new(app)), a.session).await?;
    // The client went away: calls still waiting on a foreground command were cancelled with
    // the connection. Let their handlers see it, then let those commands be ended and
    // recorded before this process (and the supervisors in it) goes.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    registry
        .wait_cancelled(std::time::Duration::from_millis(
            moat::process::KILL_GRACE_MS + 3000,
        ))
        .await;
    Ok(ExitCode::SUCCESS)
}
