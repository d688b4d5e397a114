use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{bail, Context};
use moat::app::App;
use moat::exec::{Caller, ExecRequest, ToolResult};
use moat::home::Home;

use super::args::ExecArgs;

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
    let result = match daemon_exec(&home, &a.session, &req).await? {
        // The daemon holds the approval's waiter and runs the plan once it is decided; its
        // outcome reaches `moat events`.
        Some(r) => r,
        None => {
            let app = App::open(home).await.context("start moat")?;
            let mut events = app.registry.events().subscribe();
            let result = app
                .exec
                .run_for(&Caller::cli(), &a.session, &req, true)
                .await?;
            if result.status() == "approval-pending" {
                return wait_for_approval(&result, &mut events, a.json).await;
            }
            result
        }
    };
    if a.json {
        println!("{}", serde_json::to_string(&result)?);
    } else if result.status() == "running" {
        println!("{}", result.text());
    } else if result.details["denied"] == true {
        // A refusal has no output of its own: say why, or the exit status is all there is.
        eprintln!("moat: {}", result.text());
    } else {
        // The command's own output on stdout; moat's remarks (timeout, signal) on stderr.
        let output = result.details["aggregated"].as_str().unwrap_or_default();
        print!("{output}");
        if !output.is_empty() && !output.ends_with('\n') {
            println!();
        }
        if result.details["exitCode"].is_null() || result.details["timedOut"] == true {
            if let Some((_, note)) = result.text().rsplit_once("\n\n") {
                eprintln!("moat: {note}");
            }
        }
    }
    let code = match result.status() {
        "completed" | "running" => 0,
        _ => result.details["exitCode"]
            .as_i64()
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
        println!("{}", serde_json::to_string(pending)?);
    } else {
        eprintln!("{}", pending.text());
        eprintln!("moat: waiting for an operator's decision (Ctrl-C leaves it pending)");
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
        if json {
            println!("{}", serde_json::json!({"event": event.text}));
        } else {
            println!("{}", event.text);
        }
        if event.text.starts_with("Exec denied") {
            return Ok(ExitCode::from(1));
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
