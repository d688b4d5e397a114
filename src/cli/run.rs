//! `moat run`: one command in a fresh session, for CI and scripts (README, "moat run"). The
//! session is created through the daemon (with the host workspace, if any), the command runs
//! through `POST /v1/sessions/{session}/run`, whose stdout and stderr lines go to moat's own
//! stdout and stderr as they arrive, and the session is removed with everything moat made for
//! it unless `--keep`. moat's exit code is the command's (124 when it timed out, as
//! `timeout(1)`; 77 when the policy refused it). A summary line on stderr names the session,
//! the image and the timings.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::{bail, Context};
use http::Method;
use moat::contract::{Status, ToolResult};
use moat::daemon::DaemonClient;
use moat::home::Home;
use moat::tools::ExecRequest;
use serde_json::Value;

use super::args::RunArgs;
use super::interrupt::{self, Waiting};
use super::term::{err_part, part, say_err};

use super::exit::TIMED_OUT;

pub async fn run(home: Home, a: RunArgs) -> anyhow::Result<ExitCode> {
    let mut env = BTreeMap::new();
    for file in &a.env_file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("read --env-file {}", file.display()))?;
        for (k, v) in parse_env_file(&text)
            .map_err(|e| anyhow::anyhow!("read --env-file {}: {e}", file.display()))?
        {
            env.insert(k, v);
        }
    }
    for kv in &a.env {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("parse --env `{kv}`: expected KEY=VALUE");
        };
        env.insert(k.to_string(), v.to_string());
    }
    let req = ExecRequest {
        command: a.command.join(" "),
        env,
        timeout: a.timeout,
        ..Default::default()
    };
    let t0 = Instant::now();
    let client = super::daemon::client(&home).await?;
    let session = format!(
        "run-{}-{}",
        std::process::id(),
        moat::names::generate(|_| false)
    );
    let created = super::sessions::create(
        &client,
        &session,
        a.workspace.as_deref(),
        moat::session::setup::WorkspaceMode {
            read_only: a.read_only,
            git_writable: a.git_writable,
        },
        a.image.as_deref(),
        a.network.as_deref(),
    )
    .await?;
    let image = created["image"].as_str().unwrap_or("unknown").to_string();
    let t_ready = Instant::now();
    let waiting = OnceLock::new();
    let call = follow(&client, &session, &req, &waiting);
    let outcome = interrupt::or_interrupt(call).await?;
    let t_end = Instant::now();
    let code = match outcome {
        Err(sig) => {
            // The dropped call already ended the command; wait for its end to be recorded,
            // then remove the session whatever --keep says.
            let code = interrupt::ended(&client, &session, &waiting, sig).await?;
            remove(&client, &session).await?;
            return Ok(code);
        }
        Ok(Err(e)) => {
            if !a.keep {
                let _ = remove(&client, &session).await;
            }
            return Err(e);
        }
        Ok(Ok(result)) => exit_code(&result),
    };
    let kept = if a.keep {
        format!(", kept (remove it with `moat sessions rm {session}`)")
    } else {
        remove(&client, &session).await?;
        String::new()
    };
    say_err!(
        "moat run: exit {code}, session {session}, image {image}; ready in {:.2}s, command {:.2}s, total {:.2}s{kept}",
        (t_ready - t0).as_secs_f64(),
        (t_end - t_ready).as_secs_f64(),
        t0.elapsed().as_secs_f64(),
    );
    Ok(ExitCode::from(code))
}

/// Removes the session, its container and the directories moat made for it.
async fn remove(client: &DaemonClient, session: &str) -> anyhow::Result<()> {
    let path = format!("/v1/sessions/{session}?purge=true");
    super::daemon::call(client, Method::DELETE, &path, None)
        .await
        .map(|_| ())
}

