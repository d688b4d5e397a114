//! The proxy's I/O shell: accepts sandbox connections, asks the daemon about each target,
//! then tunnels (`CONNECT`) or forwards (plain HTTP) to exactly the addresses it resolved
//! and checked, and reports every connection for the audit log.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::count::{Counted, Counts};
use super::reply::{self, Body};
use super::target::{self, Target};
use crate::egress::control::{self, ConnectionRecord, ControlAnswer, ControlRequest, MAX_ADDRS};
use crate::egress::host::Host;
use crate::egress::peers::Cidr;
use crate::egress::EgressError;

/// Connections the proxy serves at once; more wait for a slot.
const MAX_CONNECTIONS: usize = 256;
/// How long a name may take to resolve, and a connection upstream to open.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes each direction of a tunnel buffers: large enough that a download is not held to
/// 8 KiB steps (tokio's default).
const TUNNEL_BUFFER: usize = 64 << 10;
/// How long a client may take to send its request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Tunnels open at once: an upgraded connection leaves the connection count, so tunnels are
/// bounded on their own.
const MAX_TUNNELS: usize = 256;

/// What every connection needs.
struct Proxy {
    /// The daemon's socket for this session.
    control: PathBuf,
    /// One permit per open tunnel; none left answers 503.
    tunnels: Arc<Semaphore>,
}

/// Serves until the process ends; only clients inside `peers` are served.
pub async fn run(listen: &str, control: PathBuf, peers: Vec<Cidr>) -> Result<(), EgressError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| EgressError::Listen {
            addr: listen.to_string(),
            source,
        })?;
    let proxy = Arc::new(Proxy {
        control,
        tunnels: Arc::new(Semaphore::new(MAX_TUNNELS)),
    });
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return Ok(());
        };
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Not from the session's internal network: closed unanswered.
        if !peers.iter().any(|c| c.contains(peer.ip())) {
            continue;
        }
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |req| {
                let proxy = proxy.clone();
                async move { Ok::<_, hyper::Error>(proxy.handle(req).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

impl Proxy {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let started = Instant::now();
        let method = req.method().clone();
        let target = match target::parse(&method, req.uri()) {
            Ok(t) => t,
            Err(e) => {
                return reply::text(
                    StatusCode::BAD_REQUEST,
                    format!("moat's egress proxy could not {e}.\n"),
                )
            }
        };
        let host_text = target.host.text();
        let record = |decision: &str| ConnectionRecord {
            host: host_text.clone(),
            port: target.port,
            method: method.to_string(),
            decision: decision.to_string(),
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
        };
        // The name first: a name the policy refuses, or asks an operator about, is answered
        // now and never looked up (docs/security.md, "Network egress").
        let name = ControlRequest::Name {
            host: host_text.clone(),
            port: target.port,
        };
        match control::call(&self.control, &name).await {
            Ok(ControlAnswer::Resolve) => {}
            Ok(ControlAnswer::Refuse { tag, approval }) => {
                self.audit(record(&tag), started).await;
                return reply::text(
                    StatusCode::FORBIDDEN,
                    reply::refused_text(&host_text, target.port, approval.as_deref()),
                );
            }
            Ok(ControlAnswer::Allow | ControlAnswer::Ok) | Err(_) => return no_daemon(),
        }
        let addrs = match resolve(&target).await {
            Ok(a) => a,
            Err(()) => {
                self.audit(record("unresolved"), started).await;
                return reply::text(
                    StatusCode::BAD_GATEWAY,
                    format!("moat's egress proxy could not resolve {host_text}.\n"),
                );
            }
        };
        let ask = ControlRequest::Ask {
            host: host_text.clone(),
            port: target.port,
            addrs: addrs.clone(),
        };
        match control::call(&self.control, &ask).await {
            Ok(ControlAnswer::Allow) => {}
            Ok(ControlAnswer::Refuse { tag, approval }) => {
                self.audit(record(&tag), started).await;
                let text = if tag == "internal-address" {
                    reply::internal_text(&host_text, target.port, approval.as_deref())
                } else {
                    reply::refused_text(&host_text, target.port, approval.as_deref())
                };
                return reply::text(StatusCode::FORBIDDEN, text);
            }
            Ok(ControlAnswer::Ok | ControlAnswer::Resolve) | Err(_) => return no_daemon(),
        }
        // A tunnel's slot is taken before the upstream connection opens.
        let permit = if method == Method::CONNECT {
            match self.tunnels.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    return reply::text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("moat's egress proxy has {MAX_TUNNELS} tunnels open already; close one and try again.\n"),
                    )
                }
            }
        } else {
            None
        };
        let upstream = match connect(&addrs, target.port).await {
            Some(s) => s,
            None => {
                self.audit(record("unreachable"), started).await;
                return reply::text(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "moat's egress proxy could not connect to {host_text}:{}.\n",
                        target.port
                    ),
                );
            }
        };
        let counts = Arc::new(Counts::default());
        let upstream = Counted::new(upstream, counts.clone());
        let done = {
            let proxy = self.clone();
            let rec = record("allow");
            let counts = counts.clone();
            move || async move {
                let (up, down) = counts.get();
                let rec = ConnectionRecord {
                    bytes_up: up,
                    bytes_down: down,
                    ..rec
                };
                proxy.audit(rec, started).await;
            }
        };
        if method == Method::CONNECT {
            tokio::spawn(async move {
                let _permit = permit;
                if let Ok(upgraded) = hyper::upgrade::on(req).await {
                    let mut client = TokioIo::new(upgraded);
                    let mut upstream = upstream;
                    let _ = tokio::io::copy_bidirectional_with_sizes(
                        &mut client,
                        &mut upstream,
                        TUNNEL_BUFFER,
                        TUNNEL_BUFFER,
                    )
                    .await;
                }
                done().await;
            });
            return Response::new(reply::full(""));
        }
        forward(req, &target, upstream, done).await
    }

    /// Sends a record to the daemon; a daemon that does not answer loses it (logged here).
    async fn audit(&self, mut record: ConnectionRecord, started: Instant) {
        record.duration_ms = started.elapsed().as_millis() as u64;
        if let Err(e) = control::call(&self.control, &ControlRequest::Audit(record)).await {
            tracing::warn!("audit a connection: {e}");
        }
    }
}

