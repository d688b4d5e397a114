//! SIGINT and SIGTERM during a foreground `moat exec`: the command the CLI waits on is ended
//! (TERM, grace, KILL on its process group) and stays visible in `moat process list` with its
//! outcome, instead of running on unseen (docs/mcp.md, "Timeouts, cancellation and signals").

use std::future::Future;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::Context;
use http::Method;
use moat::contract::{Status, ToolResult};
use moat::daemon::DaemonClient;
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

    /// `SIGINT` or `SIGTERM`.
    pub fn name(&self) -> &'static str {
        self.name
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

/// What the interrupted CLI was waiting on.
pub enum Waiting {
    /// A running command, by process id.
    Process(String),
    /// An operator's decision on this approval.
    Approval(String),
}

/// After an interrupt of a call that streams the command's output (`moat exec`): the command
/// is killed through the daemon while the call is still read, so what it printed until it
/// ended (its last lines, what a TERM handler says) is shown, and only then the sentence
/// that says what the signal ended. The call is read until its result or the kill's grace
/// (plus slack) has passed; after that it is dropped and the end is waited for as
/// [`ended`] does. Anything else (a pending approval, a call before its command started) is
/// [`ended`].
pub async fn ended_after<F, T>(
    client: &DaemonClient,
    session: &str,
    waiting: &OnceLock<Waiting>,
    sig: Interrupted,
    rest: std::pin::Pin<&mut F>,
) -> anyhow::Result<ExitCode>
where
    F: Future<Output = anyhow::Result<T>>,
{
    let Some(Waiting::Process(id)) = waiting.get() else {
        return ended(client, session, waiting, sig).await;
    };
    let path = format!("/v1/sessions/{session}/process");
    let kill = serde_json::json!({"action": "kill", "sessionId": id});
    super::daemon::call(client, Method::POST, &path, Some(&kill)).await?;
    let within = Duration::from_millis(moat::process::KILL_GRACE_MS + 3000);
    match tokio::time::timeout(within, rest).await {
        // The call ended with the command: its output is shown.
        Ok(Ok(_)) => {
            say_err!(
                "moat: {}: ended process {id} (see `moat process list`)",
                sig.name
            );
            Ok(sig.exit_code())
        }
        // The stream broke or is slow: wait for the recorded end instead.
        Ok(Err(_)) | Err(_) => ended(client, session, waiting, sig).await,
    }
}

/// After an interrupt: the command the CLI was waiting on is killed through the daemon, and
/// the CLI waits until its end is recorded. A call interrupted before the command started was
/// dropped with its connection, and the daemon ends its command itself; a pending approval
/// stays pending.
pub async fn ended(
    client: &DaemonClient,
    session: &str,
    waiting: &OnceLock<Waiting>,
    sig: Interrupted,
) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/sessions/{session}/process");
    match waiting.get() {
        Some(Waiting::Process(id)) => {
            let kill = serde_json::json!({"action": "kill", "sessionId": id});
            super::daemon::call(client, Method::POST, &path, Some(&kill)).await?;
            let deadline =
                Instant::now() + Duration::from_millis(moat::process::KILL_GRACE_MS + 3000);
            while Instant::now() < deadline {
                let poll = serde_json::json!({"action": "poll", "sessionId": id, "timeout": 500});
                let p = super::daemon::call(client, Method::POST, &path, Some(&poll)).await?;
                let running = serde_json::from_value::<ToolResult>(p)
                    .is_ok_and(|r| r.status() == Some(Status::Running));
                if !running {
                    break;
                }
            }
            say_err!(
                "moat: {}: ended process {id} (see `moat process list`)",
                sig.name
            );
        }
        Some(Waiting::Approval(id)) => say_err!(
            "moat: {}: approval {id} stays pending (`moat approvals list`)",
            sig.name
        ),
        None => say_err!(
            "moat: {}: the command was ended by moat serve (see `moat process list`)",
            sig.name
        ),
    }
    Ok(sig.exit_code())
}
