use super::term::{say, say_err};
use std::process::ExitCode;

use anyhow::Context;
use http::Method;
use moat::contract::ToolResult;
use moat::daemon::ClientError;
use moat::home::Home;
use moat::tools::{CallError, ProcessRequest, ACTIONS};

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
        timeout: a.timeout,
    };
    moat::session::validate_key(&a.session)?;
    // A call the tool cannot parse is refused here, in the CLI's words (its flags), before
    // the daemon would say it in the wire's (`sessionId`).
    if let Err(e) = req.parse() {
        say_err!("moat: {}", refusal(&e));
        return Ok(ExitCode::from(2));
    }
    // Through the daemon, so polls from every client share one cursor per process and a
    // kill is the daemon's (docs/ARCHITECTURE.md, "Daemon").
    let client = super::daemon::client(&home).await?;
    let path = format!("/v1/sessions/{}/process", a.session);
    let body = serde_json::to_value(&req)?;
    let result: ToolResult = match client.call(Method::POST, &path, Some(&body), &[]).await {
        Ok(v) => serde_json::from_value(v).context("parse the tool result of moat serve")?,
        // A malformed call the daemon refused (checked above, so a daemon of another build).
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

/// Why `moat process` cannot make a call, as a sentence naming the CLI's flags.
fn refusal(e: &CallError) -> String {
    match e {
        CallError::UnknownAction(action) => format!(
            "failed to run `moat process {}`: there is no such action; use one of {}.",
            moat::policy::escape_display(action),
            ACTIONS.join(", ")
        ),
        CallError::MissingId => "failed to run the process action: give the process with --id ID \
             (the id `moat exec` printed, or see `moat process list --session S`)."
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every refusal of `moat process`, in the CLI's words: the flag is `--id`, never the
    /// wire's `sessionId` (issue texts, item 12).
    #[test]
    fn refusals_name_cli_flags() {
        let rows = [
            (CallError::MissingId, "failed to run the process action: give the process with --id ID (the id `moat exec` printed, or see `moat process list --session S`)."),
            (
                CallError::UnknownAction("dance".into()),
                "failed to run `moat process dance`: there is no such action; use one of list, poll, log, write, send-keys, submit, paste, kill, clear, remove.",
            ),
            (
                CallError::UnknownAction("x\u{1b}[2J".into()),
                "failed to run `moat process x\\u{001b}[2J`: there is no such action; use one of list, poll, log, write, send-keys, submit, paste, kill, clear, remove.",
            ),
        ];
        for (e, want) in rows {
            let text = refusal(&e);
            assert_eq!(text, want);
            assert!(!text.contains("sessionId"), "{text}");
        }
    }
}
