//! Bounds on what one client can hold (docs/http-api.md, "Limits"). Every connection costs a
//! file descriptor; without a bound, one agent opening a thousand event streams used up moat's
//! descriptors and nobody else got an answer. So:
//!
//! - the open-file limit is raised to the hard limit at start-up, and the connection caps are
//!   derived from it so a share of descriptors always stays for moat's own files;
//! - the listener counts connections and never accepts more than the budget; an accept error
//!   (`EMFILE`) backs off briefly instead of spinning or stalling for a second;
//! - the first request on a connection binds it to an identity (the operator or one agent
//!   token); an identity past its cap gets 429, agents together past theirs get 503, and the
//!   operator keeps a reserve of connections agents can never take;
//! - a connection that has not identified itself is closed after a deadline, and the oldest
//!   such connection is closed early when the listener is full, so anonymous sockets cannot
//!   hold the operator's reserve either.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::auth::{identify, Channel, Identity};
use super::peer_share::PeerShare;
use super::routes::ServerState;
use crate::config::ServeConfig;

/// Descriptors kept for moat's own files (SQLite, logs, run files, engine connections,
/// process pipes) whatever the limit: at least this many, or a quarter of the limit.
const FILES_RESERVE_MIN: u64 = 256;
/// Connections refused with a written 503 at once; past it a refused connection is just
/// closed, so refusing cannot itself use up descriptors.
const REFUSING_MAX: usize = 32;
/// Connections over the budget while the unidentified connections they displaced close.
const EVICT_SLACK: usize = 32;
/// A connection must send a request with a known identity within this, or it is closed.
const IDENTIFY_WITHIN: Duration = Duration::from_secs(10);
/// How long the listener waits after an accept error such as `EMFILE` before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The caps in force, derived from the configuration and the open-file limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The soft open-file limit the budget was derived from.
    pub nofile: u64,
    /// Non-operator connections together (`serve.max_connections`).
    pub max_connections: usize,
    /// Extra connections only the operator may hold (`serve.operator_reserve`).
    pub operator_reserve: usize,
    /// Connections per identity (`serve.max_connections_per_token`).
    pub per_token: usize,
    /// Agent event streams together (`serve.max_streams`).
    pub max_streams: usize,
    /// Event streams per identity (`serve.max_streams_per_token`).
    pub streams_per_token: usize,
    /// Set when a configured value was lowered to fit the descriptors: what and why.
    pub lowered: Option<String>,
    /// Connections one peer (`PeerShare`) may hold before they identify; `None` = no share.
    /// Only for listeners other machines reach (a node's, docs/nodes.md "Bounds"): the
    /// daemon's own TCP and E2B's serve clients of this machine, which share its addresses.
    pub unidentified_per_peer: Option<usize>,
    /// The configuration keys a refusal names.
    pub names: LimitNames,
}

/// The configuration keys behind a listener's caps, named in its refusals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitNames {
    /// Everyone's connections plus the reserve.
    pub hard: &'static str,
    /// Agents' connections together.
    pub connections: &'static str,
    /// One identity's connections.
    pub per_token: &'static str,
}

impl LimitNames {
    /// The daemon's `[serve]` keys.
    pub const SERVE: Self = Self {
        hard: "serve.max_connections + serve.operator_reserve",
        connections: "serve.max_connections",
        per_token: "serve.max_connections_per_token",
    };
}

impl Budget {
    /// The most connections the listener holds: everyone's plus the operator's reserve.
    pub fn hard_cap(&self) -> usize {
        self.max_connections + self.operator_reserve
    }

