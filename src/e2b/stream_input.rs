//! `StreamInput` (E2B's SDK 2.63 on): a client stream of a process's input. The first
//! message names the process (`start`), each later one carries input (`data`) or nothing
//! (`keepalive`); the answer, once the client ends its stream, is one empty message and the
//! end envelope, or the end envelope with the error that stopped it (docs/e2b.md,
//! "Processes").
//!
//! The body is read as it arrives ([`connect::Decoder`]): input reaches the process envelope
//! by envelope, and no more than one envelope is held.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::connect::{self, Code, RpcError};
use super::state::E2bState;
use super::wire::StreamInputRequest;
use crate::process::Proc;

/// `/process.Process/StreamInput`.
pub async fn stream_input(
    State(state): State<Arc<E2bState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let sandbox = match super::process::sandbox(&state, &headers) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    let ended = feed(&state, &sandbox, body).await;
    let mut out = Vec::new();
    if ended.is_ok() {
        out.extend_from_slice(&connect::message(&serde_json::json!({})));
    }
    out.extend_from_slice(&connect::end(ended.err().as_ref()));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/connect+json")],
        out,
    )
        .into_response()
}

/// Writes the stream's input to the process its first message names, until the body ends.
async fn feed(
    state: &E2bState,
    sandbox: &super::sandboxes::Sandbox,
    body: Body,
) -> Result<(), RpcError> {
    let mut chunks = body.into_data_stream();
    let mut decoder = connect::Decoder::default();
    let mut target: Option<Arc<Proc>> = None;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| {
            RpcError::new(
                Code::Unavailable,
                format!("failed to read the input stream: {e}"),
            )
        })?;
        decoder.push(&chunk);
        while let Some(envelope) = decoder.next_envelope() {
            let (flags, payload) = envelope?;
            if flags != 0 {
                return Err(RpcError::new(
                    Code::InvalidArgument,
                    format!(
                        "an input message has flags {flags:#04x} (compressed or not a message)"
                    ),
                ));
            }
            let msg: StreamInputRequest = serde_json::from_slice(&payload).map_err(|e| {
                RpcError::new(
                    Code::InvalidArgument,
                    format!("failed to read an input message: {e}"),
                )
            })?;
            step(state, sandbox, &mut target, msg).await?;
        }
    }
    decoder.finish()
}

/// One message of the stream.
async fn step(
    state: &E2bState,
    sandbox: &super::sandboxes::Sandbox,
    target: &mut Option<Arc<Proc>>,
    msg: StreamInputRequest,
) -> Result<(), RpcError> {
    if let Some(start) = msg.start {
        if target.is_some() {
            return Err(RpcError::new(
                Code::InvalidArgument,
                "the input stream names its process twice",
            ));
        }
        let (_, proc) = super::process::selected(state, sandbox, &start.process)?;
        *target = Some(proc);
        return Ok(());
    }
    if let Some(data) = msg.data {
        let Some(proc) = target.as_ref() else {
            return Err(RpcError::new(
                Code::InvalidArgument,
                "the input stream sent data before naming its process (`start`)",
            ));
        };
        let bytes = data.input.stdin.or(data.input.pty).unwrap_or_default();
        proc.write(bytes).await.map_err(|e| {
            RpcError::new(
                Code::FailedPrecondition,
                format!("failed to write the input: {e}"),
            )
        })?;
    }
    // A keepalive, or an empty message: nothing to do.
    Ok(())
}
