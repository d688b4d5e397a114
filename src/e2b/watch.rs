//! Watching directories for E2B's filesystem service (docs/e2b.md, "Watching"): `WatchDir`,
//! a stream of a directory's changes, and the polled watcher the sync SDK uses
//! (`CreateWatcher`, `GetWatcherEvents`, `RemoveWatcher`). Each watch is one inotify instance
//! over the sandbox's home (`files::watcher`), owned by a task of its own that ends with the
//! watch, the sandbox, or the serving moat.
//!
//! Watches are bounded: per sandbox and per moat (each is a kernel instance of moat's user,
//! which the machine bounds for all of that user's programs together), in directories per
//! watch, and in changes a polled watcher keeps between polls.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use rand::Rng;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use super::connect::{self, Code, RpcError};
use super::entry::{entry_info, Names};
use super::home::{Homes, Refusal};
use super::process::{parse, unary_error};
use super::sandboxes::Sandbox;
use super::state::E2bState;
use super::watch_table::{Ask, Polled, Slot};
use crate::files::watcher::{Change, ChangeKind, WatchError, Watcher};

/// The most directories one recursive watch holds.
pub const MAX_DIRS: usize = 1024;
/// The most changes a polled watcher keeps between two polls; later ones are dropped (and
/// the log says so) until the next poll.
pub const MAX_QUEUED: usize = 4096;
/// How often a quiet stream says it is alive.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The body of `WatchDir` and `CreateWatcher`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WatchRequest {
    pub path: String,
    pub recursive: bool,
    #[serde(alias = "include_entry")]
    pub include_entry: bool,
}

/// The body of `GetWatcherEvents` and `RemoveWatcher`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WatcherRequest {
    #[serde(alias = "watcher_id")]
    pub watcher_id: String,
}

/// A watch made: the watcher, what its events need, and its place in the counts.
struct Made {
    watcher: Watcher,
    names: Arc<Names>,
    include_entry: bool,
    /// Counts the watch until dropped: with the stream's task for a stream, with the
    /// table's entry for a polled watcher (so a removal frees its place at once).
    slot: Option<Slot>,
}

/// Makes a watch of the request's directory: the user checked, the home opened, the path
/// resolved; `not_found` when it is missing, `invalid_argument` when it is not a directory.
async fn make(
    state: &Arc<E2bState>,
    homes: &Homes,
    sandbox: &Sandbox,
    headers: &HeaderMap,
    req: WatchRequest,
) -> Result<Made, RpcError> {
    let user = super::home::user_of_call(headers, &state.app.config)?;
    let slot = state.watches.take_slot(&sandbox.id)?;
    let home = homes
        .open(state, sandbox, user, false)
        .await
        .map_err(Refusal::rpc)?;
    let names = homes.names(state, sandbox, &home).await;
    let rel = home.resolve(&req.path).map_err(Refusal::rpc)?.rel;
    let ws = home.ws;
    let recursive = req.recursive;
    let watcher = tokio::task::spawn_blocking(move || Watcher::new(ws, &rel, recursive, MAX_DIRS))
        .await
        .map_err(|e| RpcError::new(Code::Internal, format!("failed to watch: {e}")))?
        .map_err(|e| match e {
            WatchError::Confine(e) => Refusal::from(e).rpc(),
            e => RpcError::new(Code::Internal, format!("failed to {e}")),
        })?;
    Ok(Made {
        watcher,
        names,
        include_entry: req.include_entry,
        slot: Some(slot),
    })
}