    /// Pure: the caps for `nofile` descriptors. A quarter of them (at least 256) stay for
    /// moat's files; the rest, minus what refusing and evicting may briefly hold, is the
    /// connection budget, of which the operator's reserve comes first.
    pub fn derive(nofile: u64, c: &ServeConfig) -> Self {
        let files = FILES_RESERVE_MIN.max(nofile / 4);
        let for_conns = nofile
            .saturating_sub(files)
            .saturating_sub((REFUSING_MAX + EVICT_SLACK) as u64) as usize;
        let operator_reserve = (c.operator_reserve as usize).min(for_conns / 2).max(1);
        let fit = for_conns.saturating_sub(operator_reserve).max(1);
        let mut lowered = None;
        let max_connections = match c.max_connections as usize {
            0 => fit,
            n if n > fit => {
                lowered = Some(format!(
                    "serve.max_connections = {n} lowered to {fit}: the open-file limit is {nofile}"
                ));
                fit
            }
            n => n,
        };
        let max_streams = match c.max_streams as usize {
            0 => (max_connections / 2).max(1),
            n => n.min(max_connections),
        };
        Self {
            nofile,
            max_connections,
            operator_reserve,
            per_token: c.max_connections_per_token as usize,
            max_streams,
            streams_per_token: c.max_streams_per_token as usize,
            lowered,
            unidentified_per_peer: None,
            names: LimitNames::SERVE,
        }
    }

    /// A listener of its own with `max` connections, `per_identity` of them for one identity,
    /// `per_peer` for one peer's connections that have not identified yet, and no operator
    /// and no event streams (a node's, docs/nodes.md "Bounds").
    pub fn fixed(max: usize, per_identity: usize, per_peer: usize, names: LimitNames) -> Self {
        Self {
            nofile: 0,
            max_connections: max.max(1),
            operator_reserve: 0,
            per_token: per_identity.max(1),
            max_streams: 0,
            streams_per_token: 0,
            lowered: None,
            unidentified_per_peer: Some(per_peer.max(1)),
            names,
        }
    }
}

/// Raises the soft open-file limit to the hard limit and returns the soft limit now in force
/// (unchanged when raising fails).
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// Raises the open-file limit and derives the caps from it; logs what is in force.
pub fn start(config: &ServeConfig) -> Arc<Tracker> {
    let budget = Budget::derive(raise_nofile(), config);
    if let Some(why) = &budget.lowered {
        tracing::warn!("{why}");
    }
    tracing::info!(
        nofile = budget.nofile,
        max_connections = budget.max_connections,
        operator_reserve = budget.operator_reserve,
        per_token = budget.per_token,
        max_streams = budget.max_streams,
        streams_per_token = budget.streams_per_token,
        "connection limits"
    );
    Tracker::new(budget)
}

/// Whom a connection or stream is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Operator,
    /// An agent, by its token.
    Agent(String),
}

impl Key {
    fn of(channel: Channel, who: &Identity) -> Self {
        match (channel, who) {
            // The socket is the operator's, whatever token a request on it carries.
            (Channel::Unix, _) | (_, Identity::Operator) => Key::Operator,
            (_, Identity::Agent(a)) => Key::Agent(a.token.clone()),
        }
    }
}

#[derive(Default)]
struct Counts {
    /// Every connection the listeners hold, identified or not.
    total: usize,
    /// Identified connections per identity.
    conns: HashMap<Key, usize>,
    /// Identified agent connections together.
    agent_conns: usize,
    /// Open event streams per identity.
    streams: HashMap<Key, usize>,
    /// Open agent event streams together.
    agent_streams: usize,
    /// Unidentified connections per peer, where the budget gives peers a share.
    silent_by_peer: HashMap<PeerShare, usize>,
}

/// A refusal: which limit, its value, and the status (429 for one identity's cap, 503 for
/// everyone's).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: StatusCode,
    pub limit: &'static str,
    pub value: usize,
    pub message: String,
}

impl Refusal {
    fn per_token(limit: &'static str, value: usize, what: &str) -> Self {
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            limit,
            value,
            message: format!(
                "open another {what}: this identity holds {value}, the most allowed ({limit} = {value}); close one and retry"
            ),
        }
    }

    fn global(limit: &'static str, value: usize, what: &str) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            limit,
            value,
            message: format!(
                "open another {what}: moat holds {value}, the most it serves at once ({limit} = {value}); retry later"
            ),
        }
    }

    fn body(&self) -> String {
        json!({"error": self.message, "limit": self.limit, "value": self.value}).to_string()
    }

    /// A complete HTTP/1.1 answer, for connections refused before hyper sees them.
    fn raw(&self) -> Vec<u8> {
        let body = self.body();
        format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or(""),
            body.len()
        )
        .into_bytes()
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut r = (self.status, self.body()).into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        // The refused connection goes away instead of staying counted against nobody.
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    }
}

