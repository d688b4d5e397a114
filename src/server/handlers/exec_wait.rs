//! The CLI's foreground exec through the daemon (`X-Moat-Wait: end`, socket only): the call
//! waits for the command to end, however long it runs, as `moat exec` always has, and the
//! answer is lines of JSON so the CLI learns the process id before the end:
//!
//! - `{"started": "<process id>"}` once the command runs (an interrupted CLI kills it by id);
//! - `{"stdout": "<text>"}` as the command writes (its log: stdout and stderr together, or
//!   its terminal), whole and not capped, sanitized and redacted like any output: the CLI
//!   shows a foreground command's output as it is produced, as `moat run` does, by the same
//!   reader (`run::Tail`). Not for a command started in the background;
//! - `{"result": <tool result>}`, the same result an in-process call returns;
//! - after an `approval-pending` result, `{"event": "<text>", "outcome": {…}}`: the
//!   approval's outcome (`Exec denied …` or `Exec finished …`) as `moat events` shows it, and
//!   as data (`kind`, `exitCode`, `exitSignal`, `timedOut`) that the CLI exits by; a finished
//!   one also carries `"result"`, a poll of the process (its whole output, up to the cap);
//! - `{"error": "failed to …", "status": N}` when the call failed (N is the HTTP status the
//!   plain call would have had).
//!
//! The call runs inside the response body: a client that goes away drops it, and the command
//! is ended as for any cancelled call (docs/mcp.md, "Timeouts, cancellation and signals").

use std::sync::Arc;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot, watch};

use crate::daemon::WAIT_HEADER;
use crate::process::{EventKind, SessionEvent};
use crate::server::auth::Channel;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::{Caller, ExecRequest};
use crate::tools::{ProcessAction, ProcessCall};

/// Whether the request asks to wait for the end (and may).
pub fn wanted(channel: Channel, headers: &HeaderMap) -> Result<bool, ApiError> {
    let Some(v) = headers.get(WAIT_HEADER) else {
        return Ok(false);
    };
    if channel != Channel::Unix {
        return Err(ApiError::bad_request(format!(
            "failed to wait for the command's end: {WAIT_HEADER} is accepted on the unix socket only"
        )));
    }
    if v.as_bytes() != b"end" {
        return Err(ApiError::bad_request(format!(
            "failed to wait for the command's end: {WAIT_HEADER} must be `end`"
        )));
    }
    Ok(true)
}

fn line(v: Value) -> Bytes {
    let mut b = serde_json::to_vec(&v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

/// The streamed answer. The call is driven by the body stream itself, never spawned.
pub fn answer(
    state: Arc<ServerState>,
    caller: Caller,
    session: String,
    req: ExecRequest,
) -> Response {
    // Bounded: a slow reader slows the reading of the log, not moat's memory.
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    // Subscribed before the call, so an approval decided at once is not missed.
    let mut events = state.app.registry.events().subscribe();
    // A node's approval is decided and run there: no event of it arrives here.
    let forwarded = req.for_node();
    let drive = async move {
        let (id_tx, id_rx) = oneshot::channel::<String>();
        let (done_tx, done_rx) = watch::channel(false);
        let started = tx.clone();
        let stream = req.background != Some(true);
        let run = async {
            let outcome = state
                .app
                .exec
                .run_observed(&caller, &session, &req, true, move |id| {
                    // The first line of the answer: the channel has room.
                    let _ = started.try_send(line(json!({ "started": id })));
                    if stream {
                        let _ = id_tx.send(id.to_string());
                    }
                })
                .await;
            let _ = done_tx.send(true);
            outcome
        };
        let tail = follow(&state, &session, id_rx, done_rx, &tx);
        let (outcome, ()) = tokio::join!(run, tail);
        let result = match outcome {
            Ok(r) => r,
            Err(e) => {
                let kind = e.kind();
                let _ = tx
                    .send(line(json!({
                        "error": super::exec_failure::exec_failure_text(&e),
                        "status": kind.edges().http,
                        "kind": kind,
                    })))
                    .await;
                return;
            }
        };
        let pending = result.details.approval_id().map(str::to_string);
        let _ = tx.send(line(json!({ "result": result }))).await;
        let Some(id) = pending.filter(|_| !forwarded) else {
            return;
        };
        loop {
            match events.recv().await {
                Ok(SessionEvent {
                    session: s,
                    text,
                    outcome: Some(outcome),
                }) if s == session && outcome.approval_id.as_deref() == Some(id.as_str()) => {
                    let done = matches!(outcome.kind, EventKind::Denied | EventKind::Finished);
                    let mut msg = json!({ "event": text, "outcome": outcome });
                    // What the approved command printed, as a poll of its process reads it:
                    // the CLI shows it as it shows any other command's output.
                    if let (EventKind::Finished, Some(id)) =
                        (outcome.kind, outcome.process_id.clone())
                    {
                        let poll = ProcessCall::On {
                            id,
                            action: ProcessAction::Poll { wait_ms: 0 },
                        };
                        msg["result"] = json!(state.app.process.call(&session, poll).await);
                    }
                    let _ = tx.send(line(msg)).await;
                    if done {
                        return;
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    };
    let lines = tokio_stream::wrappers::ReceiverStream::new(rx);
    let driver = futures::stream::once(drive).filter_map(|_| async { None::<Bytes> });
    let body = futures::stream::select(lines, driver).map(Ok::<_, std::convert::Infallible>);
    (
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(body),
    )
        .into_response()
}

/// Passes the command's log on as it grows, until the call has ended and all of it was read.
/// The log is read through the descriptor the process holds (a host command's too), never
/// reopened by path (docs/security.md, "Run directory and workspace files").
async fn follow(
    state: &ServerState,
    session: &str,
    id: oneshot::Receiver<String>,
    done: watch::Receiver<bool>,
    tx: &mpsc::Sender<Bytes>,
) {
    // No id: the command never started (refused, pending approval, or in the background).
    let Ok(id) = id.await else { return };
    let Some(proc) = state.app.registry.get(session, &id) else {
        return;
    };
    let Some(log) = proc.lock().log.clone() else {
        // No descriptor (its run directory could not be opened): the result carries the
        // output instead.
        return;
    };
    let on_host = proc.info.place.container().is_none();
    let secrets = state.app.secrets.for_target(session, on_host);
    let mut tails = [super::run::Tail::new("stdout", log, secrets, None)];
    super::run::pass_on(&mut tails, done, tx).await;
}
