//! `moat exec`: one command through the daemon, its output printed as it arrives, the exit
//! code the command's (README, "Exit codes of `moat exec`").

use super::term::{err_part, part, say, say_err, say_part};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::OnceLock;

use anyhow::{bail, Context};
use moat::contract::{Status, ToolResult};
use moat::daemon::{DaemonClient, WAIT_HEADER};
use moat::home::Home;
use moat::process::{EventKind, EventOutcome};
use moat::tools::ExecRequest;
use serde_json::Value;

use super::args::ExecArgs;
use super::interrupt::{self, Waiting};

pub use super::exit::REFUSED;

/// How a foreground exec ended, as the daemon reported it.
enum Ended {
    /// The tool result (finished, running in the background, or refused); boxed, as it is
    /// far larger than an exit code. `streamed`: the command's output was shown as it was
    /// produced, so the result's copy of it is not printed again.
    Result {
        result: Box<ToolResult>,
        streamed: bool,
    },
    /// An approval's outcome: the command's exit code, or refused.
    Approval(ExitCode),
}

pub async fn run(home: Home, a: ExecArgs) -> anyhow::Result<ExitCode> {
    let mut env = BTreeMap::new();
    for kv in &a.env {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("parse --env `{kv}`: expected KEY=VALUE");
        };
        env.insert(k.to_string(), v.to_string());
    }
    let req = ExecRequest {
        command: a.command.join(" "),
        workdir: a.workdir,
        env,
        yield_ms: a.yield_ms,
        background: a.background.then_some(true),
        timeout: a.timeout,
        pty: a.pty.then_some(true),
        security: a.security,
        ask: a.ask,
        elevated: a.elevated.then_some(true),
        host: if a.node.is_some() && a.host.is_none() {
            Some("node".into())
        } else {
            a.host
        },
        node: a.node,
        node_host: a.node_host,
        shell: None,
        user: None,
        start_in: None,
        edge_env: Default::default(),
    };
    let (config, _) = moat::config::load(&home.config_file())?;
    // No health round trip first: the exec call itself finds out whether the daemon fits
    // (docs/ARCHITECTURE.md, "Daemon").
    let client = moat::daemon::unchecked(&home, &config);
    if a.workspace.is_some() {
        moat::daemon::connect(&home, &config).await?;
        // Creates the session with it, or checks that it already has this very workspace.
        let ws = a.workspace.as_deref();
        let mode = moat::session::setup::WorkspaceMode {
            read_only: a.read_only,
            git_writable: a.git_writable,
        };
        super::sessions::create(&client, &a.session, ws, mode, None, None).await?;
    }
    // Ctrl-C or SIGTERM ends the command this CLI waits on, and what it printed until it
    // ended is shown before the sentence that says so (see interrupt.rs).
    let waiting = OnceLock::new();
    let call = follow(
        (&home, &config),
        &client,
        &a.session,
        &req,
        &waiting,
        a.json,
    );
    tokio::pin!(call);
    let ended = match interrupt::or_interrupt(call.as_mut()).await? {
        Err(sig) => {
            return interrupt::ended_after(&client, &a.session, &waiting, sig, call).await;
        }
        Ok(r) => r?,
    };
    let (result, streamed) = match ended {
        Ended::Approval(code) => return Ok(code),
        Ended::Result { result, streamed } => (*result, streamed),
    };
    if result.details.is_denied() {
        // The refusal sentence, exactly as the tool result carries it.
        if a.json {
            super::term::json(&result)?;
        } else {
            say_err!("{}", result.text());
        }
        return Ok(ExitCode::from(exit_code(&result)));
    }
    if a.json {
        super::term::json(&result)?;
    } else if let Some(text) = background_text(&result, &a.session) {
        say!("{text}");
    } else {
        // The command's own output on stdout (already shown as it was produced, from a
        // daemon that streams it); moat's remarks (timeout, signal) on stderr.
        if !streamed {
            let output = result.details.aggregated().unwrap_or_default();
            say_part!("{output}");
            if !output.is_empty() && !output.ends_with('\n') {
                say!();
            }
        }
        for note in remarks(&result) {
            say_err!("moat: {}", in_cli_words(note, &a.session));
        }
    }
    Ok(ExitCode::from(exit_code(&result)))
}

/// `moat exec`'s exit code for a result (README, "Exit codes of `moat exec`").
fn exit_code(result: &ToolResult) -> u8 {
    super::exit::code(super::exit::of_result(result))
}

