//! The node's side of a pairing (docs/nodes.md, "What crosses"): the four routes a paired
//! gateway may call on the node's TLS listener, and the extractor that knows the gateway by
//! its pairing token. Nothing here reaches an operator route: approvals, sessions, the
//! console and the daemon's own routes are on other listeners.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;

use super::exec_failure::exec_failure;
use super::json_body;
use crate::app::App;
use crate::contract::ToolResult;
use crate::node::{ForwardedExec, ForwardedProcess, NodeInfo};
use crate::server::error::ApiError;
use crate::tools::{Caller, ExecRequest, ProcessRequest};

/// What the node's routes share.
pub struct NodeState {
    /// The moat the calls run in.
    pub app: Arc<App>,
    /// Each gateway's calls in flight, against `node.max_calls_per_gateway`.
    pub in_flight: Arc<crate::server::InFlight>,
    /// Each gateway's open event streams, against `node::STREAMS_PER_GATEWAY`.
    pub streams: Arc<crate::server::InFlight>,
    /// The listener's connection counts: a connection that shows a live token is bound to
    /// its gateway, and so stops counting as silent (docs/nodes.md, "Bounds").
    pub tracker: Arc<crate::server::limits::Tracker>,
}

/// The paired gateway that is calling: the name its live pairing token was issued to, and
/// the call's place in that gateway's count of calls in flight (given back when the call
/// ends or is dropped).
pub struct Gateway(pub String, crate::server::node_calls::CallSlot);

/// The paired gateway of a request, by its live pairing token; its connection is bound to it
/// (so it no longer counts as silent, docs/nodes.md "Bounds").
fn identify(parts: &Parts, state: &NodeState) -> Result<(String, String), ApiError> {
    let refused = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "failed to identify the gateway: no live pairing token (issued with `moat node tokens add` on this node, and not revoked)",
        )
    };
    let token = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(refused)?;
    let hash = crate::node::hash_token(token.trim());
    let gateway = match state.app.store.node_token_gateway(&hash) {
        Ok(Some(gateway)) => gateway,
        Ok(None) => return Err(refused()),
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("failed to look up the pairing token: {e}"),
            ))
        }
    };
    if let Some(conn) = parts.extensions.get::<Arc<crate::server::limits::Slot>>() {
        state
            .tracker
            .bind_agent(conn, &format!("node:{gateway}"))
            .map_err(|r| {
                ApiError::new(
                    r.status,
                    format!(
                        "failed to take a connection from gateway `{gateway}`: {}",
                        r.message
                    ),
                )
            })?;
    }
    Ok((gateway, hash))
}

impl FromRequestParts<Arc<NodeState>> for Gateway {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<NodeState>,
    ) -> Result<Self, ApiError> {
        let (gateway, _) = identify(parts, state)?;
        let cap = state.app.config.node.calls_per_gateway();
        let slot = state.in_flight.take(&gateway, cap).map_err(|n| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("failed to take another call from gateway `{gateway}`: it has {n} in flight, the most node.max_calls_per_gateway allows"),
            )
        })?;
        Ok(Self(gateway, slot))
    }
}

/// A paired gateway opening an event stream: its name, its token's hash (the stream ends once
/// that token is revoked), and its place among its streams, apart from its calls
/// (`node::STREAMS_PER_GATEWAY`).
pub struct GatewayStream(pub String, String, crate::server::node_calls::CallSlot);

impl FromRequestParts<Arc<NodeState>> for GatewayStream {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<NodeState>,
    ) -> Result<Self, ApiError> {
        let (gateway, hash) = identify(parts, state)?;
        let slot = state
            .streams
            .take(&gateway, crate::node::STREAMS_PER_GATEWAY)
            .map_err(|n| {
                ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("failed to open another event stream for gateway `{gateway}`: it has {n} open, the most a gateway may"),
                )
            })?;
        Ok(Self(gateway, hash, slot))
    }
}

/// The identity the node's elevated gates see for a gateway's calls: provider `node`, the
/// pairing name as sender, so an operator lets a gateway's agents reach the node's host only
/// with `elevated.allow_from.node = ["GATEWAY"]`.
fn caller_of(gateway: &str) -> Caller {
    Caller {
        provider: Some("node".into()),
        sender: Some(gateway.to_string()),
        agent: None,
    }
}

/// The node's session for the gateway's: refused when the gateway's is not a session key, or
/// the two together are too long for one.
fn session_of(gateway: &str, session: &str) -> Result<String, ApiError> {
    crate::session::validate_key(session)
        .map_err(|e| ApiError::bad_request(format!("failed to {e}")))?;
    crate::node::node_session(gateway, session).ok_or_else(|| {
        ApiError::bad_request(format!(
            "failed to name the node's session for gateway `{gateway}`: `node.{gateway}.SESSION` is over 128 characters (use a shorter session key)"
        ))
    })
}

/// `GET /node/v1/info`.
pub async fn info(
    State(state): State<Arc<NodeState>>,
    Gateway(gateway, _slot): Gateway,
) -> Json<NodeInfo> {
    let app = &state.app;
    let mut node_hosts = vec!["sandbox".to_string()];
    if app.config.elevated.enabled {
        node_hosts.push("host".into());
    }
    Json(NodeInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        build: crate::daemon::build_id(),
        offers: vec!["exec".into(), "process".into(), "events".into()],
        node_hosts,
        gateway,
    })
}