/// The counters every listener and request shares.
pub struct Tracker {
    budget: Budget,
    counts: Mutex<Counts>,
    /// Unidentified connections, oldest first, to close when the listener is full.
    unidentified: Mutex<VecDeque<Weak<Slot>>>,
    /// Connections being answered with a written refusal right now.
    refusing: AtomicUsize,
}

impl Tracker {
    pub fn new(budget: Budget) -> Arc<Self> {
        Arc::new(Self {
            budget,
            counts: Mutex::default(),
            unidentified: Mutex::default(),
            refusing: AtomicUsize::new(0),
        })
    }

    /// A new connection on `channel`: its slot, or why it is refused. Socket connections
    /// are the operator's at once; TCP ones wait for their first request.
    ///
    /// `from` is the client's address where the listener has one: with a per-peer share in
    /// the budget, a peer at its share makes room by closing its own oldest silent
    /// connection, never another peer's — and not by refusing the new one, which may be an
    /// honest client that shares the address (a gateway behind the same NAT, or on the same
    /// machine as whoever floods).
    fn admit(
        self: &Arc<Self>,
        channel: Channel,
        from: Option<IpAddr>,
    ) -> Result<Arc<Slot>, Refusal> {
        let hard = self.budget.hard_cap();
        let operator = channel == Channel::Unix;
        let share = match (self.budget.unidentified_per_peer, from) {
            (Some(cap), Some(ip)) if !operator => Some((PeerShare::of(ip), cap)),
            _ => None,
        };
        let mut c = self.counts.lock().unwrap();
        if let Some((peer, cap)) = share {
            let held = c.silent_by_peer.get(&peer).copied().unwrap_or(0);
            if held >= cap && !(held < cap + EVICT_SLACK && self.evict_oldest_of(peer)) {
                return Err(Refusal::per_token(
                    "connections of one address before they identify",
                    cap,
                    "connection",
                ));
            }
        }
        if c.total >= hard && !(c.total < hard + EVICT_SLACK && self.evict_oldest()) {
            return Err(Refusal::global(self.budget.names.hard, hard, "connection"));
        }
        if operator {
            let n = c.conns.get(&Key::Operator).copied().unwrap_or(0);
            if n >= self.budget.per_token {
                return Err(Refusal::per_token(
                    self.budget.names.per_token,
                    self.budget.per_token,
                    "connection",
                ));
            }
            *c.conns.entry(Key::Operator).or_default() += 1;
        }
        c.total += 1;
        let share = share.map(|(peer, _)| peer);
        if let Some(peer) = share {
            *c.silent_by_peer.entry(peer).or_default() += 1;
        }
        drop(c);
        let slot = Arc::new(Slot {
            tracker: self.clone(),
            bound: Mutex::new(operator.then_some(Key::Operator)),
            identified: AtomicBool::new(operator),
            evict: CancellationToken::new(),
            share,
        });
        if !operator {
            let mut q = self.unidentified.lock().unwrap();
            q.retain(|w| w.upgrade().is_some_and(|s| !s.is_identified()));
            q.push_back(Arc::downgrade(&slot));
        }
        Ok(slot)
    }

    /// Closes the oldest connection that has not identified itself; false when there is none.
    fn evict_oldest(&self) -> bool {
        let mut q = self.unidentified.lock().unwrap();
        while let Some(w) = q.pop_front() {
            if let Some(s) = w.upgrade() {
                if !s.is_identified() && !s.evict.is_cancelled() {
                    s.evict.cancel();
                    return true;
                }
            }
        }
        false
    }

    /// Closes the oldest connection of `peer` that has not identified itself; false when it
    /// has none left to close.
    fn evict_oldest_of(&self, peer: PeerShare) -> bool {
        let q = self.unidentified.lock().unwrap();
        for w in q.iter() {
            if let Some(s) = w.upgrade() {
                if s.share == Some(peer) && !s.is_identified() && !s.evict.is_cancelled() {
                    s.evict.cancel();
                    return true;
                }
            }
        }
        false
    }