/// Runs the call through the daemon and reads its lines (docs/ARCHITECTURE.md, "Daemon"):
/// the process id when the command starts, its output as it is produced (printed as it
/// arrives, as `moat run` prints its stream; not with `--json`, which prints the one final
/// result), the result when it ends, and for a command that waits for an operator, the
/// approval's outcome.
async fn follow(
    (home, config): (&Home, &moat::config::Config),
    client: &DaemonClient,
    session: &str,
    req: &ExecRequest,
    waiting: &OnceLock<Waiting>,
    json: bool,
) -> anyhow::Result<Ended> {
    let path = format!("/v1/sessions/{session}/exec");
    let body = serde_json::to_value(req)?;
    let headers = [(WAIT_HEADER, "end".to_string())];
    let mut lines =
        super::daemon::first_lines(home, config, client, &path, &body, &headers).await?;
    // Whether output arrived on the stream; the last line it ended on, so a line the command
    // left open is closed before moat's remarks.
    let mut streamed = false;
    let mut open_line = false;
    while let Some(line) = lines
        .next_line()
        .await
        .context("read the answer of moat serve")?
    {
        let v: Value = serde_json::from_str(&line).context("parse the answer of moat serve")?;
        if let Some(text) = v["stdout"].as_str() {
            if !json && !text.is_empty() {
                part(text);
                streamed = true;
                open_line = !text.ends_with('\n');
            }
        } else if let Some(text) = v["stderr"].as_str() {
            // moat's own notes about the stream (bytes freed before they were passed on).
            if !json {
                err_part(text);
            }
        } else if let Some(id) = v["started"].as_str() {
            let _ = waiting.set(Waiting::Process(id.to_string()));
        } else if let Some(e) = super::failure::from_line(&v) {
            return Err(e);
        } else if let Some(event) = v["event"].as_str() {
            let outcome = serde_json::from_value(v["outcome"].clone()).ok();
            let result: Option<ToolResult> = serde_json::from_value(v["result"].clone()).ok();
            if let Some(code) = approval_event(event, outcome, result.as_ref(), json) {
                return Ok(Ended::Approval(code));
            }
        } else if !v["result"].is_null() {
            let result: ToolResult = serde_json::from_value(v["result"].clone())
                .context("parse the tool result of moat serve")?;
            // A node's approval is its operator's, decided there; its outcome never comes
            // back on this answer (docs/nodes.md, "Approvals").
            if result.status() != Some(Status::ApprovalPending) || req.for_node() {
                if open_line {
                    say!();
                }
                return Ok(Ended::Result {
                    result: Box::new(result),
                    streamed,
                });
            }
            // The daemon holds the approval's waiter and runs the plan once an operator
            // decides (`moat approvals approve|deny`); its outcome follows on this answer.
            let id = result.details.approval_id().unwrap_or_default();
            let _ = waiting.set(Waiting::Approval(id.to_string()));
            if json {
                super::term::json(&result)?;
            } else {
                say_err!("{}", result.text());
                say_err!("moat: waiting for an operator's decision (Ctrl-C leaves it pending)");
            }
        }
    }
    bail!("follow the command: moat serve stopped before it ended")
}

/// Prints one event of a pending approval, after the approved command's output when it
/// carries it; its exit code once it is the outcome.
fn approval_event(
    text: &str,
    outcome: Option<EventOutcome>,
    result: Option<&ToolResult>,
    json: bool,
) -> Option<ExitCode> {
    let outcome = outcome?;
    let denied = outcome.kind == EventKind::Denied;
    if json {
        let mut v = serde_json::json!({ "event": text });
        if let Some(r) = result {
            v["result"] = serde_json::json!(r);
        }
        say!("{v}");
    } else if denied {
        // A refusal, like the policy's: its sentence on stderr.
        say_err!("{text}");
    } else {
        // The command's own output on stdout, whole (up to the cap) and with its lines, as
        // for any other run; the outcome's sentence after it, on stderr.
        if let Some(output) = result.and_then(|r| r.details.aggregated()) {
            say_part!("{output}");
            if !output.is_empty() && !output.ends_with('\n') {
                say!();
            }
        }
        say_err!("{text}");
    }
    super::exit::of_outcome(&outcome).map(|end| ExitCode::from(super::exit::code(end)))
}

/// What a command that moved to the background prints, in the CLI's own words (the tool
/// result's text speaks of the process tool).
fn background_text(result: &ToolResult, session: &str) -> Option<String> {
    let moat::contract::Details::Running(r) = &result.details else {
        return None;
    };
    let id = &r.process_id;
    Some(format!(
        "running in the background as process {id}; follow it with `moat process poll --session {session} --id {id}` (log, write, kill: `moat process --help`)"
    ))
}