/// A change as E2B's `FilesystemEvent`, with the entry when asked for and still there.
fn event_json(made: &Made, change: &Change) -> Value {
    let kind = match change.kind {
        ChangeKind::Create => "EVENT_TYPE_CREATE",
        ChangeKind::Write => "EVENT_TYPE_WRITE",
        ChangeKind::Remove => "EVENT_TYPE_REMOVE",
        ChangeKind::Rename => "EVENT_TYPE_RENAME",
        ChangeKind::Chmod => "EVENT_TYPE_CHMOD",
    };
    let mut event = json!({ "name": change.name, "type": kind });
    let gone = matches!(change.kind, ChangeKind::Remove | ChangeKind::Rename);
    if made.include_entry && !gone {
        let ws = made.watcher.workspace();
        let rel = made.watcher.rel_of(&change.name);
        if let Ok(found) = ws.lookup(&rel) {
            let meta = ws.attrs(std::path::Path::new(&rel), super::upload::META_PREFIX);
            if let Ok(entry) = serde_json::to_value(entry_info(&found, &made.names, meta)) {
                event["entry"] = entry;
            }
        }
    }
    event
}

fn stream_error(e: RpcError) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        connect::end(Some(&e)),
    )
        .into_response()
}

/// `WatchDir`: `start`, then the directory's changes as they come, keepalives while it is
/// quiet; it ends when the client goes, the directory goes, or the sandbox is killed (cut).
pub async fn watch_dir(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req: WatchRequest = match connect::single_message(&body).and_then(parse) {
        Ok(r) => r,
        Err(e) => return stream_error(e),
    };
    let made = match make(&state, &homes, &sandbox, &headers, req).await {
        Ok(m) => m,
        Err(e) => return stream_error(e),
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    tokio::spawn(stream(made, sandbox.killed.clone(), tx));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
        .into_response()
}

async fn stream(
    mut made: Made,
    killed: tokio_util::sync::CancellationToken,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    // Every send races the sandbox's kill: a client that stops reading fills the channel, and
    // a send that waited on it would keep the watch (and its place in the counts) past the
    // sandbox's end.
    let send = |m: Result<Bytes, std::io::Error>| {
        let (tx, killed) = (tx.clone(), killed.clone());
        async move {
            tokio::select! {
                _ = killed.cancelled() => false,
                sent = tx.send(m) => sent.is_ok(),
            }
        }
    };
    if !send(Ok(connect::message(&json!({ "start": {} })))).await {
        return;
    }
    loop {
        let changes = tokio::select! {
            _ = killed.cancelled() => {
                // The connection is cut if the notice fits; either way the watch ends now.
                let _ = tx.try_send(Err(std::io::Error::other("the sandbox was killed")));
                return;
            }
            _ = tx.closed() => return,
            _ = tokio::time::sleep(KEEPALIVE) => {
                if !send(Ok(connect::message(&json!({ "keepalive": {} })))).await {
                    return;
                }
                continue;
            }
            c = made.watcher.next() => c,
        };
        let changes = match changes {
            Ok(c) => c,
            Err(e) => {
                let e = RpcError::new(Code::Internal, format!("failed to watch: {e}"));
                let _ = send(Ok(connect::end(Some(&e)))).await;
                return;
            }
        };
        for c in &changes {
            let m = connect::message(&json!({ "filesystem": event_json(&made, c) }));
            if !send(Ok(m)).await {
                return;
            }
        }
        if made.watcher.ended() {
            let _ = send(Ok(connect::end(None))).await;
            return;
        }
    }
}

/// `CreateWatcher`: a watcher whose changes are kept until polled.
pub async fn create_watcher(
    State(state): State<Arc<E2bState>>,
    Extension(homes): Extension<Arc<Homes>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let req: WatchRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return unary_error(e),
    };
    let made = match make(&state, &homes, &sandbox, &headers, req).await {
        Ok(m) => m,
        Err(e) => return unary_error(e),
    };
    let id: String = {
        let mut rng = rand::rng();
        (0..20)
            .map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)] as char)
            .collect()
    };
    let (asks, rx) = mpsc::channel(4);
    let mut made = made;
    state.watches.polled.lock().unwrap().insert(
        id.clone(),
        Polled {
            sandbox: sandbox.id.clone(),
            asks,
            _slot: made.slot.take(),
        },
    );
    tokio::spawn(keep(
        state.clone(),
        id.clone(),
        made,
        sandbox.killed.clone(),
        rx,
    ));
    Json(json!({ "watcherId": id })).into_response()
}

