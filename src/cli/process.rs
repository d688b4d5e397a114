use super::term::say;
use std::process::ExitCode;

use anyhow::Context;
use http::Method;
use moat::contract::ToolResult;
use moat::daemon::ClientError;
use moat::home::Home;
use moat::tools::ProcessRequest;

use super::args::ProcessArgs;

pub async fn run(home: Home, a: ProcessArgs) -> anyhow::Result<ExitCode> {
    let req = ProcessRequest {
        action: a.action,
        process_id: a.id,
        data: a.data,
        eof: a.eof.then_some(true),
        keys: (!a.keys.is_empty()).then_some(a.keys),
        hex: (!a.hex.is_empty()).then_some(a.hex),
        literal: a.literal,
        text: a.text,
        bracketed: a.no_bracketed.then_some(false),
        offset: a.offset,
        limit: a.limit,
        char_offset: a.char_offset,
        timeout: a.timeout,
    };
    moat::session::validate_key(&a.session)?;
    // Through the daemon, so polls from every client share one cursor per process and a
    // kill is the daemon's (docs/ARCHITECTURE.md, "Daemon").
    let client = super::daemon::client(&home).await?;
    let path = format!("/v1/sessions/{}/process", a.session);
    let body = serde_json::to_value(&req)?;
    let result: ToolResult = match client.call(Method::POST, &path, Some(&body), &[]).await {
        Ok(v) => serde_json::from_value(v).context("parse the tool result of moat serve")?,
        // A malformed call (unknown action, missing --id): the tool's own sentence.
        Err(ClientError::Refused {
            status: 400,
            message,
            ..
        }) => ToolResult::failed(message),
        Err(e @ ClientError::Refused { .. }) => return Err(super::failure::from_client(e)),
        Err(e) => return Err(e).context("reach moat serve"),
    };
    if a.json {
        super::term::json(&result)?;
    } else {
        say!("{}", result.text());
    }
    Ok(
        if result.is_error() && result.details.process_id().is_none() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}