/// Streams the run's lines to stdout and stderr; returns its tool result.
async fn follow(
    client: &DaemonClient,
    session: &str,
    req: &ExecRequest,
    waiting: &OnceLock<Waiting>,
) -> anyhow::Result<ToolResult> {
    let path = format!("/v1/sessions/{session}/run");
    let body = serde_json::to_value(req)?;
    let mut lines = super::daemon::lines(client, &path, &body, &[]).await?;
    while let Some(line) = lines
        .next_line()
        .await
        .context("read the answer of moat serve")?
    {
        let v: Value = serde_json::from_str(&line).context("parse the answer of moat serve")?;
        if let Some(text) = v["stdout"].as_str() {
            part(text);
        } else if let Some(text) = v["stderr"].as_str() {
            err_part(text);
        } else if let Some(id) = v["started"].as_str() {
            let _ = waiting.set(Waiting::Process(id.to_string()));
        } else if let Some(e) = super::failure::from_line(&v) {
            return Err(e);
        } else if !v["result"].is_null() {
            let result: ToolResult = serde_json::from_value(v["result"].clone())
                .context("parse the tool result of moat serve")?;
            return Ok(result);
        }
    }
    bail!("follow the command: moat serve stopped before it ended")
}

/// moat's exit code for a run's result; moat's own sentences (refusal, timeout, a limit) go
/// to stderr.
fn exit_code(result: &ToolResult) -> u8 {
    let d = &result.details;
    let pending = result.status() == Some(Status::ApprovalPending);
    if d.is_denied() || pending {
        say_err!("{}", result.text());
        if pending {
            say_err!("moat: moat run does not wait for approvals; the session is removed");
        }
        return super::exec::REFUSED;
    }
    if d.timed_out() {
        say_err!("moat: the command timed out");
        return TIMED_OUT;
    }
    if d.has_limit() {
        // The sentence that says which limit and how to get out of it ends the text.
        if let Some((_, last)) = result.text().rsplit_once("\n\n") {
            say_err!("moat: {last}");
        }
    }
    super::exit::code(super::exit::of_result(result))
}

/// `KEY=VALUE` lines; blank lines and lines starting with `#` are skipped, and an optional
/// `export ` prefix is accepted. The value is taken as written (no quotes removed).
fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("line {}: expected KEY=VALUE", n + 1));
        };
        let k = k.trim();
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(format!("line {}: `{k}` is not a variable name", n + 1));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `moat run`'s exit code read from the typed result: refused, timed out, the command's
    /// own status, 1 for a limit that left it none.
    #[test]
    fn exit_codes_by_shape() {
        use moat::contract::{finished_result, with_limit, Denied, Details};
        use moat::contract::{ExitInfo, LimitHit, LimitKind};
        let finished = |code: Option<i64>, signal: Option<&str>, timed_out: bool| {
            let exit = ExitInfo {
                code,
                signal: signal.map(str::to_string),
                timed_out,
                finished_at_ms: 0,
            };
            finished_result(&exit, String::new(), false, 1, "/w", Some(5))
        };
        let memory = LimitHit {
            kind: LimitKind::Memory,
            value: None,
        };
        let rows = [
            ("completed", finished(Some(0), None, false), 0),
            ("exit 3", finished(Some(3), None, false), 3),
            ("signal", finished(None, Some("SIGKILL"), false), 137),
            ("timeout", finished(None, Some("SIGTERM"), true), TIMED_OUT),
            (
                "exit 0 at a limit",
                with_limit(finished(Some(0), None, false), &memory),
                1,
            ),
            (
                "denied",
                ToolResult::new("Exec denied".into(), Details::Denied(Denied::new("no"))),
                super::super::exec::REFUSED,
            ),
        ];
        for (name, result, code) in rows {
            assert_eq!(exit_code(&result), code, "{name}");
        }
    }

    #[test]
    fn env_files() {
        type Want<'a> = Result<Vec<(&'a str, &'a str)>, &'a str>;
        let rows: &[(&str, Want)] = &[
            (
                "A=1\n\n# c\nB=two words\n",
                Ok(vec![("A", "1"), ("B", "two words")]),
            ),
            ("export C=x=y\n", Ok(vec![("C", "x=y")])),
            ("  D=\n", Ok(vec![("D", "")])),
            ("A=1\nnot a pair\n", Err("line 2")),
            ("=v\n", Err("line 1")),
        ];
        for (text, want) in rows {
            let got = parse_env_file(text);
            match want {
                Ok(pairs) => {
                    let pairs: Vec<(String, String)> = pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    assert_eq!(got.unwrap(), pairs, "{text:?}");
                }
                Err(needle) => assert!(got.unwrap_err().contains(needle), "{text:?}"),
            }
        }
    }
}
