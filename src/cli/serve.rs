//! `moat serve`: runs the daemon in the foreground (HTTP on the socket and TCP, the console,
//! E2B's API when configured).

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
    // The warm pool (docs/pool.md): what an earlier daemon left is adopted or removed, then
    // the pool fills in the background.
    app.sessions.start_pool().await;
    let shutdown = CancellationToken::new();
    let node_listen = a.node_listen.or_else(|| {
        let c = &app.config.node;
        c.enabled().then(|| c.listen.trim().parse().ok()).flatten()
    });
    // A node serves gateways whenever they call: it never stops for being idle.
    let idle_exit = a
        .idle_exit
        .filter(|_| node_listen.is_none())
        .map(std::time::Duration::from_secs);
    let state = ServerState::with_origin(app, shutdown.clone(), idle_exit.is_some());
    // One set of connection caps for every listener of this daemon, so what arrives on one
    // cannot take the descriptors or the operator's reserve from another (docs/http-api.md,
    // "Limits").
    let tracker = moat::server::limits::start(&state.app.config.serve);
    let e2b = state.app.config.e2b.enabled().then(|| {
        // E2B's API on its own address (docs/e2b.md); a listener that cannot bind stops the
        // daemon rather than serve half of what the config asks for.
        let (app, sd, tracker) = (state.app.clone(), shutdown.clone(), tracker.clone());
        tokio::spawn(async move {
            let served = moat::e2b::serve(app, tracker, sd.clone(), |at| {
                say_err!("moat serving E2B's API on {at}")
            })
            .await;
            if let Err(e) = served {
                say_err!("moat: failed to serve E2B's API on e2b.listen: {e}");
                sd.cancel();
            }
        })
    });
    // The node's TLS listener for paired gateways (docs/nodes.md): its own router, offering
    // the forwarded calls only; one that cannot bind stops the daemon, as for E2B's.
    if let Some(listen) = node_listen {
        let (app, sd) = (state.app.clone(), shutdown.clone());
        tokio::spawn(async move {
            let served = moat::server::serve_node(app, listen, sd.clone(), |at, fp| {
                say_err!("moat node serving on https://{at} (certificate {fp})")
            })
            .await;
            if let Err(e) = served {
                say_err!("moat: failed to serve as a node on node.listen: {e}");
                sd.cancel();
            }
        });
    }
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
    let sessions = state.app.sessions.clone();
    let served = serve(state, a.tcp, idle_exit, shutdown.clone(), tracker, |at| {
        say_err!("moat {} serving on {at}", env!("CARGO_PKG_VERSION"))
    })
    .await;
    // Nothing of the pool outlives the daemon: its containers hold no session's data.
    sessions.drain_pool().await;
    served?;
    if let Some(e2b) = e2b {
        // Its sandboxes end with the daemon that served them (docs/e2b.md): waited for, so
        // none is left running when `moat serve` returns.
        shutdown.cancel();
        let _ = e2b.await;
    }
    Ok(ExitCode::SUCCESS)
}
