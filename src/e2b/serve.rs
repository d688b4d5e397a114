//! The E2B listener: one TCP address for the control plane and the in-sandbox API
//! (docs/e2b.md, "One address"), and the task that ends sandboxes whose lifetime is over.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::routing::{delete, get, post};
use axum::serve::IncomingStream;
use axum::Router;
use tokio_util::sync::CancellationToken;

use super::state::E2bState;
use super::{control, process};
use crate::app::App;

/// The most a request body may hold (a Connect message and its envelope).
const MAX_BODY: usize = super::connect::MAX_MESSAGE + 64 * 1024;

/// A connection's own handle on its socket: a duplicate of the descriptor, so a stream of a
/// killed sandbox can make the connection's close a reset (`SO_LINGER` 0) — what E2B's SDK
/// takes for a sandbox that went away, and then asks `/health` (docs/e2b.md, "A sandbox
/// killed mid-stream"). A duplicate, not the number: the socket stays this connection's
/// while any handler holds it, so no other connection's socket can be touched.
#[derive(Clone)]
pub struct Conn {
    pub socket: Option<Arc<OwnedFd>>,
}

impl Conn {
    /// Resets the connection now: the peer reads a reset, not an end of stream. hyper shuts
    /// a connection's writing side down (a FIN) before it closes it when a body fails, so a
    /// `SO_LINGER` of 0 alone would come after the peer saw a clean end; disconnecting the
    /// socket (`connect` to `AF_UNSPEC`, which Linux's TCP answers with a reset) does not wait
    /// for hyper.
    pub fn reset(&self) {
        let Some(fd) = &self.socket else { return };
        let reset = nix::libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        let _ =
            nix::sys::socket::setsockopt(fd.as_ref(), nix::sys::socket::sockopt::Linger, &reset);
        let unspec = nix::libc::sockaddr {
            sa_family: nix::libc::AF_UNSPEC as nix::libc::sa_family_t,
            sa_data: [0; 14],
        };
        // SAFETY: `fd` is a socket this connection owns a duplicate of, open for as long as
        // `self` lives; the address is a valid `sockaddr` of the length given.
        unsafe {
            nix::libc::connect(
                std::os::fd::AsRawFd::as_raw_fd(fd.as_ref()),
                &unspec,
                std::mem::size_of::<nix::libc::sockaddr>() as nix::libc::socklen_t,
            );
        }
    }
}

/// The listener: TCP with `TCP_NODELAY` on every connection. A stream's events are small
/// writes; with Nagle's algorithm each one after the first waits for the client's delayed
/// acknowledgement (40 ms on Linux), which would be most of a short command's time.
pub struct NoDelay(tokio::net::TcpListener);

impl axum::serve::Listener for NoDelay {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        // The engine's own accept loop, which waits out errors such as running out of
        // descriptors.
        let (tcp, addr) = axum::serve::Listener::accept(&mut self.0).await;
        let _ = tcp.set_nodelay(true);
        (tcp, addr)
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, NoDelay>> for Conn {
    fn connect_info(stream: IncomingStream<'_, NoDelay>) -> Self {
        Self {
            socket: stream.io().as_fd().try_clone_to_owned().ok().map(Arc::new),
        }
    }
}

/// Every route E2B's SDK calls that moat serves, on `state`.
fn router(state: Arc<E2bState>) -> Router {
    let p = |m: &str| format!("/process.Process/{m}");
    Router::new()
        .route("/sandboxes", post(control::create).get(control::list))
        .route("/v2/sandboxes", post(control::create).get(control::list))
        .route("/sandboxes/{id}", get(control::info).delete(control::kill))
        .route("/sandboxes/{id}/connect", post(control::connect))
        .route("/v2/sandboxes/{id}/connect", post(control::connect))
        .route("/sandboxes/{id}/timeout", post(control::set_timeout))
        .route("/sandboxes/{id}/pause", post(control::not_served))
        .route("/sandboxes/{id}/resume", post(control::not_served))
        .route("/sandboxes/{id}/metrics", get(control::not_served))
        .route("/sandboxes/{id}/snapshots", post(control::not_served))
        .route("/sandboxes/{id}/fork", post(control::not_served))
        .route("/templates/{id}", delete(control::not_served))
        .route("/health", get(process::health))
        .route(&p("Start"), post(process::start))
        .route(&p("Connect"), post(process::connect_to))
        .route(&p("List"), post(process::list))
        .route(&p("SendSignal"), post(process::send_signal))
        .route(&p("SendInput"), post(process::send_input))
        .route(&p("CloseStdin"), post(process::close_stdin))
        .route(&p("Update"), post(process::update))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// Serves E2B's API on `e2b.listen` until `shutdown`, then ends the sandboxes it served.
/// `bound` is told the address once the socket listens.
pub async fn serve(
    app: Arc<App>,
    shutdown: CancellationToken,
    bound: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    let addr = app.config.e2b.listen.trim().to_string();
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    bound(listener.local_addr()?);
    let listener = NoDelay(listener);
    let state = E2bState::new(app);
    let reaper = tokio::spawn(state.clone().reap(shutdown.clone()));
    let stop = shutdown.clone();
    let app = router(state).into_make_service_with_connect_info::<Conn>();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    shutdown.cancel();
    let _ = reaper.await;
    served
}