    /// Counts `slot`'s connection against `key`, or refuses it.
    fn bind(&self, slot: &Slot, key: &Key) -> Result<(), Refusal> {
        let mut bound = slot.bound.lock().unwrap();
        if bound.as_ref() == Some(key) {
            return Ok(());
        }
        let mut c = self.counts.lock().unwrap();
        let previous = bound.clone();
        if let Some(old) = &previous {
            c.release_conn(old);
        }
        let n = c.conns.get(key).copied().unwrap_or(0);
        let names = &self.budget.names;
        let refusal = if n >= self.budget.per_token {
            Some(Refusal::per_token(
                names.per_token,
                self.budget.per_token,
                "connection",
            ))
        } else if *key != Key::Operator && c.agent_conns >= self.budget.max_connections {
            Some(Refusal::global(
                names.connections,
                self.budget.max_connections,
                "connection",
            ))
        } else {
            None
        };
        if let Some(r) = refusal {
            *bound = None;
            return Err(r);
        }
        c.hold_conn(key);
        *bound = Some(key.clone());
        if !slot.identified.swap(true, Ordering::AcqRel) {
            c.release_silent(slot.share);
        }
        Ok(())
    }

    /// Opens an event stream for `key`, held until the guard drops.
    fn open_stream(self: &Arc<Self>, key: Key) -> Result<StreamGuard, Refusal> {
        let mut c = self.counts.lock().unwrap();
        let n = c.streams.get(&key).copied().unwrap_or(0);
        if n >= self.budget.streams_per_token {
            return Err(Refusal::per_token(
                "serve.max_streams_per_token",
                self.budget.streams_per_token,
                "event stream",
            ));
        }
        let agent = key != Key::Operator;
        if agent && c.agent_streams >= self.budget.max_streams {
            return Err(Refusal::global(
                "serve.max_streams",
                self.budget.max_streams,
                "event stream",
            ));
        }
        *c.streams.entry(key.clone()).or_default() += 1;
        if agent {
            c.agent_streams += 1;
        }
        Ok(StreamGuard {
            tracker: self.clone(),
            key,
        })
    }

    /// Counts `slot`'s connection against agent `who` of another listener of this daemon (E2B's
    /// keys, docs/e2b.md), or refuses it: the same caps as agent tokens, in the same counts, so
    /// the operator's reserve and the descriptors stay whatever arrives there.
    pub fn bind_agent(&self, slot: &Slot, who: &str) -> Result<(), Refusal> {
        self.bind(slot, &Key::Agent(who.to_string()))
    }

    /// Connections held now (a daemon started on demand stays up while there is one).
    pub fn connections(&self) -> usize {
        self.counts.lock().unwrap().total
    }
}

impl Counts {
    fn hold_conn(&mut self, key: &Key) {
        *self.conns.entry(key.clone()).or_default() += 1;
        if *key != Key::Operator {
            self.agent_conns += 1;
        }
    }

    fn release_conn(&mut self, key: &Key) {
        if let Some(n) = self.conns.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.conns.remove(key);
            }
        }
        if *key != Key::Operator {
            self.agent_conns = self.agent_conns.saturating_sub(1);
        }
    }

    /// A connection of `share` identified itself or closed before it did.
    fn release_silent(&mut self, share: Option<PeerShare>) {
        let Some(peer) = share else { return };
        if let Some(n) = self.silent_by_peer.get_mut(&peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.silent_by_peer.remove(&peer);
            }
        }
    }
}

/// One accepted connection's place in the counts; released when the connection and every
/// request holding it are gone.
pub struct Slot {
    tracker: Arc<Tracker>,
    /// The identity the connection is counted against, once known.
    bound: Mutex<Option<Key>>,
    /// Mirrors `bound.is_some()` without the lock, for the socket's read path.
    identified: AtomicBool,
    /// Cancelled to close the connection early (it never identified and the listener is full).
    evict: CancellationToken,
    /// The peer whose share of silent connections this one counts against until it
    /// identifies, where the budget gives peers a share.
    share: Option<PeerShare>,
}