/// A remark of the tool result in the CLI's words: the timeout advice names the CLI's flags
/// and commands, not the tool's parameters.
fn in_cli_words(note: &str, session: &str) -> String {
    match note.strip_prefix("Command timed out after ") {
        Some(rest) => {
            let secs = rest.split(' ').next().unwrap_or("?");
            format!(
                "the command timed out after {secs} seconds and was ended (exit 124); give it longer with --timeout SECS (0 = none), or start it with --background and follow it with `moat process poll --session {session} --id ID`"
            )
        }
        None => note.to_string(),
    }
}

/// moat's own sentences after a command's output (timeout, signal, a limit that was reached,
/// leftovers ended), for stderr. An exit code the shell reports is left to the exit status.
fn remarks(result: &ToolResult) -> Vec<&str> {
    let d = &result.details;
    let text = result.text();
    // The text starts with the output itself (or "(no output)"); what follows is moat's.
    let body = d.aggregated().unwrap_or_default().trim_end_matches('\n');
    let rest = if body.trim().is_empty() {
        text.strip_prefix("(no output)")
    } else {
        text.strip_prefix(body)
    };
    let rest = rest.unwrap_or_else(|| text.rsplit_once("\n\n").map_or("", |(_, last)| last));
    rest.split("\n\n")
        .filter(|p| !p.trim().is_empty())
        .filter(|p| {
            !(p.starts_with("Command exited with code ") && !d.timed_out() && !d.has_limit())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat::contract::{
        finished_result, running_result, with_limit, Denied, Details, Limit, NotStarted,
    };
    use moat::contract::{ExitInfo, LimitHit, LimitKind};

    fn finished(code: Option<i64>, signal: Option<&str>, timed_out: bool) -> ToolResult {
        let exit = ExitInfo {
            code,
            signal: signal.map(str::to_string),
            timed_out,
            finished_at_ms: 0,
        };
        finished_result(&exit, "out\n".into(), false, 1, "/w", Some(5))
    }

    /// The exit code and moat's remarks read from the typed result, for every shape `moat
    /// exec` ends with (README, "Exit codes of `moat exec`").
    #[test]
    fn exit_codes_and_remarks_by_shape() {
        let pids = LimitHit {
            kind: LimitKind::Pids,
            value: Some(512),
        };
        let rows: Vec<(&str, ToolResult, u8, Vec<&str>)> = vec![
            ("completed", finished(Some(0), None, false), 0, vec![]),
            ("exit 3", finished(Some(3), None, false), 3, vec![]),
            (
                "signal",
                finished(None, Some("SIGKILL"), false),
                137,
                vec!["Command aborted by signal SIGKILL"],
            ),
            (
                "timeout",
                finished(Some(143), Some("SIGTERM"), true),
                124,
                vec!["Command timed out after 5 seconds. If it needs longer, re-run with a higher timeout (e.g. timeout=60), or start it with background=true and follow it with the process tool."],
            ),
            (
                "exit 0 at a limit",
                with_limit(finished(Some(0), None, false), &pids),
                1,
                vec!["The process limit (512) was reached: the sandbox refused to start more processes while this command ran (sandbox.pids_limit)."],
            ),
            (
                "exit 2 at a limit",
                with_limit(finished(Some(2), None, false), &pids),
                2,
                vec!["Command exited with code 2", "The process limit (512) was reached: the sandbox refused to start more processes while this command ran (sandbox.pids_limit)."],
            ),
            (
                "running",
                running_result("p", Some(7), 1, "/w", String::new()),
                0,
                vec![],
            ),
            (
                "denied",
                ToolResult::new("Exec denied".into(), Details::Denied(Denied::new("no"))),
                REFUSED,
                vec![],
            ),
            (
                "not started",
                ToolResult::new(
                    "Command could not start (failed to x).\n\nFull.".into(),
                    Details::NotStarted(NotStarted {
                        cwd: "/w".into(),
                        limit: Limit::Pids,
                        status: Status::Failed,
                    }),
                ),
                1,
                vec!["Full."],
            ),
        ];
        assert_eq!(
            in_cli_words(
                "Command timed out after 5 seconds. If it needs longer, re-run with a higher timeout (e.g. timeout=60), or start it with background=true and follow it with the process tool.",
                "main"
            ),
            "the command timed out after 5 seconds and was ended (exit 124); give it longer with --timeout SECS (0 = none), or start it with --background and follow it with `moat process poll --session main --id ID`"
        );
        let running = running_result("p1", Some(7), 1, "/w", String::new());
        let text = background_text(&running, "s").unwrap();
        assert!(
            text.contains("moat process poll --session s --id p1")
                && !text.contains("process tool"),
            "{text}"
        );
        for (name, result, code, notes) in rows {
            assert_eq!(exit_code(&result), code, "{name}");
            if !matches!(result.details, Details::Denied(_) | Details::Running(_)) {
                assert_eq!(remarks(&result), notes, "{name}");
            }
        }
    }
}
