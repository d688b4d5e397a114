//! SIGINT and SIGTERM during a foreground `moat exec`: the command the CLI waits on is ended
//! (TERM, grace, KILL on its process group) and stays visible in `moat process list` with its
//! outcome, instead of running on unseen (docs/mcp.md, "Timeouts, cancellation and signals").

use std::future::Future;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context;
use moat::app::App;
use moat::home::Home;
use tokio::signal::unix::{signal, SignalKind};

use super::term::say_err;

/// The signal that interrupted the CLI.
pub struct Interrupted {
    /// `SIGINT` or `SIGTERM`, for the message.
    name: &'static str,
    /// Its number, for the exit code.
    number: u8,
}

impl Interrupted {
    /// 128 + the signal's number, as a shell reports a command that a signal ended.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(128 + self.number)
    }
}

/// Runs `fut` until it finishes, or until SIGINT or SIGTERM arrives (then `fut` is dropped,
/// which is what cancels the call it stands for).
pub async fn or_interrupt<F: Future>(fut: F) -> anyhow::Result<Result<F::Output, Interrupted>> {
    let mut int = signal(SignalKind::interrupt()).context("watch for SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("watch for SIGTERM")?;
    Ok(tokio::select! {
        out = fut => Ok(out),
        _ = int.recv() => Err(Interrupted { name: "SIGINT", number: 2 }),
        _ = term.recv() => Err(Interrupted { name: "SIGTERM", number: 15 }),
    })
}

/// After an interrupt of a call this CLI ran itself: waits until the command it was waiting
/// on has been ended and its exit recorded, says so, and gives the exit code.
pub async fn ended_locally(app: &App, sig: Interrupted) -> ExitCode {
    let wait = Duration::from_millis(moat::process::KILL_GRACE_MS + 3000);
    for id in app.registry.wait_cancelled(wait).await {
        say_err!(
            "moat: {}: ended process {id} (see `moat process list`)",
            sig.name
        );
    }
    sig.exit_code()
}

/// After an interrupt of a call made through `moat serve`: a process the CLI was already
/// following (`followed`) is killed through the daemon; a call still in flight was dropped
/// with its connection, and the daemon ends its command itself.
pub async fn ended_by_daemon(
    home: &Home,
    session: &str,
    followed: &OnceLock<String>,
    sig: Interrupted,
) -> anyhow::Result<ExitCode> {
    match followed.get() {
        Some(id) => {
            let kill = serde_json::json!({"action": "kill", "sessionId": id});
            let path = format!("/v1/sessions/{session}/process");
            super::daemon::post(home, &path, &kill).await?;
            say_err!(
                "moat: {}: ended process {id} (see `moat process list`)",
                sig.name
            );
        }
        None => say_err!(
            "moat: {}: the command was ended by moat serve (see `moat process list`)",
            sig.name
        ),
    }
    Ok(sig.exit_code())
}
