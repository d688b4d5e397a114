//! The CLI's way to the home's daemon: every command that acts on sessions goes through the
//! one `moat serve` that owns the home, started on demand (docs/ARCHITECTURE.md, "Daemon").

use std::process::ExitCode;

use anyhow::Context;
use http::Method;
use moat::daemon::{ClientError, DaemonClient};
use moat::home::Home;
use serde_json::Value;

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