/// `POST /node/v1/exec`: the gateway's call, run here as any agent's would be, in the
/// node's session for it, through this node's policy, gates and approvals.
pub async fn exec(
    State(state): State<Arc<NodeState>>,
    Gateway(gateway, _slot): Gateway,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    let app = &state.app;
    let fw: ForwardedExec = json_body(body)?;
    let session = session_of(&gateway, &fw.session)?;
    let mut req: ExecRequest = serde_json::from_value(fw.request)
        .map_err(|e| ApiError::bad_request(format!("failed to parse the forwarded exec: {e}")))?;
    // Where it runs is the pairing's word, never the request's: a node runs nothing on a
    // third machine, and `elevated` cannot reach past `nodeHost`.
    req.host = Some(match fw.node_host.as_str() {
        "sandbox" => "sandbox".to_string(),
        "host" => "host".to_string(),
        other => {
            return Err(ApiError::bad_request(format!(
                "failed to run on this node's `{}`: nodeHost is sandbox or host",
                crate::output::escape_display(other)
            )))
        }
    });
    req.elevated = None;
    req.node = None;
    req.node_host = None;
    let caller = caller_of(&gateway);
    let _ = app.store.audit(
        "node-call",
        None,
        Some(&session),
        &caller.label(),
        &format!(
            "exec on this node's {}: {}",
            fw.node_host,
            app.approvals.display(&req.command)
        ),
    );
    app.exec
        .run_for(&caller, &session, &req, fw.wait)
        .await
        .map(Json)
        .map_err(|e| exec_failure(&e))
}

/// `POST /node/v1/process`: the gateway's follow-up on a process of its node session.
pub async fn process(
    State(state): State<Arc<NodeState>>,
    Gateway(gateway, _slot): Gateway,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ToolResult>, ApiError> {
    let app = &state.app;
    let fw: ForwardedProcess = json_body(body)?;
    let session = session_of(&gateway, &fw.session)?;
    let mut req: ProcessRequest = serde_json::from_value(fw.request).map_err(|e| {
        ApiError::bad_request(format!("failed to parse the forwarded process call: {e}"))
    })?;
    // A node forwards nothing further.
    req.node = None;
    let _ = app.store.audit(
        "node-call",
        None,
        Some(&session),
        &caller_of(&gateway).label(),
        &format!(
            "process {} {}",
            crate::output::escape_display(req.action.trim()),
            crate::output::escape_display(req.process_id.as_deref().unwrap_or(""))
        ),
    );
    Ok(Json(app.process.run(&session, &req).await))
}

/// `POST /node/v1/events`: the events of the gateway's session on this node as they happen
/// (docs/nodes.md, "Events"), one JSON line each, an empty line every
/// `node::KEEPALIVE_SECS`; background exits only when this node's `exec.notify_on_exit` is on,
/// as on its own event stream. A subscriber that falls behind skips old events. The stream
/// ends at the first keepalive after the gateway's token was revoked or re-issued.
pub async fn events(
    State(state): State<Arc<NodeState>>,
    GatewayStream(gateway, hash, slot): GatewayStream,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::response::Response, ApiError> {
    use futures::StreamExt;
    let fw: crate::node::ForwardedEvents = json_body(body)?;
    let session = session_of(&gateway, &fw.session)?;
    let exits = state.app.config.exec.notify_on_exit;
    let rx = state.app.registry.events().subscribe();
    let app = state.app.clone();
    let events = tokio_stream::wrappers::BroadcastStream::new(rx).filter_map(move |ev| {
        let session = session.clone();
        async move {
            let ev = ev.ok()?;
            if ev.session != session || (!exits && ev.is_background_exit()) {
                return None;
            }
            let line = crate::node::NodeEvent {
                text: ev.text,
                outcome: ev.outcome,
            };
            let mut bytes = serde_json::to_vec(&line).ok()?;
            bytes.push(b'\n');
            Some(Some(Bytes::from(bytes)))
        }
    });
    let every = std::time::Duration::from_secs(crate::node::KEEPALIVE_SECS);
    let keepalive = tokio_stream::wrappers::IntervalStream::new(tokio::time::interval_at(
        tokio::time::Instant::now() + every,
        every,
    ))
    .map(move |_| {
        // `None` ends the stream: the pairing it was opened under is gone.
        let live = matches!(
            app.store.node_token_gateway(&hash),
            Ok(Some(ref g)) if *g == gateway
        );
        live.then(|| Bytes::from_static(b"\n"))
    });
    let stream = futures::stream::select(events, keepalive)
        .take_while(|b| std::future::ready(b.is_some()))
        .map(move |b| {
            // The stream holds the gateway's place among its streams while it is open.
            let _held = &slot;
            Ok::<_, std::convert::Infallible>(b.unwrap_or_default())
        });
    let mut resp = axum::response::Response::new(axum::body::Body::from_stream(stream));
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(resp)
}
