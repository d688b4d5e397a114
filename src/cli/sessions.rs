use super::term::say;
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
                super::term::json_pretty(&rows)?;
            } else if rows.is_empty() {
                say!("no session containers");
            } else {
                say!(
                    "{:<24} {:<40} {:<12} {:<8} {:<20} LAST USED",
                    "SESSION",
                    "CONTAINER",
                    "ID",
                    "STATE",
                    "CREATED"
                );
                for r in rows {
                    say!(
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
        SessionsCommand::Set {
            key,
            security,
            ask,
            loosen,
        } => {
            moat::session::validate_key(&key)?;
            if let Some(s) = &security {
                if moat::policy::Security::parse_lenient(s).is_none() {
                    anyhow::bail!("set --security `{s}`: use deny, allowlist or full");
                }
            }
            if let Some(a) = &ask {
                if moat::policy::Ask::parse_lenient(a).is_none() {
                    anyhow::bail!("set --ask `{a}`: use off, on-miss or always");
                }
            }
            app.store.set_session_policy(
                &key,
                &moat::store::SessionPolicy {
                    security,
                    ask,
                    loosen,
                },
            )?;
            say!("policy override for session {key} saved");
        }
        SessionsCommand::Show { key, json } => {
            moat::session::validate_key(&key)?;
            let (_, names) = app.sessions.names(&key);
            let container = app.runtime.inspect_container(&names.name).await?;
            let o = app.store.session_policy(&key)?.unwrap_or_default();
            let base = &app.config.policy.sandbox;
            let (sec, ask) = effective(base.security, base.ask, &o);
            let v = json!({
                "session": key,
                "container": names.name,
                "state": container.as_ref().map(|c| c.state.clone()),
                "override": {"security": o.security, "ask": o.ask, "loosen": o.loosen},
                "security": sec.as_str(),
                "ask": ask.as_str(),
            });
            if json {
                super::term::json_pretty(&v)?;
            } else {
                say!(
                    "session   {key}\ncontainer {} ({})\nsecurity  {}\nask       {}",
                    names.name,
                    v["state"].as_str().unwrap_or("not created"),
                    sec.as_str(),
                    ask.as_str()
                );
            }
        }
        SessionsCommand::Rm { key } => {
            if app.sessions.remove(&key).await? {
                say!("removed the container of session {key} (its workspace was kept)");
            } else {
                say!("session {key} has no container");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn effective(
    security: moat::policy::Security,
    ask: moat::policy::Ask,
    o: &moat::store::SessionPolicy,
) -> (moat::policy::Security, moat::policy::Ask) {
    use moat::policy::{raise_ask, tighten_security, Ask, Security};
    let s = o.security.as_deref().and_then(Security::parse_lenient);
    let a = o.ask.as_deref().and_then(Ask::parse_lenient);
    if o.loosen {
        (s.unwrap_or(security), a.unwrap_or(ask))
    } else {
        (tighten_security(security, s), raise_ask(ask, a))
    }
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
