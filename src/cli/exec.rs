use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{bail, Context};
use moat::app::App;
use moat::exec::ExecRequest;
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
        ..Default::default()
    };
    let app = App::open(home).await.context("start moat")?;
    let result = app.exec.run(&a.session, &req, true).await?;
    if a.json {
        println!("{}", serde_json::to_string(&result)?);
    } else if result.status() == "running" {
        println!("{}", result.text());
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