impl Slot {
    fn is_identified(&self) -> bool {
        self.identified.load(Ordering::Acquire)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.tracker.counts.lock().unwrap();
        c.total = c.total.saturating_sub(1);
        if let Some(key) = self.bound.get_mut().unwrap().take() {
            c.release_conn(&key);
        }
        if !*self.identified.get_mut() {
            c.release_silent(self.share);
        }
    }
}

struct StreamGuard {
    tracker: Arc<Tracker>,
    key: Key,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut c = self.tracker.counts.lock().unwrap();
        if let Some(n) = self.streams_mut(&mut c) {
            *n = n.saturating_sub(1);
        }
        if self.key != Key::Operator {
            c.agent_streams = c.agent_streams.saturating_sub(1);
        }
    }
}

impl StreamGuard {
    fn streams_mut<'a>(&self, c: &'a mut Counts) -> Option<&'a mut usize> {
        c.streams.get_mut(&self.key)
    }
}

/// The raw accept of a listener, so errors are handled here rather than by axum's one-second
/// sleep.
pub trait RawAccept: Send + Sync + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    type Addr: Send;
    fn accept_raw(&self) -> impl Future<Output = io::Result<(Self::Io, Self::Addr)>> + Send;
    fn addr(&self) -> io::Result<Self::Addr>;
    /// Who is on the other end, recorded at accept for the guards that refuse callers running
    /// inside a host command (docs/security.md, "The operator channel").
    fn peer(io: &Self::Io, addr: &Self::Addr) -> Peer;
    /// The client's IP address, for a budget that gives each peer a share (`None` on a unix
    /// socket).
    fn peer_ip(_addr: &Self::Addr) -> Option<IpAddr> {
        None
    }
}

/// The peer of one accepted connection, handed to every request on it.
#[derive(Debug, Clone)]
pub enum Peer {
    Unix(super::peer::UnixPeer),
    Tcp(super::tcp_peer::TcpPeer),
}

impl Peer {
    fn insert_into(&self, ext: &mut axum::http::Extensions) {
        match self {
            Peer::Unix(p) => ext.insert(p.clone()).map(|_| ()),
            Peer::Tcp(p) => ext.insert(p.clone()).map(|_| ()),
        };
    }
}

impl RawAccept for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;
    async fn accept_raw(&self) -> io::Result<(Self::Io, Self::Addr)> {
        self.accept().await
    }
    fn addr(&self) -> io::Result<Self::Addr> {
        self.local_addr()
    }
    fn peer(io: &Self::Io, addr: &Self::Addr) -> Peer {
        Peer::Tcp(super::tcp_peer::TcpPeer::of(io, *addr))
    }
    fn peer_ip(addr: &Self::Addr) -> Option<IpAddr> {
        Some(addr.ip())
    }
}

impl RawAccept for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;
    type Addr = tokio::net::unix::SocketAddr;
    async fn accept_raw(&self) -> io::Result<(Self::Io, Self::Addr)> {
        self.accept().await
    }
    fn addr(&self) -> io::Result<Self::Addr> {
        self.local_addr()
    }
    fn peer(io: &Self::Io, _: &Self::Addr) -> Peer {
        Peer::Unix(super::peer::UnixPeer::of(io))
    }
}

/// A listener that counts its connections against the [`Tracker`].
pub struct Limited<L> {
    inner: L,
    tracker: Arc<Tracker>,
    channel: Channel,
    /// Whether a refused connection is told why in plain HTTP before it is closed; off for a
    /// TLS listener, whose clients would read the answer as a broken handshake.
    answer_refusals: bool,
}

impl<L> Limited<L> {
    pub fn new(inner: L, tracker: Arc<Tracker>, channel: Channel) -> Self {
        Self {
            inner,
            tracker,
            channel,
            answer_refusals: true,
        }
    }

    /// Refused connections are closed without an answer (a TLS listener's).
    pub fn closing_refused(mut self) -> Self {
        self.answer_refusals = false;
        self
    }
}