/// A polled watcher's owner: reads changes as they come (so a directory made below a
/// recursive watch is watched before anything is written in it) and hands them over when
/// asked, after reading what the kernel holds at that moment.
async fn keep(
    state: Arc<E2bState>,
    id: String,
    mut made: Made,
    killed: tokio_util::sync::CancellationToken,
    mut asks: mpsc::Receiver<Ask>,
) {
    let mut queue: VecDeque<Value> = VecDeque::new();
    let mut dropped = 0usize;
    loop {
        tokio::select! {
            _ = killed.cancelled() => break,
            ask = asks.recv() => {
                let Some(reply) = ask else { break };
                let now = made.watcher.ready();
                let answer = match now {
                    Ok(changes) => {
                        dropped += push(&made, changes, &mut queue);
                        if dropped > 0 {
                            tracing::warn!(watcher = %id, "a watcher's {dropped} changes past {MAX_QUEUED} between two polls were dropped");
                            dropped = 0;
                        }
                        Ok(queue.drain(..).collect())
                    }
                    Err(e) => Err(RpcError::new(Code::Internal, format!("failed to read the watcher's events: {e}"))),
                };
                let _ = reply.send(answer);
            }
            changes = made.watcher.next(), if !made.watcher.ended() => {
                match changes {
                    Ok(c) => dropped += push(&made, c, &mut queue),
                    Err(e) => {
                        tracing::warn!(watcher = %id, "failed to read a watcher's events: {e}");
                        break;
                    }
                }
            }
        }
    }
    state.watches.polled.lock().unwrap().remove(&id);
}

/// Queues `changes` up to [`MAX_QUEUED`]; how many did not fit.
fn push(made: &Made, changes: Vec<Change>, queue: &mut VecDeque<Value>) -> usize {
    let mut dropped = 0;
    for c in &changes {
        if queue.len() >= MAX_QUEUED {
            dropped += 1;
            continue;
        }
        queue.push_back(event_json(made, c));
    }
    dropped
}

/// The asking side of a polled watcher of `sandbox`.
fn polled(state: &E2bState, sandbox: &Sandbox, id: &str) -> Result<mpsc::Sender<Ask>, RpcError> {
    state
        .watches
        .polled
        .lock()
        .unwrap()
        .get(id)
        .filter(|p| p.sandbox == sandbox.id)
        .map(|p| p.asks.clone())
        .ok_or_else(|| {
            RpcError::new(
                Code::NotFound,
                format!(
                    "failed to find watcher `{}`",
                    crate::output::escape_display(&id.chars().take(64).collect::<String>())
                ),
            )
        })
}

/// `GetWatcherEvents`: the changes since the last poll, oldest first.
pub async fn get_watcher_events(
    State(state): State<Arc<E2bState>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    body: Bytes,
) -> Response {
    let req: WatcherRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return unary_error(e),
    };
    let asks = match polled(&state, &sandbox, &req.watcher_id) {
        Ok(a) => a,
        Err(e) => return unary_error(e),
    };
    let (reply, answer) = oneshot::channel();
    let gone = || {
        unary_error(RpcError::new(
            Code::NotFound,
            "failed to read the watcher's events: it ended",
        ))
    };
    if asks.send(reply).await.is_err() {
        return gone();
    }
    match answer.await {
        Ok(Ok(events)) => Json(json!({ "events": events })).into_response(),
        Ok(Err(e)) => unary_error(e),
        Err(_) => gone(),
    }
}

/// `RemoveWatcher`: the watcher ends; its unpolled changes go with it.
pub async fn remove_watcher(
    State(state): State<Arc<E2bState>>,
    Extension(sandbox): Extension<Arc<Sandbox>>,
    body: Bytes,
) -> Response {
    let req: WatcherRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return unary_error(e),
    };
    if let Err(e) = polled(&state, &sandbox, &req.watcher_id) {
        return unary_error(e);
    }
    // Its task holds the other end: dropping the table's sender ends it.
    state.watches.polled.lock().unwrap().remove(&req.watcher_id);
    Json(json!({})).into_response()
}
