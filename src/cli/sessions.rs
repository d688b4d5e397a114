use std::process::ExitCode;

use anyhow::Context;
use moat::app::App;
use moat::home::Home;
use moat::session::MOAT_LABEL;
use serde_json::json;

use super::args::SessionsCommand;

pub async fn run(home: Home, cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    let app = App::open(home).await.context("start moat")?;
    match cmd {
        SessionsCommand::List { json } => {
            let containers = app.runtime.list_containers(MOAT_LABEL).await?;
            let sessions = app.store.sessions()?;
            let mut rows = Vec::new();
            for c in containers {
                let key = c.labels.get(MOAT_LABEL).cloned().unwrap_or_default();
                let created: i64 = c
                    .labels
                    .get("dev.moat.created-at")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let last_used = sessions
                    .iter()
                    .filter(|s| s.container == c.name)
                    .map(|s| s.last_used_ms)
                    .max();
                rows.push(json!({
                    "session": key,
                    "container": c.name,
                    "id": c.id.chars().take(12).collect::<String>(),
                    "state": c.state,
                    "createdAtMs": created,
                    "lastUsedAtMs": last_used,
                }));
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if rows.is_empty() {
                println!("no session containers");
            } else {
                println!(
                    "{:<24} {:<40} {:<12} {:<8} {:<20} LAST USED",
                    "SESSION", "CONTAINER", "ID", "STATE", "CREATED"
                );
                for r in rows {
                    println!(
                        "{:<24} {:<40} {:<12} {:<8} {:<20} {}",
                        r["session"].as_str().unwrap_or(""),
                        r["container"].as_str().unwrap_or(""),
                        r["id"].as_str().unwrap_or(""),
                        r["state"].as_str().unwrap_or(""),
                        ago(r["createdAtMs"].as_i64()),
                        ago(r["lastUsedAtMs"].as_i64()),
                    );
                }
            }
        }
        SessionsCommand::Rm { key } => {
            if app.sessions.remove(&key).await? {
                println!("removed the container of session {key} (its workspace was kept)");
            } else {
                println!("session {key} has no container");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn ago(ms: Option<i64>) -> String {
    match ms {
        Some(t) if t > 0 => {
            let s = (moat::store::now_ms() - t).max(0) / 1000;
            match s {
                0..=59 => format!("{s}s ago"),
                60..=3599 => format!("{}m ago", s / 60),
                3600..=86399 => format!("{}h ago", s / 3600),
                _ => format!("{}d ago", s / 86400),
            }
        }
        _ => "-".into(),
    }
}