impl<L: RawAccept> Listener for Limited<L> {
    type Io = LimitedIo<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let mut last_error_log: Option<std::time::Instant> = None;
        loop {
            let (io, addr) = match self.inner.accept_raw().await {
                Ok(pair) => pair,
                Err(e) => {
                    // EMFILE/ENFILE and the like: the pending connection stays queued; wait a
                    // little for descriptors to free up, logging at most once a second.
                    if last_error_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        tracing::warn!(error = %e, "failed to accept a connection; retrying");
                        last_error_log = Some(std::time::Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            match self.tracker.admit(self.channel, L::peer_ip(&addr)) {
                Ok(slot) => {
                    let peer = L::peer(&io, &addr);
                    return (LimitedIo::new(io, slot, peer), addr);
                }
                Err(_) if !self.answer_refusals => drop(io),
                Err(refusal) => self.refuse(io, refusal),
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.addr()
    }
}

impl<L> Limited<L> {
    /// Writes the refusal and closes, off the accept loop; past [`REFUSING_MAX`] at once the
    /// connection is closed without an answer.
    fn refuse<I: AsyncWrite + Unpin + Send + 'static>(&self, mut io: I, refusal: Refusal) {
        let refusing = &self.tracker.refusing;
        if refusing.fetch_add(1, Ordering::AcqRel) >= REFUSING_MAX {
            refusing.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let tracker = self.tracker.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                io.write_all(&refusal.raw()).await?;
                io.shutdown().await
            })
            .await;
            drop(io);
            tracker.refusing.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// A connection's socket with its slot: reading fails once the connection is evicted, or when
/// it has not identified itself within [`IDENTIFY_WITHIN`].
pub struct LimitedIo<I> {
    inner: I,
    slot: Arc<Slot>,
    /// Recorded at accept; copied into every request's extensions.
    peer: Peer,
    deadline: Pin<Box<tokio::time::Sleep>>,
    evicted: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<I> LimitedIo<I> {
    /// The connection's place in the counts.
    pub fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }

    /// The connection itself.
    pub fn inner(&self) -> &I {
        &self.inner
    }

    fn new(inner: I, slot: Arc<Slot>, peer: Peer) -> Self {
        let evicted = Box::pin(slot.evict.clone().cancelled_owned());
        Self {
            inner,
            slot,
            peer,
            deadline: Box::pin(tokio::time::sleep(IDENTIFY_WITHIN)),
            evicted,
        }
    }

    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.slot.is_identified() {
            return Ok(());
        }
        if self.evicted.as_mut().poll(cx).is_ready() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room: the connection never identified itself",
            ));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the connection did not identify itself in time",
            ));
        }
        Ok(())
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for LimitedIo<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(e) = this.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for LimitedIo<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Makes one service per connection that hands the connection's slot to each request.
#[derive(Clone)]
pub struct PerConnection {
    router: Router,
}

impl PerConnection {
    /// `router` behind the gate that binds connections and counts event streams.
    pub fn new(
        router: Router,
        state: Arc<ServerState>,
        tracker: Arc<Tracker>,
        channel: Channel,
    ) -> Self {
        let router = router.layer(axum::middleware::from_fn_with_state(
            (state, tracker, channel),
            gate,
        ));
        Self { router }
    }
}

impl<'a, L: RawAccept> tower::Service<IncomingStream<'a, Limited<L>>> for PerConnection {
    type Response = WithSlot;
    type Error = Infallible;
    type Future = std::future::Ready<Result<WithSlot, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'a, Limited<L>>) -> Self::Future {
        std::future::ready(Ok(WithSlot {
            router: self.router.clone(),
            slot: stream.io().slot.clone(),
            peer: stream.io().peer.clone(),
        }))
    }
}

/// One connection's service: the router, with the slot and the peer in each request's
/// extensions.
#[derive(Clone)]
pub struct WithSlot {
    router: Router,
    slot: Arc<Slot>,
    peer: Peer,
}

