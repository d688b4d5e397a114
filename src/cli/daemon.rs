//! The CLI's way to the home's daemon: every command that acts on sessions goes through the
//! one `moat serve` that owns the home, started on demand (docs/ARCHITECTURE.md, "Daemon").

use std::process::ExitCode;

use anyhow::Context;
use http::Method;
use moat::daemon::{ClientError, DaemonClient};
use moat::home::Home;
use serde_json::Value;

use super::term::say;

/// A client of the home's daemon, starting one when none runs.
pub async fn client(home: &Home) -> anyhow::Result<DaemonClient> {
    let (config, _) = moat::config::load(&home.config_file())?;
    Ok(moat::daemon::connect(home, &config).await?)
}

/// One JSON call; the daemon's error text becomes the CLI's ("failed to …" is added back by
/// `main`).
pub async fn call(
    client: &DaemonClient,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Value> {
    match client.call(method, path, body, &[]).await {
        Ok(v) => Ok(v),
        Err(e @ ClientError::Refused { .. }) => Err(super::failure::from_client(e)),
        Err(e) => Err(e).context("reach moat serve"),
    }
}

/// A streamed answer (lines of JSON): the daemon's refusal as a classified error.
pub async fn lines(
    client: &DaemonClient,
    path: &str,
    body: &Value,
    headers: &[(&'static str, String)],
) -> anyhow::Result<moat::daemon::Lines> {
    match client.lines(Method::POST, path, Some(body), headers).await {
        Ok(l) => Ok(l),
        Err(e @ ClientError::Refused { .. }) => Err(super::failure::from_client(e)),
        Err(e) => Err(e).context("run the command through moat serve"),
    }
}

/// [`lines`] as the first call of a client from `moat::daemon::unchecked` (the CLI's hot path
/// skips the health round trip, docs/ARCHITECTURE.md, "Daemon"): when no daemon answers, or
/// one of another build or configuration refused the request unread, the daemon is started or
/// replaced as [`client`] does, and the request is sent again (nothing of it ran).
pub async fn first_lines(
    home: &Home,
    config: &moat::config::Config,
    client: &DaemonClient,
    path: &str,
    body: &Value,
    headers: &[(&'static str, String)],
) -> anyhow::Result<moat::daemon::Lines> {
    match client.lines(Method::POST, path, Some(body), headers).await {
        Ok(l) => Ok(l),
        Err(e) if moat::daemon::never_ran(client, &e).await => {
            moat::daemon::connect(home, config).await?;
            lines(client, path, body, headers).await
        }
        Err(e @ ClientError::Refused { .. }) => Err(super::failure::from_client(e)),
        Err(e) => Err(e).context("run the command through moat serve"),
    }
}

/// Prints a session's events as they arrive.
pub async fn follow_events(home: &Home, session: &str) -> anyhow::Result<ExitCode> {
    moat::session::validate_key(session)?;
    let client = client(home).await?;
    let headers = [(
        http::header::ACCEPT.as_str(),
        "text/event-stream".to_string(),
    )];
    let mut stream = client
        .lines(
            Method::GET,
            &format!("/v1/sessions/{session}/events"),
            None,
            &headers,
        )
        .await
        .context("subscribe to events")?;
    while let Some(data) = stream.next_event().await.context("read events")? {
        for line in data.split('\n') {
            super::term::json_text(line);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How long a decision's wake may take before the CLI leaves the waiter to the daemon's
/// shared check.
const WAKE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Tells the home's daemon, if one runs, that the CLI decided approval `id` on the database,
/// so its waiter runs the plan now rather than at the shared 2 s check (docs/approvals.md,
/// "How waiters wake"). Best effort: it never starts a daemon, and without one the decision
/// is still stored for the next to find.
pub fn wake_waiter(home: &Home, id: &str) {
    let client = DaemonClient::new(&home.socket(), String::new());
    let path = format!("/v1/approvals/{id}/wake");
    let call = async {
        let _ = tokio::time::timeout(WAKE_WAIT, client.call(Method::POST, &path, None, &[])).await;
    };
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        tokio::task::block_in_place(|| rt.block_on(call));
    }
}

/// How long `moat daemon stop` waits for the daemon to let go of the home (its graceful
/// shutdown ends event streams and waits for cancelled commands).
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// `moat daemon status|stop` (docs/ARCHITECTURE.md, "Daemon").
pub async fn run(home: &Home, cmd: super::args::DaemonCommand) -> anyhow::Result<ExitCode> {
    use super::args::DaemonCommand;
    match cmd {
        DaemonCommand::Status { json } => status(home, json).await,
        DaemonCommand::Stop { force } => stop(home, force).await,
    }
}

/// This moat's own fingerprint, or `None` when its config does not load (the status is still
/// worth showing then).
fn own_fingerprint(home: &Home) -> Option<String> {
    let (config, _) = moat::config::load(&home.config_file()).ok()?;
    Some(moat::daemon::fingerprint(&config))
}

async fn status(home: &Home, json: bool) -> anyhow::Result<ExitCode> {
    let health = moat::daemon::status(home).await;
    let ours = own_fingerprint(home);
    let Some(h) = health else {
        if json {
            super::term::json_pretty(&serde_json::json!({ "running": false }))?;
        } else {
            say!("no moat serve runs for {}", home.root().display());
        }
        return Ok(ExitCode::SUCCESS);
    };
    let same_build = h["build"].as_str() == Some(moat::daemon::build_id().as_str());
    let same_config = ours.is_some() && h["fingerprint"].as_str() == ours.as_deref();
    if json {
        let mut v = h.clone();
        v["running"] = Value::Bool(true);
        v["sameBuild"] = Value::Bool(same_build);
        v["fits"] = Value::Bool(same_config);
        super::term::json_pretty(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let started = if h["autoStarted"] == true {
        "started on demand"
    } else {
        "started by hand"
    };
    let up = h["startedAtMs"]
        .as_i64()
        .map(|t| format!(", up {} s", (moat::store::now_ms() - t).max(0) / 1000))
        .unwrap_or_default();
    say!(
        "moat serve for {}: pid {}, {started}{up}",
        home.root().display(),
        h["pid"]
    );
    say!(
        "build:       {} ({})",
        h["build"].as_str().unwrap_or("?"),
        if same_build {
            "this moat's"
        } else {
            "not this moat's"
        }
    );
    let fits = if same_config {
        "this moat's: it serves this moat's commands".to_string()
    } else if h["autoStarted"] == true {
        "not this moat's: this moat's next command replaces it once it owns nothing".to_string()
    } else {
        "not this moat's: this moat's commands are refused until it is restarted".to_string()
    };
    say!(
        "fingerprint: {} ({fits})",
        h["fingerprint"].as_str().unwrap_or("?")
    );
    let owns = &h["owns"];
    let sessions: Vec<&str> = owns["sessions"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    say!(
        "sessions:    {}",
        if sessions.is_empty() {
            "none".to_string()
        } else {
            moat::output::escape_display(&sessions.join(", "))
        }
    );
    say!("owns:        {}", moat::daemon::describe_owned(owns));
    Ok(ExitCode::SUCCESS)
}

async fn stop(home: &Home, force: bool) -> anyhow::Result<ExitCode> {
    // Stopping the operator's daemon is the operator's act, as deciding is
    // (docs/security.md, "The operator channel").
    if let Err(refusal) = moat::host::check_self() {
        anyhow::bail!("stop moat serve: {refusal}");
    }
    let Some(h) = moat::daemon::status(home).await else {
        say!("no moat serve runs for {}", home.root().display());
        return Ok(ExitCode::SUCCESS);
    };
    // The stop path serves clients of any fingerprint, so this moat's need not match.
    let client = DaemonClient::new(&home.socket(), String::new());
    let body = serde_json::json!({ "ifIdle": !force });
    match client
        .call(Method::POST, "/v1/daemon/stop", Some(&body), &[])
        .await
    {
        Ok(_) => {}
        Err(ClientError::Refused { message, .. }) => {
            anyhow::bail!("stop moat serve: {message}")
        }
        Err(e) if e.is_unreachable() => {
            say!("no moat serve runs for {}", home.root().display());
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e).context("stop moat serve"),
    }
    let deadline = std::time::Instant::now() + STOP_WAIT;
    let pid = h["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
    // The daemon lets go of its lock before its process has ended (the runtime's threads wind
    // down after), so "stopped" waits for both: a caller may start the next daemon or remove
    // the home the moment this returns.
    while moat::daemon::serve_lock_held(&home.daemon_lock()) || pid.is_some_and(still_running) {
        if std::time::Instant::now() > deadline {
            anyhow::bail!(
                "stop moat serve (pid {}): it has not ended {} s after it was asked to (it holds {} while it runs); its log is {}",
                h["pid"],
                STOP_WAIT.as_secs(),
                home.daemon_lock().display(),
                home.daemon_log().display()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    say!("stopped moat serve (pid {})", h["pid"]);
    Ok(ExitCode::SUCCESS)
}

/// Whether process `pid` has not yet ended: it exists and is not a zombie waiting for its
/// parent (the daemon is started detached, so its parent may never reap it).
fn still_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the command name's closing parenthesis (the
        // name itself may hold spaces and parentheses).
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}
