//! `POST /v1/sessions/{session}/run` (the unix socket, operators): the command of `moat run`,
//! with its stdout and stderr streamed live and apart (docs/ARCHITECTURE.md, "moat
//! run"). The body is an `exec` request (foreground only: no `background`, `yieldMs` or
//! `pty`); the answer is lines of JSON:
//!
//! - `{"started": "<process id>"}` once the command runs;
//! - `{"stdout": "<text>"}` and `{"stderr": "<text>"}` as the command writes, whole (not
//!   capped), sanitized and redacted like any output ([`LiveText`]);
//! - `{"result": <tool result>}` after the last output line, as `exec` answers it;
//! - `{"error": "failed to …", "status": N}` when the call failed.
//!
//! The command writes stdout to its log and stderr to `<id>.err` in the run directory (the
//! split wrapper, `process::script`); both files are read here through descriptors opened
//! beneath the run directory, as every run file is (docs/security.md, "Run directory and
//! workspace files"). The call runs inside the response body, as `exec_wait`'s does: a
//! client that goes away ends the command.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};

use super::{exec_caller, json_body, InSession};
use crate::output::LiveText;
use crate::process::{ReadBuf, RunFiles};
use crate::server::auth::Channel;
use crate::server::error::ApiError;
use crate::server::ServerState;
use crate::tools::{Caller, ExecRequest};

/// How often the two files are looked at for new bytes while the command runs.
const POLL: Duration = Duration::from_millis(50);
/// The most read from one file at a time, so one line of JSON stays bounded.
const CHUNK: usize = 256 << 10;
/// Most bytes one [`Tail::read`] takes.
const READ_PER_CALL: u64 = 4 << 20;

pub async fn run(
    State(state): State<Arc<ServerState>>,
    Extension(channel): Extension<Channel>,
    InSession { who, session }: InSession,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    who.require_operator()?;
    if channel != Channel::Unix {
        return Err(ApiError::bad_request(
            "failed to run: moat run is served on the unix socket only",
        ));
    }
    let req: ExecRequest = json_body(body)?;
    if req.background == Some(true) || req.pty == Some(true) || req.yield_ms.is_some() {
        return Err(ApiError::bad_request(
            "failed to run: a run is in the foreground without a terminal (no background, yieldMs or pty)",
        ));
    }
    let caller = exec_caller(&who, channel, &headers, &session)?;
    Ok(answer(state, caller, session, req))
}

