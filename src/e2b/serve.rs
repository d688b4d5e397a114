//! The E2B listener: one TCP address for the control plane and the in-sandbox API
//! (docs/e2b.md, "One address"), and the task that ends sandboxes whose lifetime is over.
//!
//! Its connections count against the same caps as every other listener of the daemon
//! (`server::limits`): a connection must identify itself (an API key, or a sandbox's access
//! token) within a deadline or it is closed, the oldest silent one goes first when the daemon
//! is full, and each key holds at most an agent token's share — so nothing that arrives here,
//! with a key or without, can take the descriptors or the operator's reserve (docs/security.md,
//! "E2B's API").

use std::convert::Infallible;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::{DefaultBodyLimit, Request};
use axum::routing::{delete, get, post};
use axum::serve::IncomingStream;
use axum::Router;
use tokio_util::sync::CancellationToken;

use super::conn::Conn;
use super::home::Homes;
use super::state::E2bState;
use super::stream_input;
use super::{control, files, filesystem, gate, pause, process, snapshots, upload, usage, watch};
use crate::app::App;
use crate::server::limits::{Limited, Slot, Tracker};
use crate::server::{Channel, NoDelay};

/// The most a control-plane request body may hold: a create's metadata and variables.
const MAX_CONTROL_BODY: usize = 1 << 20;
/// The most a process-service request body may hold (a Connect message and its envelope).
const MAX_PROCESS_BODY: usize = super::connect::MAX_MESSAGE + 64 * 1024;

/// Makes one service per connection, handing each request the connection's place in the
/// counts (for the gate) and its socket (for a reset).
#[derive(Clone)]
struct PerConnection {
    router: Router,
}

impl<'a> tower::Service<IncomingStream<'a, Limited<NoDelay>>> for PerConnection {
    type Response = WithConn;
    type Error = Infallible;
    type Future = std::future::Ready<Result<WithConn, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'a, Limited<NoDelay>>) -> Self::Future {
        let io = stream.io();
        std::future::ready(Ok(WithConn {
            router: self.router.clone(),
            slot: io.slot().clone(),
            conn: Conn {
                socket: io.inner().as_fd().try_clone_to_owned().ok().map(Arc::new),
            },
        }))
    }
}

/// One connection's service.
#[derive(Clone)]
struct WithConn {
    router: Router,
    slot: Arc<Slot>,
    conn: Conn,
}

impl tower::Service<Request> for WithConn {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = <Router as tower::Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower::Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        req.extensions_mut().insert(self.slot.clone());
        req.extensions_mut().insert(self.conn.clone());
        self.router.call(req)
    }
}

/// Every route E2B's SDK calls that moat serves, on `state`, behind the gate that identifies
/// the caller before any body is read.
fn router(state: Arc<E2bState>) -> Router {
    let p = |m: &str| format!("/process.Process/{m}");
    let control = Router::new()
        .route("/sandboxes", post(control::create).get(control::list))
        .route("/v2/sandboxes", post(control::create).get(control::list))
        .route("/sandboxes/{id}", get(control::info).delete(control::kill))
        .route("/sandboxes/{id}/connect", post(pause::connect))
        .route("/v2/sandboxes/{id}/connect", post(pause::connect))
        .route("/sandboxes/{id}/timeout", post(control::set_timeout))
        .route("/sandboxes/{id}/pause", post(pause::pause))
        .route("/sandboxes/{id}/resume", post(pause::resume))
        .route("/sandboxes/{id}/metrics", get(usage::metrics))
        .route(
            "/sandboxes/{id}/snapshots",
            post(snapshots::create_snapshot),
        )
        .route("/sandboxes/{id}/fork", post(snapshots::fork))
        .route("/snapshots", get(snapshots::list_snapshots))
        .route("/templates/{id}", delete(snapshots::delete_template))
        .layer(DefaultBodyLimit::max(MAX_CONTROL_BODY));
    let envd = Router::new()
        .route("/health", get(process::health))
        .route(&p("Start"), post(process::start))
        .route(&p("Connect"), post(process::connect_to))
        .route(&p("List"), post(process::list))
        .route(&p("SendSignal"), post(process::send_signal))
        .route(&p("SendInput"), post(process::send_input))
        .route(&p("StreamInput"), post(stream_input::stream_input))
        .route(&p("CloseStdin"), post(process::close_stdin))
        .route(&p("Update"), post(process::update))
        .layer(DefaultBodyLimit::max(MAX_PROCESS_BODY));
    control
        .merge(envd)
        .merge(files_routes())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            gate::gate,
        ))
        .with_state(state)
}

/// The filesystem service and `/files` (docs/e2b.md, "Files"): uploads bound themselves as
/// they stream, so `/files` has no body limit of its own.
fn files_routes() -> Router<Arc<E2bState>> {
    let f = |m: &str| format!("/filesystem.Filesystem/{m}");
    let rpc = Router::new()
        .route(&f("Stat"), post(filesystem::stat))
        .route(&f("MakeDir"), post(filesystem::make_dir))
        .route(&f("Move"), post(filesystem::move_entry))
        .route(&f("ListDir"), post(filesystem::list_dir))
        .route(&f("Remove"), post(filesystem::remove))
        .route(&f("WatchDir"), post(watch::watch_dir))
        .route(&f("CreateWatcher"), post(watch::create_watcher))
        .route(&f("GetWatcherEvents"), post(watch::get_watcher_events))
        .route(&f("RemoveWatcher"), post(watch::remove_watcher))
        .layer(DefaultBodyLimit::max(MAX_CONTROL_BODY));
    let files = Router::new()
        .route("/files", get(files::download).post(upload::upload))
        .layer(DefaultBodyLimit::disable());
    rpc.merge(files)
        .layer(axum::Extension(Arc::new(Homes::default())))
}

/// Serves E2B's API on `e2b.listen` until `shutdown`, its connections counted by `tracker`,
/// then ends the sandboxes it served. `bound` is told the address once the socket listens.
pub async fn serve(
    app: Arc<App>,
    tracker: Arc<Tracker>,
    shutdown: CancellationToken,
    bound: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    let addr = app.config.e2b.listen.trim().to_string();
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    bound(listener.local_addr()?);
    let state = E2bState::new(app, tracker.clone());
    // What a killed daemon's snapshots left (docs/e2b.md, "Snapshots and forks").
    state.snapshots.sweep(&state.app).await;
    let reaper = tokio::spawn(state.clone().reap(shutdown.clone()));
    let listener = Limited::new(NoDelay(listener), tracker, Channel::Tcp);
    let stop = shutdown.clone();
    let app = PerConnection {
        router: router(state),
    };
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    shutdown.cancel();
    let _ = reaper.await;
    served
}