impl tower::Service<Request> for WithSlot {
    type Response = Response;
    type Error = Infallible;
    type Future = <Router as tower::Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower::Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        req.extensions_mut().insert(self.slot.clone());
        self.peer.insert_into(req.extensions_mut());
        self.router.call(req)
    }
}

/// Whether a request opens a long-lived event stream.
fn is_stream(req: &Request) -> bool {
    let path = req.uri().path();
    req.method() == Method::GET
        && ((path.starts_with("/v1/sessions/") && path.ends_with("/events"))
            || path == "/mcp"
            || path == "/ui/events")
}

/// Binds the connection to the caller's identity and counts event streams. A request without
/// a known identity passes through untouched: its handler answers 401, and the connection
/// stays unidentified (and so closes after [`IDENTIFY_WITHIN`]).
async fn gate(
    State((state, tracker, channel)): State<(Arc<ServerState>, Arc<Tracker>, Channel)>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let who = match identify(channel, req.headers(), &state.app.config.serve) {
        Ok(who) => who,
        Err(_) if channel == Channel::Unix => Identity::Operator,
        // A signed-in console session is the operator's (docs/console.md).
        Err(_) if crate::console::is_console_operator(&state, req.headers()) => Identity::Operator,
        Err(_) => return next.run(req).await,
    };
    let key = Key::of(channel, &who);
    if let Some(slot) = req.extensions().get::<Arc<Slot>>().cloned() {
        if let Err(refusal) = tracker.bind(&slot, &key) {
            return refusal.into_response();
        }
    }
    if !is_stream(&req) {
        return next.run(req).await;
    }
    let guard = match tracker.open_stream(key) {
        Ok(g) => g,
        Err(refusal) => return refusal.into_response(),
    };
    let response = next.run(req).await;
    if !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        axum::body::Body::new(Guarded {
            body,
            _guard: guard,
        }),
    )
}

/// A response body that holds its stream's place in the counts until it ends or the client
/// goes away.
struct Guarded {
    body: axum::body::Body,
    _guard: StreamGuard,
}

impl http_body::Body for Guarded {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_keeps_files_and_operator_headroom() {
        let c = ServeConfig::default();
        // (nofile, configured max_connections, want max_connections, want reserve, lowered)
        let rows = [
            (1024, 0, 1024 - 256 - 64 - 16, 16, false),
            (20_000, 0, 20_000 - 5000 - 64 - 16, 16, false),
            (1024, 100, 100, 16, false),
            (1024, 5000, 1024 - 256 - 64 - 16, 16, true),
            // Too few descriptors for the configured reserve: half of what is left.
            (300, 0, 1, 1, false),
        ];
        for (nofile, max, want, reserve, lowered) in rows {
            let c = ServeConfig {
                max_connections: max,
                ..c.clone()
            };
            let b = Budget::derive(nofile, &c);
            assert_eq!(b.max_connections, want, "{nofile} {max}");
            assert_eq!(b.operator_reserve, reserve, "{nofile} {max}");
            assert_eq!(b.lowered.is_some(), lowered, "{nofile} {max}");
            // Whatever the configuration, the descriptors the listener may hold leave the
            // files' share free.
            let held = b.hard_cap() + REFUSING_MAX + EVICT_SLACK;
            assert!(
                held as u64 <= nofile.saturating_sub(FILES_RESERVE_MIN) || nofile < 400,
                "{nofile}: {held}"
            );
            assert!(b.max_streams <= b.max_connections);
        }
    }

    fn tracker(max: u32, per_token: u32, streams: u32) -> Arc<Tracker> {
        let c = ServeConfig {
            max_connections: max,
            max_connections_per_token: per_token,
            operator_reserve: 2,
            max_streams: streams,
            max_streams_per_token: 2,
            ..Default::default()
        };
        Tracker::new(Budget::derive(100_000, &c))
    }

    fn agent(n: u8) -> Key {
        Key::Agent(format!("token-{n}"))
    }