fn line(v: Value) -> Bytes {
    let mut b = serde_json::to_vec(&v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

fn answer(state: Arc<ServerState>, caller: Caller, session: String, req: ExecRequest) -> Response {
    // Bounded: a slow reader slows the reading of the files, not moat's memory.
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let drive = async move {
        let (id_tx, id_rx) = oneshot::channel::<String>();
        let (done_tx, done_rx) = watch::channel(false);
        let started = tx.clone();
        let run = async {
            let outcome = state
                .app
                .exec
                .run_split(&caller, &session, &req, move |id| {
                    let _ = started.try_send(line(json!({ "started": id })));
                    let _ = id_tx.send(id.to_string());
                })
                .await;
            let _ = done_tx.send(true);
            outcome
        };
        let tail = follow(&state, &session, id_rx, done_rx, &tx);
        let (outcome, ()) = tokio::join!(run, tail);
        let last = match outcome {
            Ok(result) => json!({ "result": result }),
            Err(e) => {
                let kind = e.kind();
                json!({"error": super::exec_failure::exec_failure_text(&e), "status": kind.edges().http, "kind": kind})
            }
        };
        let _ = tx.send(line(last)).await;
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

/// One of the command's files, read from where the last read stopped. `moat exec`'s
/// foreground stream reads the log the same way (`exec_wait`).
pub(super) struct Tail {
    /// The key of its JSON lines: `stdout` or `stderr`.
    key: &'static str,
    /// The file, read with `pread` through the descriptor moat holds.
    file: Arc<File>,
    /// Bytes of the file passed on so far.
    offset: u64,
    /// Sanitizes and redacts what is passed on, as all output is.
    text: LiveText,
    /// For the log (stdout): the process, told how far the stream got, so the spill bound
    /// frees nothing not yet passed on (`ProcState::stream_hold`).
    holds: Option<Arc<crate::process::Proc>>,
    /// The last read stopped at its bound with more to read.
    behind: bool,
    /// What the file is read into, kept from one call to the next (up to [`CHUNK`]).
    buf: ReadBuf,
}

impl Tail {
    /// A file to pass on under `key` from its start, with the session's secrets redacted.
    pub(super) fn new(
        key: &'static str,
        file: Arc<File>,
        secrets: Vec<(String, String)>,
        holds: Option<Arc<crate::process::Proc>>,
    ) -> Self {
        Self {
            key,
            file,
            offset: 0,
            text: LiveText::new(secrets),
            holds,
            behind: false,
            buf: ReadBuf::new(CHUNK),
        }
    }

    /// The lines of JSON for what was written since the last call.
    /// At most [`READ_PER_CALL`] bytes a call, so what is held in memory is bounded whatever
    /// the command wrote; the caller comes back for the rest.
    fn read(&mut self) -> Vec<Bytes> {
        let mut lines = Vec::new();
        let began = self.offset;
        self.behind = false;
        loop {
            if self.offset - began >= READ_PER_CALL {
                self.behind = true;
                break;
            }
            // Bytes the log's spill bound freed before they were read are said, not shown as
            // zeros (docs/ARCHITECTURE.md, "moat run").
            // A hole the command made (a sparse stdout) is jumped the same way, and never read
            // (`process::holes`).
            match crate::process::holes::next_data(&self.file, self.offset) {
                Some(data) if data > self.offset => {
                    lines.push(line(json!({ "stderr": format!(
                        "\n[moat] {} bytes of {} were skipped: freed past exec.spill_max_bytes before they could be passed on, or a hole the command left in its output\n",
                        data - self.offset, self.key
                    )})));
                    self.offset = data;
                }
                Some(_) => {}
                None => break,
            }
            let n = match self.file.read_at(self.buf.space(), self.offset) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            self.offset += n as u64;
            if let Some(proc) = &self.holds {
                proc.lock().stream_hold = Some(self.offset);
            }
            let text = self.text.push(self.buf.got(n));
            if !text.is_empty() {
                lines.push(line(json!({ self.key: text })));
            }
            if !self.buf.filled(n) {
                break;
            }
        }
        lines
    }

    fn finish(&mut self) -> Option<Bytes> {
        let text = self.text.finish();
        (!text.is_empty()).then(|| line(json!({ self.key: text })))
    }
}

/// Passes the command's output on as it grows, until the call has ended and all of it was
/// read.
async fn follow(
    state: &ServerState,
    session: &str,
    id: oneshot::Receiver<String>,
    done: watch::Receiver<bool>,
    tx: &mpsc::Sender<Bytes>,
) {
    // No id: the command never started (refused, or an approval is pending).
    let Ok(id) = id.await else { return };
    let Ok(container) = state.app.sessions.ensure(session).await else {
        return;
    };
    let files = match RunFiles::open(&container.run_dir, &id, Some(container.owner)) {
        Ok(f) => f,
        Err(e) => {
            let note = format!("[moat] failed to open the output of {id}: {e}\n");
            let _ = tx.send(line(json!({ "stderr": note }))).await;
            return;
        }
    };
    let secrets = state.app.secrets.for_target(session, false);
    let proc = state.app.registry.get(session, &id);
    let mut tails = Vec::new();
    for key in ["stdout", "stderr"] {
        let ext = if key == "stdout" { "out" } else { "err" };
        match files.open_stream(ext) {
            Ok(file) => tails.push(Tail::new(
                key,
                Arc::new(file),
                secrets.clone(),
                (key == "stdout").then(|| proc.clone()).flatten(),
            )),
            Err(e) => {
                let note = format!("[moat] failed to open the {key} of {id}: {e}\n");
                let _ = tx.send(line(json!({ "stderr": note }))).await;
            }
        }
    }
    pass_on(&mut tails, done, tx).await;
}

/// Passes the files on as they grow until `done` says the call ended, then reads them to
/// their end once more and flushes what was held back.
pub(super) async fn pass_on(
    tails: &mut [Tail],
    mut done: watch::Receiver<bool>,
    tx: &mpsc::Sender<Bytes>,
) {
    loop {
        // Read after seeing the end: what the command wrote last is read in this round.
        let ended = *done.borrow();
        let mut behind = false;
        for t in tails.iter_mut() {
            for l in t.read() {
                if tx.send(l).await.is_err() {
                    return;
                }
            }
            behind |= t.behind;
        }
        if behind {
            // A bounded read left more: come back at once, after the others had their turn.
            tokio::task::yield_now().await;
            continue;
        }
        if ended {
            for t in tails.iter_mut() {
                if let Some(l) = t.finish() {
                    let _ = tx.send(l).await;
                }
            }
            return;
        }
        tokio::select! {
            _ = done.changed() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}
