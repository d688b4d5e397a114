use super::term::say_err;
use std::process::ExitCode;

use anyhow::Context;
use moat::app::App;
use moat::home::Home;
use moat::server::{serve, ServerState};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use super::args::ServeArgs;

pub async fn run(home: Home, a: ServeArgs) -> anyhow::Result<ExitCode> {
    let app = App::open(home).await.context("start moat")?;
    // What the configured allowlist entries trust (docs/policy.md, "What an entry trusts"),
    // once at start, in the daemon's log; `moat doctor` says the same.
    for (policy, place, key) in [
        (
            &app.config.policy.host,
            moat::policy::EntryPlace::Host,
            "policy.host",
        ),
        (
            &app.config.policy.sandbox,
            moat::policy::EntryPlace::Sandbox,
            "policy.sandbox",
        ),
    ] {
        for warning in moat::policy::policy_warnings(policy, place) {
            tracing::warn!("{key}.allowlist {warning}");
        }
    }
    let shutdown = CancellationToken::new();
    let idle_exit = a.idle_exit.map(std::time::Duration::from_secs);
    let state = ServerState::with_origin(app, shutdown.clone(), idle_exit.is_some());
    let sd = shutdown.clone();
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        sd.cancel();
    });
    serve(state, a.tcp, idle_exit, shutdown, |at| {
        say_err!("moat {} serving on {at}", env!("CARGO_PKG_VERSION"))
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}
