//! `moat allowlist …`: run-time allowlist entries (configured ones live in moat.toml).

use std::process::ExitCode;

use anyhow::bail;
use moat::home::Home;
use serde_json::json;

use super::approvals::{open, operator};
use super::args::AllowlistCommand;

fn target(host: &str) -> anyhow::Result<&'static str> {
    match host.trim().to_ascii_lowercase().as_str() {
        "host" | "gateway" => Ok("host"),
        "sandbox" => Ok("sandbox"),
        other => bail!("use host `{other}`: say sandbox or host"),
    }
}

pub fn run(home: Home, cmd: AllowlistCommand) -> anyhow::Result<ExitCode> {
    let a = open(&home)?;
    match cmd {
        AllowlistCommand::List { host, json } => {
            let t = host.as_deref().map(target).transpose()?;
            let rows = a.allowlist(t)?;
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|e| json!({"id": e.id, "host": e.target, "entry": e.entry, "command": e.command.as_deref().map(|c| a.display(c)), "source": e.source, "approvalId": e.approval_id, "addedBy": e.added_by, "addedAtMs": e.added_at_ms}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else if rows.is_empty() {
                println!("no run-time allowlist entries");
            } else {
                for e in rows {
                    let shown = match &e.command {
                        Some(c) => format!("exact command: {}", a.display(c)),
                        None => moat::policy::escape_display(&e.entry),
                    };
                    println!(
                        "{:>4}  {:<7}  {shown}  ({} by {})",
                        e.id, e.target, e.source, e.added_by
                    );
                }
            }
        }
        AllowlistCommand::Add {
            host,
            command,
            entry,
        } => {
            let t = target(&host)?;
            let d = operator(&a, &format!("allowlist add --host {t} {entry}"), None)?;
            let added = if command {
                a.allowlist_add_command(t, &entry, &d)?
            } else {
                a.allowlist_add(t, &entry, &d)?
            };
            println!(
                "{} {t}: {}",
                if added { "added" } else { "already present" },
                a.display(&entry)
            );
        }
        AllowlistCommand::Rm { entry } => {
            let d = operator(&a, &format!("allowlist rm {entry}"), None)?;
            let n = a.allowlist_remove(&entry, &d)?;
            if n == 0 {
                bail!(
                    "remove allowlist entry `{}`: no such entry",
                    moat::policy::escape_display(&entry)
                );
            }
            println!("removed {n} entr{}", if n == 1 { "y" } else { "ies" });
        }
    }
    Ok(ExitCode::SUCCESS)
}
