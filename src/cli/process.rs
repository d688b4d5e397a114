//! `moat process`: the `process` tool from the command line (list, poll, log, write, kill,
//! clear, remove), its failures in the CLI's words.

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
        char_offset: a.char_offset,
        timeout: a.timeout,
        node: a.node,
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
        // Refusals (a malformed call was checked above) in the API's "failed to …" words.
        Err(e @ ClientError::Refused { .. }) => return Err(super::failure::from_client(e)),
        Err(e) => return Err(e).context("reach moat serve"),
    };
    if a.json {
        super::term::json(&result)?;
    } else if result.is_error() {
        say!("{}", cli_words(result.text(), &a.session));
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

/// A failed result's text as a CLI user reads it. The tool's sentences call a process a
/// "session" (the words agents were trained on, docs/mcp.md); on the command line a session
/// is `--session`, so these name the process, its session and the flags that help. Any
/// other text is shown as it is; `--json` keeps the tool's own.
fn cli_words(text: &str, session: &str) -> String {
    let list = format!("`moat process list --session {session}`");
    if let Some(id) = text.strip_prefix("No session found for ") {
        format!("No process {id} in session {session} (see {list}).")
    } else if let Some(id) = text.strip_prefix("No active session found for ") {
        format!("Process {id} in session {session} is not running (see {list}).")
    } else if let Some(id) = text.strip_prefix("No finished session found for ") {
        format!(
            "Process {id} in session {session} is still running: end it first with \
             `moat process kill --session {session} --id {id}`, or use remove."
        )
    } else if let Some(rest) = text.strip_prefix("Session ") {
        match rest.split_once(" stdin is not writable") {
            Some((id, why)) => format!(
                "Process {id}'s stdin is not writable{} (a process started with --background \
                 keeps its stdin open).",
                why.trim_end_matches('.')
            ),
            None => text.to_string(),
        }
    } else if text == "No key data provided." {
        "Give the keys to send with --key NAME, --hex BYTE or --literal TEXT.".to_string()
    } else if text == "No paste text provided." {
        "Give the text to paste with --text TEXT.".to_string()
    } else {
        text.to_string()
    }
}

/// Why `moat process` cannot make a call, as a sentence naming the CLI's flags.
fn refusal(e: &CallError) -> String {
    match e {
        CallError::UnknownAction(action) => format!(
            "failed to run `moat process {}`: there is no such action; use one of {}.",
            moat::output::escape_display(action),
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

    /// The tool's failed results that say "session" for a process, in the CLI's words.
    #[test]
    fn failed_results_name_processes_and_flags() {
        let rows = [
            (
                "No session found for warm-river",
                "No process warm-river in session s (see `moat process list --session s`).",
            ),
            (
                "No active session found for warm-river",
                "Process warm-river in session s is not running (see `moat process list --session s`).",
            ),
            (
                "No finished session found for warm-river",
                "Process warm-river in session s is still running: end it first with `moat process kill --session s --id warm-river`, or use remove.",
            ),
            (
                "Session warm-river stdin is not writable.",
                "Process warm-river's stdin is not writable (a process started with --background keeps its stdin open).",
            ),
            (
                "Session warm-river stdin is not writable: broken pipe",
                "Process warm-river's stdin is not writable: broken pipe (a process started with --background keeps its stdin open).",
            ),
            (
                "No key data provided.",
                "Give the keys to send with --key NAME, --hex BYTE or --literal TEXT.",
            ),
            ("No paste text provided.", "Give the text to paste with --text TEXT."),
            ("Failed to read the log of x: gone", "Failed to read the log of x: gone"),
        ];
        for (tool, want) in rows {
            assert_eq!(cli_words(tool, "s"), want, "{tool}");
        }
    }

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