/// Fail closed: without the daemon's answer nothing is allowed (and nothing audited).
fn no_daemon() -> Response<Body> {
    reply::text(
        StatusCode::SERVICE_UNAVAILABLE,
        "moat's egress proxy could not reach the moat daemon, so nothing is allowed; try again once it runs.\n".into(),
    )
}

/// The addresses to connect to: the literal itself, or what the name resolved to (at most
/// [`MAX_ADDRS`]). The proxy connects only to these, so the daemon judged what is used.
async fn resolve(target: &Target) -> Result<Vec<IpAddr>, ()> {
    match &target.host {
        Host::Ip(ip) => Ok(vec![*ip]),
        Host::Name(name) => {
            let found = tokio::time::timeout(
                RESOLVE_TIMEOUT,
                tokio::net::lookup_host((name.as_str(), target.port)),
            )
            .await
            .map_err(|_| ())?
            .map_err(|_| ())?;
            let mut addrs: Vec<IpAddr> = Vec::new();
            for a in found {
                if !addrs.contains(&a.ip()) && addrs.len() < MAX_ADDRS {
                    addrs.push(a.ip());
                }
            }
            if addrs.is_empty() {
                Err(())
            } else {
                Ok(addrs)
            }
        }
    }
}

async fn connect(addrs: &[IpAddr], port: u16) -> Option<TcpStream> {
    for ip in addrs {
        let addr = SocketAddr::new(*ip, port);
        if let Ok(Ok(s)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            return Some(s);
        }
    }
    None
}

/// Forwards a plain HTTP request over `upstream` and streams the answer back.
async fn forward<F, Fut>(
    mut req: Request<Incoming>,
    target: &Target,
    upstream: Counted<TcpStream>,
    done: F,
) -> Response<Body>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    use http_body_util::BodyExt;
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake::<_, Incoming>(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(_) => {
                done().await;
                return reply::text(
                    StatusCode::BAD_GATEWAY,
                    "moat's egress proxy could not talk HTTP to the upstream.\n".into(),
                );
            }
        };
    tokio::spawn(async move {
        let _ = conn.await;
        done().await;
    });
    let path = target.path.clone().unwrap_or_else(|| "/".into());
    *req.uri_mut() = match path.parse() {
        Ok(u) => u,
        Err(_) => {
            return reply::text(
                StatusCode::BAD_REQUEST,
                "moat's egress proxy could not read the request path.\n".into(),
            )
        }
    };
    let host = match (&target.host, target.port) {
        (Host::Ip(IpAddr::V6(ip)), 80) => format!("[{ip}]"),
        (Host::Ip(IpAddr::V6(ip)), p) => format!("[{ip}]:{p}"),
        (h, 80) => h.text(),
        (h, p) => format!("{}:{p}", h.text()),
    };
    let headers = req.headers_mut();
    headers.remove("proxy-authorization");
    headers.remove("proxy-connection");
    if let Ok(v) = http::HeaderValue::from_str(&host) {
        headers.insert(http::header::HOST, v);
    }
    match sender.send_request(req).await {
        Ok(resp) => resp.map(|b| b.boxed()),
        Err(_) => reply::text(
            StatusCode::BAD_GATEWAY,
            "moat's egress proxy lost the upstream connection.\n".into(),
        ),
    }
}
