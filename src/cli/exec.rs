use super::term::{say, say_err, say_part};
use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{bail, Context};
use moat::app::App;
use moat::exec::{Caller, ExecRequest, ToolResult};
use moat::home::Home;

use super::args::ExecArgs;
use super::interrupt;

/// The exit code of a command moat refused to run: the policy said no, an operator denied the
/// approval, a `Security Violation`, or failing elevated gates (README, "Exit codes"). 77 is
/// sysexits' EX_NOPERM, apart from moat's own failure (2), the shell's 126/127 and the
/// signal codes 128 + N, so a script can tell "not allowed" from "ran and failed".
pub const REFUSED: u8 = 77;

/// Whether an error the CLI got is a refusal rather than a failure (see [`REFUSED`]).
pub fn is_refusal(message: &str) -> bool {
    message.starts_with("Security Violation") || message.contains("elevated execution is refused")
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
        host: a.host,
    };
    // Ctrl-C or SIGTERM ends the command this CLI waits on (see interrupt.rs).
    let followed = std::sync::OnceLock::new();
    let through_daemon = interrupt::or_interrupt(daemon_exec(&home, &a.session, &req, &followed));
    let daemon_result = match through_daemon.await? {
        Err(sig) => return interrupt::ended_by_daemon(&home, &a.session, &followed, sig).await,
        Ok(r) => r?,
    };
    let result = match daemon_result {
        // The daemon holds the approval's waiter and runs the plan once it is decided; its
        // outcome reaches `moat events`.
        Some(r) => r,
        None => {
            let app = App::open(home).await.context("start moat")?;
            let mut events = app.registry.events().subscribe();
            let caller = Caller::cli();
            let run = app.exec.run_for(&caller, &a.session, &req, true);
            let result = match interrupt::or_interrupt(run).await? {
                Err(sig) => return Ok(interrupt::ended_locally(&app, sig).await),
                Ok(r) => r?,
            };
            if result.status() == "approval-pending" {
                let waiting = wait_for_approval(&result, &mut events, a.json);
                return match interrupt::or_interrupt(waiting).await? {
                    Ok(r) => r,
                    Err(sig) => Ok(sig.exit_code()),
                };
            }
            result
        }
    };
    if result.details["denied"] == true {
        // The refusal sentence, exactly as the tool result carries it.
        if a.json {
            super::term::json(&result)?;
        } else {
            say_err!("{}", result.text());
        }
        return Ok(ExitCode::from(REFUSED));
    }
    if a.json {
        super::term::json(&result)?;
    } else if result.status() == "running" {
        say!("{}", result.text());
    } else {
        // The command's own output on stdout; moat's remarks (timeout, signal) on stderr.
        let output = result.details["aggregated"].as_str().unwrap_or_default();
        say_part!("{output}");
        if !output.is_empty() && !output.ends_with('\n') {
            say!();
        }
        if result.details["exitCode"].is_null() || result.details["timedOut"] == true {
            if let Some((_, note)) = result.text().rsplit_once("\n\n") {
                say_err!("moat: {note}");
            }
        }
    }
    let code = match result.status() {
        "completed" | "running" => 0,
        _ => result.details["exitCode"]
            .as_i64()
            // A command a signal ended exits 128 + N, as in a shell.
            .or_else(|| {
                let signal = result.details["exitSignal"].as_str()?;
                moat::process::signal_number(signal).map(|n| 128 + n)
            })
            .map(|c| c.clamp(1, 255))
            .unwrap_or(1),
    };
    Ok(ExitCode::from(code as u8))
}

/// The approval was registered: this moat holds its waiter, so it stays until an operator
/// decides (`moat approvals approve|deny`) or the approval expires, then reports the outcome.
async fn wait_for_approval(
    pending: &ToolResult,
    events: &mut tokio::sync::broadcast::Receiver<moat::process::SessionEvent>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let id = pending.details["approvalId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if json {
        super::term::json(pending)?;
    } else {
        say_err!("{}", pending.text());
        say_err!("moat: waiting for an operator's decision (Ctrl-C leaves it pending)");
    }
    let needle = format!("id={id},");
    loop {
        let event = match events.recv().await {
            Ok(e) => e,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(e) => anyhow::bail!("follow approval {id}: {e}"),
        };
        if !event.text.contains(&needle) {
            continue;
        }
        let denied = event.text.starts_with("Exec denied");
        if json {
            say!("{}", serde_json::json!({"event": event.text}));
        } else if denied {
            // A refusal, like the policy's: its sentence on stderr.
            say_err!("{}", event.text);
        } else {
            say!("{}", event.text);
        }
        if denied {
            return Ok(ExitCode::from(REFUSED));
        }
        if let Some(rest) = event.text.strip_prefix("Exec finished") {
            let head = rest.lines().next().unwrap_or_default();
            let code = head
                .rsplit_once("code ")
                .and_then(|(_, c)| c.trim_end_matches(')').parse::<i64>().ok())
                .unwrap_or(1);
            return Ok(ExitCode::from(code.clamp(0, 255) as u8));
        }
    }
}

/// Runs through a running `moat serve` when there is one. The daemon yields long commands to
/// the background; unless the user asked for that, follow the process to its end so the CLI
/// still prints the whole output and exits with the command's code.
async fn daemon_exec(
    home: &Home,
    session: &str,
    req: &ExecRequest,
    followed: &std::sync::OnceLock<String>,
) -> anyhow::Result<Option<ToolResult>> {
    let path = format!("/v1/sessions/{session}/exec");
    let Some(result) = super::daemon::post(home, &path, &serde_json::to_value(req)?).await? else {
        return Ok(None);
    };
    let chose_background = req.background == Some(true) || req.yield_ms.is_some();
    if result.status() != "running" || chose_background {
        return Ok(Some(result));
    }
    let id = result.details["sessionId"].clone();
    let _ = followed.set(id.as_str().unwrap_or_default().to_string());
    let process = format!("/v1/sessions/{session}/process");
    loop {
        let poll = serde_json::json!({"action": "poll", "sessionId": id, "timeout": 120000});
        let Some(p) = super::daemon::post(home, &process, &poll).await? else {
            anyhow::bail!("follow process {id}: moat serve stopped");
        };
        if p.status() != "running" {
            // The CLI printed it all: nothing is left for `process` to show.
            let clear = serde_json::json!({"action": "clear", "sessionId": id});
            super::daemon::post(home, &process, &clear).await?;
            let exit = moat::process::ExitInfo {
                code: p.details["exitCode"].as_i64(),
                signal: p.details["exitSignal"].as_str().map(str::to_string),
                timed_out: false,
                finished_at_ms: 0,
            };
            let aggregated = p.details["aggregated"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let cwd = result.details["cwd"].as_str().unwrap_or_default();
            return Ok(Some(moat::exec::finished_result(
                &exit, aggregated, false, 0, cwd, None,
            )));
        }
    }
}
