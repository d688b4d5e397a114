//! `moat allowlist …`: run-time allowlist entries (configured ones live in moat.toml).

use super::term::{say, say_err};
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
                    .map(|e| json!({"id": e.id, "host": e.target, "entry": e.entry, "command": e.command.as_deref().map(|c| a.display(c)), "session": e.session, "cwd": e.cwd, "source": e.source, "approvalId": e.approval_id, "addedBy": e.added_by, "addedAtMs": e.added_at_ms}))
                    .collect();
                super::term::json_pretty(&v)?;
            } else if rows.is_empty() {
                say!("no run-time allowlist entries");
            } else {
                for e in rows {
                    let shown = match (&e.command, &e.session, &e.cwd) {
                        (Some(c), Some(s), Some(d)) => format!(
                            "exact command: {} (session {}, cwd {})",
                            a.display(c),
                            moat::output::escape_display(s),
                            moat::output::escape_display(d)
                        ),
                        (Some(c), _, _) => format!(
                            "exact command (unscoped, from an older moat; matches nothing): {}",
                            a.display(c)
                        ),
                        (None, _, _) => moat::output::escape_display(&e.entry),
                    };
                    say!(
                        "{:>4}  {:<7}  {shown}  ({} by {})",
                        e.id,
                        e.target,
                        e.source,
                        e.added_by
                    );
                }
            }
        }
        AllowlistCommand::Add {
            host,
            command,
            session,
            workdir,
            entry,
        } => {
            let t = target(&host)?;
            let d = operator(&a, &format!("allowlist add --host {t} {entry}"), None)?;
            let added = if command {
                let session = session.unwrap_or_default();
                let wd = workdir.unwrap_or_default();
                let cwd = std::fs::canonicalize(&wd).map_err(|e| {
                    anyhow::anyhow!("use workdir `{}`: {e}", moat::output::escape_display(&wd))
                })?;
                a.allowlist_add_command(t, &entry, &session, &cwd.display().to_string(), &d)?
            } else {
                a.allowlist_add(t, &entry, &d)?
            };
            say!(
                "{} {t}: {}",
                if added { "added" } else { "already present" },
                a.display(&entry)
            );
            if !command {
                // What the entry does and does not trust (docs/policy.md, "What an entry
                // trusts").
                let (config, _) = moat::config::load(&home.config_file())?;
                let (policy, place) = if t == "host" {
                    (&config.policy.host, moat::policy::EntryPlace::Host)
                } else {
                    (&config.policy.sandbox, moat::policy::EntryPlace::Sandbox)
                };
                if let Some(warning) = moat::policy::entry_warning(&entry, policy, place) {
                    say_err!("warning: {}", a.display(&warning));
                }
            }
        }
        AllowlistCommand::Rm { entry } => {
            let d = operator(&a, &format!("allowlist rm {entry}"), None)?;
            let n = a.allowlist_remove(&entry, &d)?;
            if n == 0 {
                bail!(
                    "remove allowlist entry `{}`: no such entry",
                    moat::output::escape_display(&entry)
                );
            }
            say!("removed {n} entr{}", if n == 1 { "y" } else { "ies" });
        }
    }
    Ok(ExitCode::SUCCESS)
}