    #[tokio::test]
    async fn per_token_then_global_then_operator_reserve() {
        let t = tracker(3, 2, 3);
        let mut held = Vec::new();
        for (key, want) in [
            (agent(1), None),
            (agent(1), None),
            (agent(1), Some(StatusCode::TOO_MANY_REQUESTS)),
            (agent(2), None),
            (agent(3), Some(StatusCode::SERVICE_UNAVAILABLE)),
            (Key::Operator, None),
            (Key::Operator, None),
        ] {
            let slot = t.admit(Channel::Tcp, None).unwrap();
            let got = t.bind(&slot, &key).err().map(|r| r.status);
            assert_eq!(got, want, "{key:?}");
            held.push(slot);
        }
        // Refused connections still count until they close; the listener is now full
        // (3 + 2 reserve = 5 held plus two refused) and evicts only unidentified ones.
        held.retain(|s| s.is_identified());
        assert_eq!(t.connections(), 5);
        let err = t.admit(Channel::Tcp, None).err().unwrap();
        assert_eq!(err.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(err.message.contains("serve.operator_reserve"), "{err:?}");
        drop(held);
        assert_eq!(t.connections(), 0);
    }

    #[tokio::test]
    async fn unidentified_connections_make_room() {
        let t = tracker(3, 10, 3);
        let idle: Vec<_> = (0..5)
            .map(|_| t.admit(Channel::Tcp, None).unwrap())
            .collect();
        // Full of sockets that said nothing: a new one closes the oldest of them.
        let next = t.admit(Channel::Tcp, None).unwrap();
        assert!(idle[0].evict.is_cancelled());
        assert!(!idle[1].evict.is_cancelled());
        t.bind(&next, &Key::Operator).unwrap();
        assert!(!next.evict.is_cancelled());
    }

    #[tokio::test]
    async fn one_peers_silent_connections_have_a_share() {
        let t = Tracker::new(Budget::fixed(100, 100, 2, LimitNames::SERVE));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let a1 = t.admit(Channel::Tcp, Some(a)).unwrap();
        let a2 = t.admit(Channel::Tcp, Some(a)).unwrap();
        let b1 = t.admit(Channel::Tcp, Some(b)).unwrap();
        // At its share, the peer's new connection closes its own oldest silent one, never
        // another peer's.
        let a3 = t.admit(Channel::Tcp, Some(a)).unwrap();
        assert!(a1.evict.is_cancelled() && !a2.evict.is_cancelled());
        assert!(!b1.evict.is_cancelled());
        let _a4 = t.admit(Channel::Tcp, Some(a)).unwrap();
        assert!(a2.evict.is_cancelled() && !a3.evict.is_cancelled());
        // Past its share and the slack (the closed ones still count until they are gone),
        // with nothing of its own left to close, it is refused.
        let mut more = Vec::new();
        while let Ok(s) = t.admit(Channel::Tcp, Some(a)) {
            more.push(s);
        }
        assert_eq!(more.len() + 4, 2 + EVICT_SLACK, "{}", more.len());
        assert!(!b1.evict.is_cancelled());
        drop((a1, a2, more));
        // A connection that identifies gives its peer's place back.
        t.bind(&a3, &agent(1)).unwrap();
        let a5 = t.admit(Channel::Tcp, Some(a)).unwrap();
        assert!(!a5.evict.is_cancelled());
        assert_eq!(t.connections(), 4);
    }

    #[tokio::test]
    async fn streams_per_token_and_global() {
        let t = tracker(100, 100, 3);
        let a = t.open_stream(agent(1)).unwrap();
        let _b = t.open_stream(agent(1)).unwrap();
        let r = t.open_stream(agent(1)).err().unwrap();
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            (r.limit, r.value),
            ("serve.max_streams_per_token", 2),
            "{r:?}"
        );
        let _c = t.open_stream(agent(2)).unwrap();
        let r = t.open_stream(agent(3)).err().unwrap();
        assert_eq!(
            (r.status, r.limit, r.value),
            (StatusCode::SERVICE_UNAVAILABLE, "serve.max_streams", 3)
        );
        // The operator is not held back by the agents' total.
        let _o = t.open_stream(Key::Operator).unwrap();
        drop(a);
        let _d = t.open_stream(agent(3)).unwrap();
    }
}
