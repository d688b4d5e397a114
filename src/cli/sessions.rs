//! `moat sessions`: lists, creates, sets and removes sessions through the daemon.

use super::term::say;
use std::process::ExitCode;

use anyhow::Context;
use http::Method;
use moat::app::App;
use moat::home::Home;
use serde_json::{json, Value};

use super::args::SessionsCommand;
use moat::session::setup::WorkspaceMode;

pub async fn run(home: Home, cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        // Listing and removing go through the daemon, which owns the containers (and lists
        // only this home's).
        SessionsCommand::List { pool: true, json } => super::pool::list(&home, json).await,
        SessionsCommand::List { json, .. } => {
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
                    "{:<24} {:<40} {:<12} {:<8} {:<20} {:<12} WORKSPACE",
                    "SESSION",
                    "CONTAINER",
                    "ID",
                    "STATE",
                    "CREATED",
                    "LAST USED"
                );
                for r in rows {
                    say!(
                        "{:<24} {:<40} {:<12} {:<8} {:<20} {:<12} {}{}",
                        r["session"].as_str().unwrap_or(""),
                        r["container"].as_str().unwrap_or(""),
                        r["id"].as_str().unwrap_or(""),
                        r["state"].as_str().unwrap_or(""),
                        ago(r["createdAtMs"].as_i64()),
                        ago(r["lastUsedAtMs"].as_i64()),
                        moat::output::escape_display(r["workspace"].as_str().unwrap_or("")),
                        workspace_note(&r, " (ro)", " (git rw)", ""),
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Rm { key, purge } => {
            moat::session::validate_key(&key)?;
            let client = super::daemon::client(&home).await?;
            let path = format!("/v1/sessions/{key}?purge={purge}");
            let v = super::daemon::call(&client, Method::DELETE, &path, None).await?;
            let kept = if purge {
                "its workspace was deleted"
            } else {
                "its workspace was kept"
            };
            if v["removed"] == true {
                say!("removed the container of session {key} ({kept})");
            } else {
                say!("session {key} has no container ({kept})");
            }
            let n = v["endedApprovals"].as_u64().unwrap_or(0);
            if n > 0 {
                let s = if n == 1 { "" } else { "s" };
                say!("ended {n} approval{s} and egress grant{s} of session {key} (decision: session-removed)");
            }
            let n = v["endedProcesses"].as_u64().unwrap_or(0);
            if n > 0 {
                say!("ended {n} running process(es) of session {key}");
            }
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Create {
            key,
            workspace,
            read_only,
            git_writable,
            image,
            network,
        } => {
            let client = super::daemon::client(&home).await?;
            let mode = WorkspaceMode {
                read_only,
                git_writable,
            };
            let v = create(
                &client,
                &key,
                workspace.as_deref(),
                mode,
                image.as_deref(),
                network.as_deref(),
            )
            .await?;
            say!(
                "session {key}: container {}, workspace {}{}",
                v["container"].as_str().unwrap_or(""),
                moat::output::escape_display(v["workspace"].as_str().unwrap_or("")),
                workspace_note(&v, " (read-only)", " (git writable)", " (git read-only)")
            );
            if let Some(w) = v["warning"].as_str() {
                super::term::say_err!("moat: {w}");
            }
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Set {
            key,
            security,
            ask,
            loosen,
            sticky,
            node,
        } => {
            moat::session::validate_key(&key)?;
            // Each of these is the operator's to set (docs/security.md, "The operator
            // channel"): refused inside a host command, and audited.
            let a = super::approvals::open(&home)?;
            let d = super::approvals::operator(&a, &format!("sessions set {key}"), None)?;
            let said = set_summary(&security, &ask, loosen, sticky, node.as_deref());
            a.store()
                .audit("session-set", None, Some(&key), &d.label(), &said)?;
            let policy = security.is_some() || ask.is_some() || loosen;
            if sticky.is_some() || node.is_some() {
                let app = App::open(home.clone()).await.context("start moat")?;
                if let Some(on) = sticky {
                    app.store.set_sticky_enabled(&key, Some(on))?;
                    say!(
                        "session {key}: sticky cwd and env {}",
                        if on { "on" } else { "off" }
                    );
                }
                if let Some(name) = node {
                    set_node(&app, &key, &name)?;
                }
                if !policy {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            set(home, key, security, ask, loosen).await
        }
        SessionsCommand::ResetState { key } => {
            moat::session::validate_key(&key)?;
            let client = super::daemon::client(&home).await?;
            let path = format!("/v1/sessions/{key}/reset-state");
            super::daemon::call(&client, Method::POST, &path, None).await?;
            say!("session {key}: carried cwd and env forgotten");
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Show { key, json } => show(home, key, json).await,
        SessionsCommand::Egress {
            key,
            allow,
            deny,
            ask,
            clear,
        } => super::sessions_egress::run(&home, &key, allow, deny, ask, clear),
    }
}

/// What the listing says after a workspace: `ro` when it is read-only, `git` when it is a
/// host checkout whose git metadata the sandbox may write (docs/security.md, "Host
/// workspaces"), `guarded` for a host checkout whose metadata it may not.
fn workspace_note(
    v: &Value,
    ro: &'static str,
    git: &'static str,
    guarded: &'static str,
) -> &'static str {
    if v["workspaceReadOnly"] == true {
        ro
    } else if v["gitWritable"] == true {
        git
    } else if v["hostWorkspace"] == true {
        guarded
    } else {
        ""
    }
}

/// Creates `key` through the daemon (`POST /v1/sessions`), with `workspace` (made absolute
/// here: the daemon's working directory is not the caller's).
pub async fn create(
    client: &moat::daemon::DaemonClient,
    key: &str,
    workspace: Option<&std::path::Path>,
    mode: WorkspaceMode,
    image: Option<&str>,
    network: Option<&str>,
) -> anyhow::Result<Value> {
    moat::session::validate_key(key)?;
    let workspace = match workspace {
        Some(dir) => Some(
            std::path::absolute(dir)
                .with_context(|| format!("resolve the workspace {}", dir.display()))?,
        ),
        None => None,
    };
    let body = json!({
        "session": key,
        "workspace": workspace.map(|w| w.display().to_string()),
        "readOnly": mode.read_only,
        "gitWritable": mode.git_writable,
        "image": image,
        "network": network,
    });
    super::daemon::call(client, Method::POST, "/v1/sessions", Some(&body)).await
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

/// What one `moat sessions set` changes, in words, for the audit log.
fn set_summary(
    security: &Option<String>,
    ask: &Option<String>,
    loosen: bool,
    sticky: Option<bool>,
    node: Option<&str>,
) -> String {
    let mut parts = Vec::new();
    if let Some(s) = security {
        parts.push(format!("security={s}"));
    }
    if let Some(a) = ask {
        parts.push(format!("ask={a}"));
    }
    if loosen {
        parts.push("loosen".to_string());
    }
    if let Some(on) = sticky {
        parts.push(format!("sticky={on}"));
    }
    if let Some(n) = node {
        parts.push(format!("node={n}"));
    }
    moat::output::escape_display(&parts.join(" "))
}

/// Sets session `key`'s default node to the pairing `name`, or clears it when `name` is
/// empty (docs/nodes.md, "Calls").
fn set_node(app: &App, key: &str, name: &str) -> anyhow::Result<()> {
    let name = name.trim();
    if name.is_empty() {
        app.store.set_session_node(key, None)?;
        say!("session {key}: no default node");
        return Ok(());
    }
    moat::node::check_name(name)?;
    if app.store.node(name)?.is_none() {
        anyhow::bail!(
            "set the node of session {key}: no paired node `{name}` (`moat nodes list` shows them)"
        );
    }
    app.store.set_session_node(key, Some(name))?;
    say!("session {key}: host=node calls that name no node go to `{name}`");
    Ok(())
}

/// A session's override, the levels in force, and its container's state.
async fn show(home: Home, key: String, json: bool) -> anyhow::Result<ExitCode> {
    let app = App::open(home).await.context("start moat")?;
    moat::session::validate_key(&key)?;
    let (_, names) = app.sessions.names(&key);
    let container = app.engine.inspect_container(&names.name).await?;
    let o = app.store.session_policy(&key)?.unwrap_or_default();
    // The levels in force before any request, composed as exec composes them.
    let layers = moat::policy::Layers {
        session: Some(o.layer()),
        ..Default::default()
    };
    let in_force = moat::policy::compose(&app.config.policy.sandbox, layers);
    let (sec, ask) = (in_force.security, in_force.ask);
    let sticky_on = app
        .store
        .sticky_enabled(&key)?
        .unwrap_or(app.config.exec.sticky);
    let carried = app.store.sticky_state(&key)?;
    let node = app.store.session_node(&key)?;
    // Carried values were checked against secrets when stored; redacted again for display.
    let redactor = moat::output::Redactor::new(app.secrets.all());
    let env: serde_json::Map<String, Value> = carried
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(redactor.redact_all(v))))
        .collect();
    let v = json!({
        "session": key,
        "container": names.name,
        "state": container.as_ref().map(|c| c.state.clone()),
        "override": {"security": o.security, "ask": o.ask, "loosen": o.loosen},
        "security": sec.as_str(),
        "ask": ask.as_str(),
        "sticky": {"enabled": sticky_on, "cwd": carried.cwd, "env": env},
        "node": node,
    });
    if json {
        super::term::json_pretty(&v)?;
    } else {
        say!(
            "session   {key}\ncontainer {} ({})\nsecurity  {}\nask       {}\nsticky    {}",
            names.name,
            v["state"].as_str().unwrap_or("not created"),
            sec.as_str(),
            ask.as_str(),
            if sticky_on { "on" } else { "off" }
        );
        if let Some(cwd) = &carried.cwd {
            say!("  cwd     {cwd}");
        }
        for (k, v) in &env {
            say!("  env     {k}={}", v.as_str().unwrap_or_default());
        }
        if let Some(n) = &node {
            say!("node      {n} (host=node calls that name none)");
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
