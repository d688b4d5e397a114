use super::term::say;
use std::process::ExitCode;

use anyhow::Context;
use moat::app::App;
use moat::home::Home;
use moat::tools::{ProcessRequest, ProcessTool};

use super::args::ProcessArgs;

pub async fn run(home: Home, a: ProcessArgs) -> anyhow::Result<ExitCode> {
    let req = ProcessRequest {
        action: a.action,
        session_id: a.id,
        data: a.data,
        eof: a.eof.then_some(true),
        keys: (!a.keys.is_empty()).then_some(a.keys),
        hex: (!a.hex.is_empty()).then_some(a.hex),
        literal: a.literal,
        text: a.text,
        bracketed: a.no_bracketed.then_some(false),
        offset: a.offset,
        limit: a.limit,
        timeout: a.timeout,
    };
    let app = App::open(home).await.context("start moat")?;
    let tool = ProcessTool {
        registry: app.registry.clone(),
    };
    let result = tool.run(&a.session, &req).await;
    if a.json {
        super::term::json(&result)?;
    } else {
        say!("{}", result.text());
    }
    Ok(
        if result.is_error() && result.details.get("sessionId").is_none() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}
