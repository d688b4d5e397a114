use super::term::say;
use std::process::ExitCode;

use anyhow::Context;
use http::Method;
use moat::app::App;
use moat::home::Home;
use serde_json::{json, Value};

use super::args::SessionsCommand;

pub async fn run(home: Home, cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        // Listing and removing go through the daemon, which owns the containers (and lists
        // only this home's).
        SessionsCommand::List { json } => {
            let client = super::daemon::client(&home).await?;
            let v = super::daemon::call(&client, Method::GET, "/v1/sessions", None).await?;
            let rows: Vec<Value> = v["sessions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|r| !r["state"].is_null())
                .collect();
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
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Rm { key } => {
            moat::session::validate_key(&key)?;
            let client = super::daemon::client(&home).await?;
            let path = format!("/v1/sessions/{key}");
            let v = super::daemon::call(&client, Method::DELETE, &path, None).await?;
            if v["removed"] == true {
                say!("removed the container of session {key} (its workspace was kept)");
            } else {
                say!("session {key} has no container");
            }
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Set {
            key,
            security,
            ask,
            loosen,
        } => set(home, key, security, ask, loosen).await,
        SessionsCommand::Show { key, json } => show(home, key, json).await,
    }
}

/// Saves the operator's policy override for a session.
async fn set(
    home: Home,
    key: String,
    security: Option<String>,
    ask: Option<String>,
    loosen: bool,
) -> anyhow::Result<ExitCode> {
    let app = App::open(home).await.context("start moat")?;
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
    Ok(ExitCode::SUCCESS)
}

/// A session's override, the levels in force, and its container's state.
async fn show(home: Home, key: String, json: bool) -> anyhow::Result<ExitCode> {
    let app = App::open(home).await.context("start moat")?;
    moat::session::validate_key(&key)?;
    let (_, names) = app.sessions.names(&key);
    let container = app.runtime.inspect_container(&names.name).await?;
    let o = app.store.session_policy(&key)?.unwrap_or_default();
    let base = &app.config.policy.sandbox;
    let (sec, ask) = moat::policy::with_override(
        (base.security, base.ask),
        o.security.as_deref(),
        o.ask.as_deref(),
        o.loosen,
    );
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
